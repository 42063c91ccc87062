"""Which ending a broken attempt gets, and whether a retry may mend it: the cause told from its
consequences (a peer's broken connection), including when the backend is slow to see a death;
and how often the controller looks while reports stream in."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from scaletune.clock import SystemClock
from scaletune.cluster import Group
from scaletune.spec import training_spec_from_dict
from scaletune.store import JobStatus
from scaletune.training._attempt import JobRun
from scaletune.training._ending import Ending, Fault
from scaletune.training._stopper import Stopper
from scaletune.training._supervise import (
    ROOT_CAUSE_SECONDS,
    AttemptState,
    Timing,
    _with_root_cause,
    failure,
    supervise,
)
from scaletune.worker import (
    CheckpointSaved,
    Exited,
    Failed,
    Finished,
    LogOutput,
    Report,
    WorkerEvent,
)

RESET = "XGBoostError: [12:00:01] socket.cc:81: Failed to recv: Connection reset by peer"
TIMEOUT = "XGBoostError: Poll timeout: 3 seconds"


def _failed(rank: int, error: str) -> Failed:
    return Failed(rank, error, traceback="")


class ScriptedGroup:
    """A group whose polls return what the test lined up, one batch a poll; a rank falls
    silent after a given number of polls (the backend not yet knowing it died)."""

    def __init__(self, batches: list[list[WorkerEvent]], silent_after: int | None = None) -> None:
        self.batches = batches
        self.silent_after = silent_after
        self.polls = 0
        self.waited = 0.0

    def poll(self, timeout: float) -> list[WorkerEvent]:
        self.polls += 1
        self.waited += timeout
        return self.batches.pop(0) if self.batches else []

    def silent_ranks(self, timeout: float) -> list[int]:
        if self.silent_after is not None and self.polls >= self.silent_after:
            return [2]
        return []


def _root_cause(
    tmp_path: Path, group: ScriptedGroup, failures: list[Failed | Exited], limit: float = 10.0
) -> tuple[list[Failed | Exited], list[int]]:
    return _with_root_cause(lambda rank: tmp_path / f"worker-{rank}.log", group, failures, limit)  # type: ignore[arg-type]


def test_a_program_error_is_the_programs_fault_whatever_its_peers_saw() -> None:
    ending = failure([_failed(1, RESET), _failed(0, "ValueError: bad input")])
    assert ending == Ending(
        JobStatus.FAILED, "worker 0 failed: ValueError: bad input", Fault.PROGRAM
    )


def test_a_death_is_the_cause_before_any_error() -> None:
    ending = failure([_failed(0, RESET), Exited(2, -9, "killed by SIGKILL")])
    assert ending.fault == Fault.INFRASTRUCTURE
    assert ending.reason == "worker 2 exited unexpectedly (killed by SIGKILL)"


def test_broken_connections_alone_mean_a_peer_that_ended_without_a_word() -> None:
    ending = failure([_failed(0, "XGBoostError: stack\n  - " + RESET), _failed(1, RESET)])
    assert ending.fault == Fault.INFRASTRUCTURE  # retried: nothing says the program is wrong
    assert ending.reason == (
        "worker 0 lost a peer that ended without a word (killed, or its machine lost): " + RESET
    )


def test_a_silent_rank_is_named_as_the_one_lost() -> None:
    ending = failure([_failed(0, RESET)], silent=[2])
    assert ending.fault == Fault.INFRASTRUCTURE
    assert ending.reason == (
        "worker 2 fell silent as its peers lost it (killed, or its machine lost): worker 0 saw "
        + RESET
    )
    # A program's error still comes first: the silent one may have stopped for it.
    assert failure([_failed(0, "ValueError: x")], silent=[2]).fault == Fault.PROGRAM


def test_timeouts_alone_mean_a_peer_that_hung() -> None:
    ending = failure([_failed(0, TIMEOUT), _failed(1, RESET)])
    assert ending.fault == Fault.INFRASTRUCTURE
    assert ending.reason is not None and "collective timed out waiting on a peer" in ending.reason


def test_the_cause_that_shows_within_a_poll_ends_the_wait(tmp_path: Path) -> None:
    group = ScriptedGroup([[LogOutput(1, "last words\n"), _failed(1, "ValueError: x")]])
    failures, silent = _root_cause(tmp_path, group, [_failed(0, RESET)])
    assert (group.polls, silent) == (1, [])
    assert failure(failures).reason == "worker 1 failed: ValueError: x"
    assert (tmp_path / "worker-1.log").read_text() == "last words\n"


def test_a_death_the_backend_sees_late_is_still_found_as_the_cause(tmp_path: Path) -> None:
    # Ray learns of an actor lost with its node seconds after its peers' connections broke.
    late: list[list[WorkerEvent]] = [
        [],
        [],
        [],
        [Exited(2, None, "the actor died: its node was lost")],
    ]
    group = ScriptedGroup(late)
    failures, silent = _root_cause(tmp_path, group, [_failed(0, RESET)])
    assert (group.polls, silent) == (4, [])
    assert failure(failures).reason == (
        "worker 2 exited unexpectedly (the actor died: its node was lost)"
    )


def test_a_rank_silent_for_the_heartbeat_timeout_ends_the_wait(tmp_path: Path) -> None:
    group = ScriptedGroup([], silent_after=3)
    failures, silent = _root_cause(tmp_path, group, [_failed(0, RESET)])
    assert (group.polls, silent) == (3, [2])
    assert failure(failures, silent=silent).fault == Fault.INFRASTRUCTURE


def test_the_wait_is_bounded_by_the_heartbeat_timeout(tmp_path: Path) -> None:
    group = ScriptedGroup([])
    failures, silent = _root_cause(tmp_path, group, [_failed(0, RESET)], limit=2.0)
    assert silent == [] and failures == [_failed(0, RESET)]
    assert group.waited == pytest.approx(2.0 + ROOT_CAUSE_SECONDS)


def test_no_wait_past_one_poll_where_a_timeout_says_a_peer_hung(tmp_path: Path) -> None:
    # A hung peer's heartbeats go on: waiting for its silence would only delay the retry.
    group = ScriptedGroup([])
    _root_cause(tmp_path, group, [_failed(0, TIMEOUT)])
    assert group.polls == 1
    group = ScriptedGroup([])
    _root_cause(tmp_path, group, [Exited(1, -9)])
    assert group.polls == 0


def test_a_port_taken_before_tensorflow_binds_it_is_mended_by_a_retry() -> None:
    error = (
        "ScriptError: tf_mnist.py exited with code 1: File context.py, line 736 | "
        "tensorflow.python.framework.errors_impl.UnknownError: Could not start gRPC server"
    )
    ending = failure([_failed(0, error)])
    assert ending.fault == Fault.INFRASTRUCTURE
    assert ending.reason is not None and ending.reason.startswith(
        "worker 0 could not bind a rendezvous port"
    )


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            "LightGBMError: Binding port 39221 failed",
            "worker 0 could not bind a rendezvous port",
        ),
        (
            "LightGBMError: Socket recv error, Resource temporarily unavailable (code: 11)",
            "",
        ),
        ("LightGBMError: Socket recv error, Connection reset by peer (code: 104)", ""),
        # XGBoost's collective when a peer's machine went away: its socket hung up.
        ("XGBoostError: [histogram.h:197]: Poll hung up on the other end.", ""),
        ("XGBoostError: [allreduce.cc:41]: Ring Allreduce failed.", ""),
    ],
)
def test_network_faults_of_boosting_libraries_are_mended_by_a_retry(
    error: str, reason: str
) -> None:
    ending = failure([_failed(0, error)])
    assert ending.fault == Fault.INFRASTRUCTURE, ending
    assert (ending.reason or "").startswith(reason)


class _Writes:
    """The store's writer, as supervise hands it reports and checkpoints."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.checkpoints: list[int] = []

    def metrics(self, points: list[Any]) -> None:
        self.steps += sorted({point.step for point in points})

    def rejected(self, items: list[Any]) -> None:
        pass

    def checkpoint(self, attempt: int, step: int) -> None:
        self.checkpoints.append(step)


