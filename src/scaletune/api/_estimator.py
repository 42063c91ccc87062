"""Estimator: describe a training job in Python and start it with fit()."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scaletune.api._job import TrainingJob
from scaletune.api._notebook import in_notebook
from scaletune.api._session import Session
from scaletune.cluster import Group
from scaletune.spec import ChannelSpec, TrainingJobSpec, training_spec_from_dict
from scaletune.training import Stopper

ChannelInput = str | Path | ChannelSpec | Mapping[str, Any]


class Estimator:
    """The same fields as a job file; `fit(channels)` runs the job."""

    def __init__(
        self,
        algorithm: str,
        hyperparameters: Mapping[str, Any] | None = None,
        *,
        instance_count: int | Mapping[str, int] = 1,
        distribution: Mapping[str, Any] | None = None,
        seed: int = 0,
        max_runtime_seconds: float = 86_400.0,
        output_path: str | Path | None = None,
        name: str | None = None,
        checkpoint: Mapping[str, Any] | None = None,
        retry: Mapping[str, Any] | None = None,
        session: Session | None = None,
    ) -> None:
        """`checkpoint` and `retry` are the job file's tables of those names, as dicts:
        `checkpoint={"every_steps": 10}`, `retry={"max_attempts": 3}`; `instance_count` a
        number of workers, or `{"min": 2, "max": 8}` for an elastic job."""
        self._fields: dict[str, Any] = {
            "algorithm": algorithm,
            "hyperparameters": dict(hyperparameters or {}),
            "instance_count": (
                instance_count if isinstance(instance_count, int) else dict(instance_count)
            ),
            "distribution": dict(distribution or {}),
            "seed": seed,
            "max_runtime_seconds": max_runtime_seconds,
        }
        if output_path is not None:
            self._fields["output_path"] = str(output_path)
        if name is not None:
            self._fields["name"] = name
        if checkpoint is not None:
            self._fields["checkpoint"] = dict(checkpoint)
        if retry is not None:
            self._fields["retry"] = dict(retry)
        self.session = session

    def spec(self, channels: Mapping[str, ChannelInput]) -> TrainingJobSpec:
        """The validated spec `fit` would run (raises InvalidInputError naming a bad value)."""
        return training_spec_from_dict(
            {
                **self._fields,
                "channels": {name: _channel_dict(value) for name, value in channels.items()},
            }
        )

    def fit(self, channels: Mapping[str, ChannelInput], *, wait: bool = True) -> TrainingJob:
        spec = self.spec(channels)
        session = self.session or Session()
        owns_session = self.session is None
        try:
            job = session.controller.prepare(spec)
        except BaseException:
            if owns_session:
                session.close()
            raise
        stop = Stopper()
        groups: list[Group] = []

        def run() -> None:
            try:
                session.controller.run(job, stop, on_started=groups.append)
            finally:
                groups.clear()
                if owns_session:  # the workers go; the store stays open for the handle
                    session.backend.close()

        steps = job.algorithm.full_resource(job.hyperparameters)
        if wait and not in_notebook():
            run()  # Ctrl-C: the job is recorded as Stopped, then the interrupt goes on up
            return TrainingJob(job.id, session.store, location=session.location, steps=steps)
        thread = threading.Thread(target=run, name=f"scaletune-{job.id}", daemon=True)
        handle = TrainingJob(
            job.id,
            session.store,
            thread=thread,
            stopper=stop,
            worker_pids=lambda: groups[-1].pids if groups else [],  # the latest attempt's
            location=session.location,
            steps=steps,
        )
        thread.start()
        if wait:  # in a notebook: in a thread, so that the wait can show it running
            handle.wait()
        return handle


def _channel_dict(value: ChannelInput) -> Any:
    if isinstance(value, ChannelSpec):
        return value.model_dump(exclude_none=True)
    if isinstance(value, str | Path):
        return {"path": str(value)}
    return dict(value)
