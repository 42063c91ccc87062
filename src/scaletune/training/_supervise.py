"""One attempt of a job, watched to its end: reports to the store's writer, stops, the deadline,
workers that fail, die or fall silent; and which of those endings a retry can mend."""

from __future__ import annotations

import dataclasses
import math
import re
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scaletune.clock import Clock
from scaletune.cluster import Group
from scaletune.store import JobStatus, MetricPoint, RejectedMetric
from scaletune.training._attempt import JobRun
from scaletune.training._ending import Ending, Fault, ResizeCheck
from scaletune.training._notices import AttemptNotices
from scaletune.training._stopper import Stopper, VerdictGate
from scaletune.worker import CheckpointSaved, Exited, Failed, Finished, LogOutput, Notice, Report

ROOT_CAUSE_SECONDS = 0.5


@dataclass
class AttemptState:
    """What the controller learns while an attempt runs."""

    number: int
    size: int  # its workers (not a TensorFlow chief or servers)
    last_step: int | None = None  # the highest step reported
    final_metrics: dict[str, float] = field(default_factory=dict)
    pending: list[MetricPoint] = field(default_factory=list)  # reports not yet in the store


@dataclass
class Timing:
    """How often the controller looks, and how long a stopped program has to end."""

    poll_seconds: float
    stop_check_seconds: float
    metrics_flush_seconds: float
    stop_grace_seconds: float
    # While reports stream in (a boosting round's every millisecond), the controller lets
    # them gather this long between looks rather than waking for each: each wake takes a
    # core from the workers' threads, and a round waits for its slowest thread. Anything
    # else a worker sends (an error, its end, a checkpoint) is seen at the next look.
    gather_seconds: float = 0.0
    sleep: Callable[[float], None] = time.sleep


def supervise(
    run: JobRun,
    group: Group,
    state: AttemptState,
    *,
    asked_to_stop: Callable[[], bool],
    clock: Clock,
    timing: Timing,
    resize: ResizeCheck | None = None,
    notices: AttemptNotices | None = None,
) -> Ending:
    spec, log_path, writer = run.job.spec, run.job.paths.log_path, run.writer
    stop, started, on_report = run.stop, run.started, run.on_report
    judged_steps, verdicts = run.job.judged_steps, run.stop.verdicts
    awaiting: set[int] = set()  # judged steps reported whose verdict is not in yet
    deadline = started + spec.max_runtime_seconds
    heartbeat_timeout = spec.retry.heartbeat_timeout_seconds
    next_stop_check = next_flush = next_notice_check = clock.monotonic()
    finished: set[int] = set()
    cut_short = False  # a worker's program ended because it was asked to
    stopping: Ending | None = None  # set once the workers were asked to stop
    grace_ends = float("inf")
    servers_told = False  # ParameterServerStrategy: the servers told that the chief is done
    streaming = False  # the last look found reports alone: the next waits for more
    while len(finished) < spec.tasks_at(state.size):
        now = clock.monotonic()
        failures: list[Failed | Exited] = []
        noticed = False  # a worker's machine is going, and it is news
        wait = min(timing.poll_seconds, max(min(deadline, grace_ends) - now, 0.0))
        if streaming and timing.gather_seconds > 0:
            timing.sleep(min(timing.gather_seconds, wait))
        events = group.poll(wait)
        streaming = bool(events) and all(isinstance(event, Report) for event in events)
        for event in events:
            if isinstance(event, Report):
                for name, value in event.metrics.items():
                    state.pending.append(MetricPoint(name, event.step, value, event.time))
                    state.final_metrics[name] = value
                state.last_step = max(state.last_step or event.step, event.step)
                if event.rejected:  # rare: handed over at once
                    writer.rejected(
                        [
                            RejectedMetric(name, event.step, text, event.time)
                            for name, text in event.rejected.items()
                        ]
                    )
                on_report(event)
                if event.step in judged_steps:  # its task waits for the verdict
                    awaiting.add(event.step)
                    _pass_verdicts(group, stop, verdicts, awaiting)
            elif isinstance(event, CheckpointSaved):
                # The reports up to it first: a resume needs every one of them stored.
                writer.metrics(state.pending)
                state.pending.clear()
                writer.checkpoint(state.number, event.step)
            elif isinstance(event, LogOutput):
                append_log(log_path, event)
            elif isinstance(event, Finished):
                finished.add(event.rank)
                cut_short = cut_short or event.stopped
            elif isinstance(event, Failed | Exited):
                failures.append(event)
            elif isinstance(event, Notice) and notices is not None:
                noticed = notices.from_worker(event) or noticed
        if awaiting:  # held for other trials (synchronous PBT): released meanwhile?
            _pass_verdicts(group, stop, verdicts, awaiting)
        if spec.tensorflow_parameter_server and 0 in finished and not servers_told:
            # The chief's training loop is the job; its workers and parameter servers serve
            # until told to end (their stop ends them at once, and they finish).
            group.request_stop()
            servers_told = True
        if failures:
            failures, silent = _with_root_cause(log_path, group, failures, heartbeat_timeout)
            broken = failure(failures, spec.task_name, silent)
            if stopping is not None:  # it was ending anyway: it ends as asked, without a model
                # (and a resize, or a notice's, goes on in a new attempt all the same)
                reason = f"{stopping.reason}; then {broken.reason}"
                return dataclasses.replace(stopping, reason=reason)
            return broken
        now = clock.monotonic()
        silent = group.silent_ranks(heartbeat_timeout)
        if silent:
            return Ending(
                JobStatus.FAILED,
                f"worker {silent[0]} sent nothing for {heartbeat_timeout:g} s (stopped, hung "
                "or its machine lost; retry.heartbeat_timeout_seconds)",
                Fault.INFRASTRUCTURE,
            )
        if now >= next_flush:
            next_flush = now + timing.metrics_flush_seconds
            writer.metrics(state.pending)
            state.pending.clear()
        if notices is not None:
            if now >= next_notice_check:  # `jobs notice`'s, through the store
                next_notice_check = now + timing.stop_check_seconds
                noticed = notices.from_store() or noticed
            # A stop asked stays as asked; a resize under way is planned again without them.
            if noticed and (stopping is None or stopping.resize_to is not None):
                stopping = notices.respond(notices.leaving)
                group.request_stop(goes_on=True)  # the workers save a checkpoint as they stop
            if noticed:  # whatever it was ending for, their machines go at the deadline
                grace_ends = min(grace_ends, now + notices.seconds_left())
        if stopping is not None:
            if now >= grace_ends:  # the program did not stop by itself: it is killed
                return stopping
            continue
        if stop.is_set():
            stopping = Ending(stop.status, stop.reason)
        elif now >= next_stop_check and asked_to_stop():
            stopping = Ending(JobStatus.STOPPED, "stop requested")
        elif now >= deadline:
            stopping = Ending(
                JobStatus.STOPPED, f"max_runtime_seconds={spec.max_runtime_seconds:g} reached"
            )
        if now >= next_stop_check:
            next_stop_check = now + timing.stop_check_seconds
            resizing = None if stopping is not None or resize is None else resize()
            if resizing is not None:  # the workers save a checkpoint as they stop
                stopping = Ending(JobStatus.STOPPED, resizing.reason, resize_to=resizing.size)
        if stopping is not None:
            # Ask first: a program that checks ends cleanly at its next step (saving a
            # checkpoint, where the job keeps them) and its workers stay warm.
            group.request_stop(goes_on=_goes_on(stopping))
            grace_ends = now + (stop.grace_seconds or timing.stop_grace_seconds)
    # A program that ran to its end before it saw the stop is complete, model and all: a trial
    # paused at a rung after its last step (a race with fast rounds) is not paused unsaved.
    return stopping if stopping is not None and cut_short else Ending(JobStatus.COMPLETED)