def test_while_reports_stream_in_the_controller_lets_them_gather_between_looks(
    tmp_path: Path,
) -> None:
    def report(step: int) -> Report:
        return Report(0, step, {"validation:auc": 0.5 + step / 100}, float(step))

    group = ScriptedGroup(
        [
            [report(1)],
            [report(2), report(3)],  # reports alone: the next look waits
            [report(4), LogOutput(0, "a line\n")],  # anything else: the next look is at once
            [report(5)],
            [CheckpointSaved(0, 5, 0.1)],
            [Finished(0)],
        ]
    )
    spec = training_spec_from_dict(
        {"algorithm": "xgboost", "channels": {"train": {"dataset": "breast-cancer"}}}
    )
    writes = _Writes()
    reported: list[int] = []
    job = SimpleNamespace(
        spec=spec,
        paths=SimpleNamespace(log_path=lambda rank: tmp_path / "log"),
        judged_steps=frozenset(),
    )
    run = SimpleNamespace(
        job=job,
        writer=writes,
        stop=Stopper(),
        started=SystemClock().monotonic(),
        on_report=lambda event: reported.append(event.step),
    )
    slept: list[tuple[int, float]] = []  # (the looks so far, how long)
    timing = Timing(
        poll_seconds=0.05,
        stop_check_seconds=60.0,
        metrics_flush_seconds=60.0,
        stop_grace_seconds=5.0,
        gather_seconds=0.02,
        sleep=lambda seconds: slept.append((group.polls, seconds)),
    )
    ending = _supervise(run, group, timing)
    assert ending.status is JobStatus.COMPLETED
    assert slept == [(1, 0.02), (2, 0.02), (4, 0.02)]  # after the looks that found reports alone
    assert reported == [1, 2, 3, 4, 5]
    assert (writes.steps, writes.checkpoints) == ([1, 2, 3, 4, 5], [5])
    assert (tmp_path / "log").read_text() == "a line\n"


