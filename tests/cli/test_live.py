"""The live progress line of `train` and `tune`, read from a real pseudo-terminal, and its
absence where the output is piped or JSON."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.cli.test_tuning_cli import TUNING

ROUNDS = 1500  # a second or two of reports: the line is redrawn several times meanwhile
JOB = (
    'algorithm = "xgboost"\ninstance_count = 1\n'
    f'[hyperparameters]\nnum_round = {ROUNDS}\nmax_depth = 2\neval_metric = "auc"\n'
    '[channels.train]\ndataset = "breast-cancer"\n'
    '[channels.validation]\ndataset = "breast-cancer"\n'
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ELAPSED = re.compile(r"\d:\d\d:\d\d")


def _in_a_terminal(args: list[str], *, stdout_piped: bool = False) -> tuple[int, str, str]:
    """Run `scaletune ARGS` with a pseudo-terminal of 240 columns as its terminal (stdout
    too unless `stdout_piped`): its exit code, what the terminal showed (escape sequences
    removed, carriage returns kept) and what went to the pipe."""
    main_fd, terminal_fd = pty.openpty()
    fcntl.ioctl(terminal_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 240, 0, 0))
    environment = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "240"}
    for name in ("NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR"):
        environment.pop(name, None)
    process = subprocess.Popen(
        [sys.executable, "-m", "scaletune", *args],
        stdin=terminal_fd,
        stdout=subprocess.PIPE if stdout_piped else terminal_fd,
        stderr=terminal_fd,
        env=environment,
        close_fds=True,
    )
    os.close(terminal_fd)
    shown = bytearray()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main_fd], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # the terminal's other end closed: the command ended
                break
            if not chunk:
                break
            shown += chunk
        piped = process.stdout.read().decode() if process.stdout else ""
        code = process.wait(timeout=60)
    finally:
        os.close(main_fd)
        if process.poll() is None:
            process.kill()
            process.wait()
    return code, ANSI.sub("", shown.decode(errors="replace")), piped


def _steps_shown(shown: str) -> set[int]:
    return {int(step) for step in re.findall(rf"step (\d+) of {ROUNDS}", shown)}


@pytest.mark.usefixtures("store_path")
def test_train_shows_its_step_of_its_steps_metrics_and_time_in_a_terminal(
    tmp_path: Path,
) -> None:
    job = tmp_path / "job.toml"
    job.write_text(JOB)
    code, shown, _ = _in_a_terminal(["train", str(job)])
    assert code == 0, shown
    steps = _steps_shown(shown)
    assert ROUNDS in steps  # the line as the job ended stays on the terminal
    assert len(steps) >= 2, shown  # and it was drawn while the job ran, not only at its end
    last = shown[shown.rindex(f"step {ROUNDS} of {ROUNDS}") :].splitlines()[0]
    assert "validation:auc=" in last and ELAPSED.search(last), last
    assert "Completed" in shown  # the summary follows the line


@pytest.mark.usefixtures("store_path")
def test_train_draws_no_line_when_piped_or_json(tmp_path: Path) -> None:
    job = tmp_path / "job.toml"
    job.write_text(JOB.replace(f"num_round = {ROUNDS}", "num_round = 50"))
    piped = subprocess.run(
        [sys.executable, "-m", "scaletune", "train", str(job)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "step " not in piped.stderr and "step " not in piped.stdout
    assert "Completed" in piped.stdout
    # --json in a terminal: the terminal shows nothing of the run, stdout is one object
    code, shown, printed = _in_a_terminal(["train", str(job), "--json"], stdout_piped=True)
    assert code == 0
    assert "step " not in shown
    assert json.loads(printed)["status"] == "Completed"


@pytest.mark.usefixtures("store_path")
def test_tune_shows_trials_ended_running_best_and_time_in_a_terminal(tmp_path: Path) -> None:
    file = tmp_path / "tuning.toml"
    file.write_text(TUNING)
    code, shown, _ = _in_a_terminal(["tune", str(file)])
    assert code == 0, shown
    ended = re.findall(
        r"(\d) of 4 trials ended \((\d) completed, (\d) stopped, (\d) failed\), "
        r"(\d) running; best (\S+)",
        shown,
    )
    assert ended, shown
    final = ended[-1]
    assert final[0] == "4" and final[4] == "0"  # the line as the tuning job ended
    assert int(final[1]) + int(final[2]) == 4 and final[3] == "0"
    assert float(final[5]) > 0.5  # a validation AUC
    line = shown[shown.rindex("4 of 4 trials ended") :].splitlines()[0]
    assert ELAPSED.search(line), line
