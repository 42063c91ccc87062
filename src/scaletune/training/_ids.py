"""Job ids people can read and sort: name-YYYYmmdd-HHMMSS-xxxx."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime


def new_job_id(prefix: str, now: float) -> str:
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{secrets.token_hex(2)}"