def _pass_verdicts(group: Group, stop: Stopper, verdicts: VerdictGate, awaiting: set[int]) -> None:
    """Tell the task each verdict that is in, oldest first; a stop it decided reaches the
    workers before the word that the step is judged."""
    for step in sorted(awaiting):
        if not verdicts.is_in(step):
            return
        awaiting.discard(step)
        if stop.is_set():
            group.request_stop(goes_on=_goes_on(Ending(stop.status, stop.reason)))
        group.judged(step)


def _goes_on(ending: Ending) -> bool:
    """Whether the job goes on from the checkpoint its workers save as they stop."""
    return ending.resize_to is not None or ending.status is JobStatus.PAUSED


def _with_root_cause(
    log_path: Callable[[int], Path],
    group: Group,
    failures: list[Failed | Exited],
    silence_limit: float,
) -> tuple[list[Failed | Exited], list[int]]:
    """A worker's death, or its error, makes its peers' collectives fail: give the cause
    time to show (and the workers' last output time to reach the log). Its peers see a worker
    killed outright at once (their connections break), the backend only later (Ray learns an
    actor died with its node seconds on, more on a busy machine): while broken connections are
    all that is known, wait on, up to `silence_limit`, for the worker's own end or its
    silence. The failures, and the ranks found silent (none once a cause showed)."""
    failures = list(failures)
    # Counted in polls, not read off a clock: a fake clock need not move while this waits.
    polls = 1 + math.ceil(silence_limit / ROOT_CAUSE_SECONDS)
    for _ in range(polls):
        if any(isinstance(event, Exited) for event in failures):
            break
        for event in group.poll(ROOT_CAUSE_SECONDS):
            if isinstance(event, Exited | Failed):
                failures.append(event)
            elif isinstance(event, LogOutput):
                append_log(log_path, event)
        if not _only_broken_connections(failures):
            break
        silent = group.silent_ranks(silence_limit)
        if silent:
            return failures, silent
    return failures, []


def _only_broken_connections(failures: list[Failed | Exited]) -> bool:
    """Whether every failure so far is a peer's connection that broke (no one's own error)."""
    return all(
        isinstance(event, Failed)
        and _PEER_GONE.search(event.error)
        and not _COLLECTIVE_TIMEOUT.search(event.error)
        for event in failures
    )


