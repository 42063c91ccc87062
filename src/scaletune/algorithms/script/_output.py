"""A script's output: copied into its worker's log line by line, and rank 0's read for
reports, metric lines and the checkpoints the script saved itself."""

from __future__ import annotations

import collections
import contextlib
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from scaletune.reporting import CHECKPOINT_PREFIX, REPORT_PREFIX
from scaletune.spec import MetricDefinition
from scaletune.worker import WorkerContext, write_whole


def copy_output(
    stream: IO[bytes] | None, sink: IO[str], on_line: Callable[[str], None] | None
) -> threading.Thread:
    """Copy the script's output into the worker's log, line by line, handing each on."""

    def copy() -> None:
        assert stream is not None
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            if on_line is not None:
                on_line(line)
            sink.write(line)
            sink.flush()
        stream.close()

    thread = threading.Thread(target=copy, name="scaletune-script-output", daemon=True)
    thread.start()
    return thread


class OutputParser:
    """Rank 0's stdout: report lines, and lines the metric definitions match."""

    def __init__(
        self,
        ctx: WorkerContext,
        definitions: list[MetricDefinition],
        reporting: bool,
        judged_file: Path,
    ) -> None:
        self._ctx = ctx
        self._reporting = reporting  # its reports count; otherwise only checkpoints are read
        self._judged_file = judged_file  # where the script, held at a rung, reads its verdict
        self._patterns = [(d.name, re.compile(d.regex)) for d in definitions]
        self._counts: dict[str, int] = collections.Counter()
        self.last_step: int | None = None
        self.script_checkpoints = False  # it saves its own (scaletune.checkpoint)

    def feed(self, line: str) -> None:
        if line.startswith(CHECKPOINT_PREFIX):
            with contextlib.suppress(ValueError, KeyError, TypeError):
                payload = json.loads(line[len(CHECKPOINT_PREFIX) :])
                step, seconds = int(payload["step"]), float(payload["seconds"])
                self.script_checkpoints = True
                if self._ctx.checkpoints is not None:
                    self._ctx.checkpoints.saved_by_program(step, seconds)
                return
        if not self._reporting:
            return
        if line.startswith(REPORT_PREFIX):
            try:
                payload = json.loads(line[len(REPORT_PREFIX) :])
                step, metrics = int(payload["step"]), dict(payload["metrics"])
            except (ValueError, KeyError, TypeError):
                pass  # not a report after all: an ordinary line, for the regexes below
            else:
                self.last_step = step
                self._report(step, metrics)
                return
        for name, pattern in self._patterns:
            match = pattern.search(line)
            if match is None:
                continue
            groups = match.groupdict()
            text = groups.get("value") or match.group(1)
            try:
                value = float(text)
            except (TypeError, ValueError):
                continue
            self._counts[name] += 1
            step = int(groups["step"]) if groups.get("step") else self._counts[name]
            self.last_step = step
            self._report(step, {name: value})

    def _report(self, step: int, metrics: dict[str, float]) -> None:
        """Reported; at a judged step, once the verdict is in (ctx.report waits for it), the
        script, held there by `scaletune.report`, is told to go on, unless it was a stop:
        then the SIGTERM that follows ends its wait."""
        self._ctx.report(step, **metrics)
        if step in self._ctx.task.judged_steps and not self._ctx.stop_requested():
            write_whole(self._judged_file, str(step))
