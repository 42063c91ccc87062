"""The suite's own safety net (tests/conftest.py): a test whose main thread blocks where
pytest-timeout's SIGALRM cannot reach it ends the run with every thread's stack, rather than
hanging until CI's budget runs out."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]

BLOCKED = """
import signal
import time


def test_blocked_beyond_the_reach_of_sigalrm():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(120)
"""


def test_a_hang_sigalrm_cannot_reach_ends_the_run_with_its_stack(tmp_path: Path) -> None:
    (tmp_path / "test_blocked.py").write_text(BLOCKED)
    started = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.conftest",  # the watchdog, for a test file outside tests/
            "-p",
            "no:cacheprovider",
            "-o",
            "timeout=1",
            f"--basetemp={tmp_path / 'inner'}",  # its temp folders in this test's own
            str(tmp_path / "test_blocked.py"),
        ],
        cwd=REPOSITORY,
        env={**os.environ, "SCALETUNE_TEST_HANG_GRACE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert time.monotonic() - started < 30  # timeout 1 s + grace 1 s, and pytest's start-up
    assert "Timeout" in run.stderr
    assert "in test_blocked_beyond_the_reach_of_sigalrm" in run.stderr  # where it hung
