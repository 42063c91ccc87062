"""The environment a worker process started with, before scaletune's own imports changed it:
importing XGBoost (or scikit-learn) sets KMP_DUPLICATE_LIB_OK and KMP_INIT_AT_FORK for Intel's
OpenMP. A user's script inherits this one, plus what scaletune sets for it on purpose."""

from __future__ import annotations

import os

_started_with: dict[str, str] | None = None


def remember_environment() -> None:
    """Called first thing in a worker process (before any module is preloaded)."""
    global _started_with
    if _started_with is None:
        _started_with = dict(os.environ)


def inherited_environment() -> dict[str, str]:
    """What a program this worker starts should inherit (the live one, if never remembered)."""
    return dict(os.environ if _started_with is None else _started_with)
