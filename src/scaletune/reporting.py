"""`scaletune.report()` for users' scripts: a no-op outside scaletune, so scripts run alone.

Inside a job, the worker that launched the script reads its stdout; a report is one line with
a prefix and JSON, which the worker turns into a metric report (rank 0's count)."""

from __future__ import annotations

import json
import os
import sys

REPORT_ENV = "SCALETUNE_REPORT"
REPORT_PREFIX = "@@scaletune-report "


def report(step: int, **metrics: float) -> None:
    """Record `metrics` at `step` (an epoch, a round) for the running training job."""
    if os.environ.get(REPORT_ENV) != "stdout":
        return
    payload = {"step": int(step), "metrics": {name: float(v) for name, v in metrics.items()}}
    sys.stdout.write(REPORT_PREFIX + json.dumps(payload) + "\n")
    sys.stdout.flush()
