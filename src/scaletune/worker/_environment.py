"""The environment a worker process started with, before scaletune's own imports changed it:
importing XGBoost (or scikit-learn) sets KMP_DUPLICATE_LIB_OK and KMP_INIT_AT_FORK for Intel's
OpenMP. A user's script inherits this one, plus what scaletune sets for it on purpose.

A local worker lives on from job to job (the warm pool), or is forked from a fork server
started with the backend: each task brings the controller's environment as the job starts,
which the worker adopts, as a process started then would have inherited it."""

from __future__ import annotations

import os
from collections.abc import Mapping

_started_with: dict[str, str] | None = None


def remember_environment() -> None:
    """Called first thing in a worker process (before any module is preloaded)."""
    global _started_with
    if _started_with is None:
        _started_with = dict(os.environ)


def inherited_environment() -> dict[str, str]:
    """What a program this worker starts should inherit (the live one, if never remembered)."""
    return dict(os.environ if _started_with is None else _started_with)


def adopt_environment(controller: Mapping[str, str]) -> None:
    """The controller's environment, for the task this worker runs next: what the user set
    or removed since this worker started is seen in it and by its scripts. What this
    process's own imports set (and the controller did not) stays in its own environment."""
    global _started_with
    own = (
        {}
        if _started_with is None
        else {name: value for name, value in os.environ.items() if name not in _started_with}
    )
    _started_with = dict(controller)
    os.environ.clear()
    os.environ.update({**own, **controller})