class _JudgingGroup(ScriptedGroup):
    """Records what the controller tells the workers, and what it had told them before each
    look; at `release_at`'s look the tuner decides (`decide`)."""

    def __init__(self, batches: list[list[WorkerEvent]], release_at: int, decide: Any) -> None:
        super().__init__(batches)
        self.release_at, self.decide = release_at, decide
        self.told: list[str] = []
        self.told_before: list[list[str]] = []

    def poll(self, timeout: float) -> list[WorkerEvent]:
        self.told_before.append(list(self.told))
        events = super().poll(timeout)
        if self.polls == self.release_at:
            self.decide()
        return events

    def judged(self, step: int) -> None:
        self.told.append(f"judged {step}")

    def request_stop(self, goes_on: bool = False) -> None:
        self.told.append("stop")


def test_a_held_verdict_reaches_the_workers_once_released_its_stop_first(tmp_path: Path) -> None:
    # The tuner holds step 2's verdict (synchronous PBT: other trials are not there yet) and
    # decides a stop at the third look: then, and only then, the workers are told, the stop
    # first. Step 4's verdict, in at once, waits behind step 2's: they are passed in order.
    stop = Stopper()

    def decide() -> None:
        stop.request(JobStatus.STOPPED, "exploited at step 2")
        stop.verdicts.release(2)

    def on_report(event: Report) -> None:
        if event.step == 2:
            stop.verdicts.hold(2)

    group = _JudgingGroup(
        [
            [Report(0, 2, {"accuracy": 0.5}, 2.0)],
            [Report(0, 4, {"accuracy": 0.6}, 4.0)],
            [],
            [Finished(0, stopped=True)],  # it stopped at step 2, as told
        ],
        release_at=3,
        decide=decide,
    )
    job = SimpleNamespace(
        spec=training_spec_from_dict(
            {"algorithm": "xgboost", "channels": {"train": {"dataset": "breast-cancer"}}}
        ),
        paths=SimpleNamespace(log_path=lambda rank: tmp_path / "log"),
        judged_steps=frozenset({2, 4}),
    )
    run = SimpleNamespace(
        job=job, writer=_Writes(), stop=stop, started=SystemClock().monotonic(), on_report=on_report
    )
    timing = Timing(
        poll_seconds=0.01,
        stop_check_seconds=60.0,
        metrics_flush_seconds=60.0,
        stop_grace_seconds=5.0,
    )
    ending = _supervise(run, group, timing)
    assert group.told_before[:3] == [[], [], []]  # nothing judged while step 2 was held
    assert group.told[:4] == ["stop", "judged 2", "stop", "judged 4"]
    assert (ending.status, ending.reason) == (JobStatus.STOPPED, "exploited at step 2")


def _supervise(run: SimpleNamespace, group: ScriptedGroup, timing: Timing) -> Any:
    """One attempt supervised on a scripted group, never asked to stop from outside."""
    return supervise(
        cast(JobRun, run),
        cast(Group, group),
        AttemptState(number=1, size=1),
        asked_to_stop=lambda: False,
        clock=SystemClock(),
        timing=timing,
    )
