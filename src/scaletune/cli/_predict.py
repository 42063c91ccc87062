"""`scaletune predict JOB_ID --data ... --output FILE`: batch prediction with a finished job's
model (SageMaker's batch transform), on this machine or split over N workers of the backend
the job ran on (its staging carrying the rows between machines)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scaletune.cli._options import (
    JsonOption,
    RayAddressOption,
    StoreOption,
    err,
    open_backend,
    open_store,
)
from scaletune.cli._stdout import print_json
from scaletune.errors import InvalidInputError

if TYPE_CHECKING:
    from scaletune.store import Store


def predict(
    job_id: Annotated[
        str | None, typer.Argument(help="The training job whose model scores the rows.")
    ] = None,
    data: Annotated[
        str,
        typer.Option(
            "--data",
            help="A CSV file, folder or URL as a channel takes it (label first, or the features "
            "alone), or a built-in dataset: 'breast-cancer' (its test split), 'digits:validation'",
        ),
    ] = "",
    output: Annotated[
        Path | None, typer.Option("--output", help="Where to write the predictions (CSV).")
    ] = None,
    instance_count: Annotated[
        int,
        typer.Option(
            "--instance-count", help="Workers to split the rows over (their order is kept)."
        ),
    ] = 1,
    best_of: Annotated[
        str | None,
        typer.Option("--best-of", help="Use the best trial of this tuning job instead of JOB_ID."),
    ] = None,
    dataset_file: Annotated[
        Path | None,
        typer.Option("--dataset-file", help="For --data bank-marketing or mnist: its files."),
    ] = None,
    staging: Annotated[
        str | None,
        typer.Option(
            "--staging",
            help="With --instance-count: a folder every node mounts, or a URL, that the rows, "
            "the model and the predictions pass through; default: the job's cluster.staging.",
        ),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="With --instance-count: 'local' or 'ray'; default: the backend the job ran on.",
        ),
    ] = None,
    ray_address: RayAddressOption = None,
    json_output: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Score a table with a finished job's model and write one prediction per row, in order."""
    from scaletune.spec import BackendName, is_url
    from scaletune.training import BatchPredictor, read_input

    if (job_id is None) == (best_of is None):
        raise InvalidInputError("give a JOB_ID or --best-of TUNING_ID, one of them")
    if not data:
        raise InvalidInputError("--data: what to score is missing")
    if output is None:
        raise InvalidInputError("--output: where to write the predictions is missing")
    if not output.parent.is_dir():
        raise InvalidInputError(f"--output {str(output)!r}: its folder does not exist")
    names = [name.value for name in BackendName]
    if backend is not None and backend not in names:
        raise InvalidInputError(f"--backend {backend!r}: give one of {', '.join(names)}")
    location = None if staging is None else staging if is_url(staging) else Path(staging)
    with open_store(store) as records:
        chosen = _best_trial(records, best_of) if best_of is not None else job_id or ""
        table = read_input(data, dataset_file)
        # Checked before a backend starts (a Ray instance takes seconds to start).
        plan = BatchPredictor(records).check(
            chosen, table, instance_count=instance_count, staging=location
        )
        if instance_count == 1:
            predictions = BatchPredictor(records).run(plan)
        else:
            name = BackendName(backend or plan.record.spec_view.backend)
            workers = open_backend(name, ray_address, float(instance_count), warm_pool=False)
            with contextlib.closing(workers):
                predictions = BatchPredictor(records, workers).run(plan)
    partial = output.with_name(output.name + ".partial")
    predictions.write_csv(partial)
    partial.replace(output)  # whole or absent
    summary = {
        "job": predictions.job_id,
        "rows": predictions.rows,
        "workers": predictions.workers,
        "seconds": round(predictions.seconds, 3),
        "output": str(output),
    }
    if json_output:
        print_json(summary)
    else:
        err.print(
            f"{predictions.rows} rows scored by job {predictions.job_id} on "
            f"{predictions.workers} worker(s) in {predictions.seconds:.2f} s: {output}",
            highlight=False,
            soft_wrap=True,
        )


def _best_trial(records: Store, tuning_id: str) -> str:
    best = records.get_tuning_job(tuning_id).best_training_job
    if best is None:
        raise InvalidInputError(f"--best-of {tuning_id!r}: the tuning job has no best trial yet")
    return best
