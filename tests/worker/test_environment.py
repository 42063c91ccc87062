"""A user's script inherits the environment its worker started with, not what scaletune's own
imports set in the worker afterwards (XGBoost's KMP_* variables); a warm worker adopts the
controller's environment for each task."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from scaletune.worker import _environment


def test_what_the_worker_set_after_it_started_is_not_inherited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_environment, "_started_with", None)
    monkeypatch.setenv("ST_GIVEN_BY_THE_USER", "1")
    _environment.remember_environment()
    monkeypatch.setenv("ST_SET_BY_AN_IMPORT", "1")  # as XGBoost's import does
    inherited = _environment.inherited_environment()
    assert inherited["ST_GIVEN_BY_THE_USER"] == "1" and "ST_SET_BY_AN_IMPORT" not in inherited
    _environment.remember_environment()  # once remembered, for good
    assert "ST_SET_BY_AN_IMPORT" not in _environment.inherited_environment()


def test_a_fresh_worker_process_remembers_before_its_preloaded_imports() -> None:
    code = (
        "from scaletune.worker import remember_environment, inherited_environment\n"
        "remember_environment()\n"
        "import xgboost, os\n"
        "print('KMP_INIT_AT_FORK' in os.environ, 'KMP_INIT_AT_FORK' in inherited_environment())"
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KMP_")}
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["True", "False"]  # set by the import, not passed on


def test_an_adopted_environment_replaces_the_remembered_one_and_keeps_what_imports_set() -> None:
    code = (
        "import os\n"
        "from scaletune.worker import adopt_environment, inherited_environment\n"
        "from scaletune.worker import remember_environment\n"
        "remember_environment()\n"
        "os.environ['ST_SET_BY_AN_IMPORT'] = '1'\n"
        "adopt_environment({'ST_GIVEN': '2', 'PATH': os.environ['PATH']})\n"
        "print(sorted(k for k in os.environ if k.startswith('ST_')),"
        " sorted(k for k in inherited_environment() if k.startswith('ST_')))\n"
    )
    environment = {**os.environ, "ST_REMOVED": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    )
    # The controller's variables in both; the import's in the process's own alone.
    assert done.stdout.strip() == "['ST_GIVEN', 'ST_SET_BY_AN_IMPORT'] ['ST_GIVEN']"
