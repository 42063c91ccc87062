"""A script's worker waits for it asleep (a pidfd on Linux), not by polling; without a pidfd
it falls back to `Popen.wait`, with the same answers."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from scaletune.algorithms.script._program import _ExitWatch

# Ends when its stdin closes: the test decides when, with no sleep in the child.
WAITS_FOR_STDIN = [sys.executable, "-c", "import sys; sys.stdin.read()"]


def _run_and_end(monkeypatch: pytest.MonkeyPatch, pidfd: bool) -> None:
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    process = subprocess.Popen(WAITS_FOR_STDIN, stdin=subprocess.PIPE)
    try:
        with _ExitWatch(process) as exited:
            assert (process.poll() is None) and not exited(0.0)
            assert not exited(0.05)  # still running: a timeout, not an exit
            assert process.stdin is not None
            process.stdin.close()
            deadline = time.monotonic() + 30
            while not exited(1.0):
                assert time.monotonic() < deadline
            assert process.returncode == 0  # reaped by the watch
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfd_open is Linux 5.3+")
def test_the_watch_sleeps_on_a_pidfd_until_the_script_exits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _run_and_end(monkeypatch, pidfd=True)


def test_without_a_pidfd_the_watch_polls_with_the_same_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _run_and_end(monkeypatch, pidfd=False)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfd_open is Linux 5.3+")
def test_waiting_on_a_pidfd_costs_no_wakeups() -> None:
    """Over half a second of waiting, the watch uses almost no CPU (Popen.wait(0.1) in a loop
    would wake about 40 times)."""
    process = subprocess.Popen(WAITS_FOR_STDIN, stdin=subprocess.PIPE)
    try:
        with _ExitWatch(process) as exited:
            switches = _voluntary_switches()
            assert not exited(0.5)
            assert _voluntary_switches() - switches <= 3
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait()


def _voluntary_switches() -> int:
    with open(f"/proc/self/task/{_thread_id()}/status") as status:
        line = next(line for line in status if line.startswith("voluntary_ctxt_switches"))
    return int(line.split()[1])


def _thread_id() -> int:
    import threading

    return threading.get_native_id()
