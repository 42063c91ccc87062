"""Running a real job whose workers run a test's program (one that kills itself at a known
step, say) in place of its algorithm's, everything else as the algorithm prepared it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from scaletune.algorithms import Algorithm
from scaletune.api import Session
from scaletune.cluster import Group
from scaletune.spec import TrainingJobSpec
from scaletune.store import TrainingJobRecord
from scaletune.worker import RendezvousNeeds, WorkerProgram


class ProgramOverride(Algorithm):
    def __init__(self, algorithm: Algorithm, program: WorkerProgram) -> None:
        self._algorithm, self._program = algorithm, program
        self.name = algorithm.name  # type: ignore[misc]

    def rendezvous_needs(self, spec: TrainingJobSpec) -> RendezvousNeeds:
        return self._algorithm.rendezvous_needs(spec)

    def full_resource(self, hyperparameters: BaseModel) -> int | None:
        return self._algorithm.full_resource(hyperparameters)

    @property
    def program(self) -> WorkerProgram:
        return self._program


def run_job(
    session: Session,
    spec: TrainingJobSpec,
    program: WorkerProgram | None = None,
    on_started: Callable[[Group], None] | None = None,
) -> TrainingJobRecord:
    """Prepare and run `spec` to its end, its workers running `program` if given."""
    job = session.controller.prepare(spec)
    if program is not None:
        job = dataclasses.replace(job, algorithm=ProgramOverride(job.algorithm, program))
    return session.controller.run(job, on_started=on_started)


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def digits_job(example: str, folder: Path) -> Path:
    """An example's job file on scikit-learn's digits (nothing to download or find on disk),
    its script where the example keeps it."""
    text = (EXAMPLES / example).read_text()
    text = text.replace(
        'dataset = "mnist"\ndataset_file = "../../shared/data/mnist"', 'dataset = "digits"'
    )
    text = text.replace('source_dir = "scripts"', f"source_dir = {str(EXAMPLES / 'scripts')!r}")
    assert "shared/data" not in text  # every channel replaced
    folder.mkdir(parents=True, exist_ok=True)
    (folder / example).write_text(text)
    return folder / example