# How a collective says it waited too long on a peer: gloo, NCCL's watchdog, XGBoost's
# collective, scaletune's parameter server client.
_COLLECTIVE_TIMEOUT = re.compile(
    r"Timed out waiting \d+ms for (recv|send) operation"
    r"|collective operation timeout"
    r"|Poll timeout: ?\d+ seconds"
    r"|collective timed out"
    r"|Socket recv error, Resource temporarily unavailable"  # LightGBM's, past its time_out
)
# A user's script (algorithm "script") that a signal ended, not its own error.
_KILLED = re.compile(r"was killed by (SIG[A-Z0-9]+|signal \d+)")
# A port of the rendezvous taken between being chosen and being bound (by another job, say).
# (TensorFlow's gRPC server says only that it could not add its port, then could not start.)
_BIND_FAILED = re.compile(
    r"[Aa]ddress already in use|EADDRINUSE|Failed to add port to server|Could not start gRPC server"
    r"|Binding port \d+ failed"  # LightGBM's network
)
# What its peers see once a worker stuck in one gives up, or is killed.
_PEER_GONE = re.compile(
    r"Connection (closed|reset) by peer|Broken pipe|Ring [Aa]ll(reduce|gather)|Poll error"
    r"|Poll hung up on the other end"  # XGBoost's collective, a peer's socket closed (POLLHUP)
    r"|Failed to recv|parameter server"
)


def failure(
    failures: list[Failed | Exited],
    name: Callable[[int], str] = lambda rank: f"worker {rank}",
    silent: Sequence[int] = (),
) -> Ending:
    """The job's reason: a worker that died if any (the cause); a rendezvous port that could
    not be bound; a worker that fell silent as its peers lost it; collectives that timed out
    or connections that broke with nothing else wrong, which mean a peer that hung or ended
    without a word (killed, its machine lost); else the program's first error. Only the last
    is the program's fault; a retry mends the others."""
    died = [event for event in failures if isinstance(event, Exited)]
    if died:
        event = died[0]
        return Ending(
            JobStatus.FAILED,
            f"{name(event.rank)} exited unexpectedly "
            f"({event.reason or _exit_text(event.exitcode)})",
            Fault.INFRASTRUCTURE,
        )
    errors = [event for event in failures if isinstance(event, Failed)]
    killed = [event for event in errors if _KILLED.search(event.error)]
    if killed:  # a script killed from outside: as a worker's death, not its program's error
        first = killed[0]
        return Ending(
            JobStatus.FAILED,
            f"{name(first.rank)} failed: {_matching_line(first.error, _KILLED)}",
            Fault.INFRASTRUCTURE,
        )
    unbound = [event for event in errors if _BIND_FAILED.search(event.error)]
    if unbound:
        first = unbound[0]
        return Ending(
            JobStatus.FAILED,
            f"{name(first.rank)} could not bind a rendezvous port (taken by another process "
            f"meanwhile): {_matching_line(first.error, _BIND_FAILED)}",
            Fault.INFRASTRUCTURE,
        )
    timed_out = [event for event in errors if _COLLECTIVE_TIMEOUT.search(event.error)]
    broken = [event for event in errors if _PEER_GONE.search(event.error)]
    program = [
        event
        for event in errors
        if not _COLLECTIVE_TIMEOUT.search(event.error) and not _PEER_GONE.search(event.error)
    ]
    if silent and not program:
        return Ending(
            JobStatus.FAILED,
            f"{name(silent[0])} fell silent as its peers lost it (killed, or its machine lost)"
            + (
                f": {name(broken[0].rank)} saw {_matching_line(broken[0].error, _PEER_GONE)}"
                if broken
                else ""
            ),
            Fault.INFRASTRUCTURE,
        )
    if timed_out and not program:
        first = timed_out[0]
        return Ending(
            JobStatus.FAILED,
            f"{name(first.rank)}'s collective timed out waiting on a peer (hung, or the "
            f"network broke; retry.collective_timeout_seconds): "
            f"{_matching_line(first.error, _COLLECTIVE_TIMEOUT)}",
            Fault.INFRASTRUCTURE,
        )
    if broken and not program:  # a peer ended without a word, and no one saw how
        first = broken[0]
        return Ending(
            JobStatus.FAILED,
            f"{name(first.rank)} lost a peer that ended without a word (killed, or its machine "
            f"lost): {_matching_line(first.error, _PEER_GONE)}",
            Fault.INFRASTRUCTURE,
        )
    first = (program or errors)[0]
    return Ending(JobStatus.FAILED, f"{name(first.rank)} failed: {first.error}", Fault.PROGRAM)


def _matching_line(error: str, pattern: re.Pattern[str]) -> str:
    """The line that says so: XGBoost's errors are a stack of lines, the cause among them."""
    line = next(line for line in error.splitlines() if pattern.search(line))
    return line.strip(" -")


def append_log(log_path: Callable[[int], Path], event: LogOutput) -> None:
    with log_path(event.rank).open("a", encoding="utf-8") as log:
        log.write(event.text)


def _exit_text(exitcode: int | None) -> str:
    if exitcode is None:
        return "exit status unknown"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"
