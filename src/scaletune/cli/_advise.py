"""`scaletune advise JOB_ID`: the predicted time and billable cost of reaching a finished
job's quality on 1..N workers, and the size to choose; optionally after short probes."""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Annotated

import typer

from scaletune.cli._options import JsonOption, StoreOption, err, open_backend, open_store, out
from scaletune.cli._render import print_table
from scaletune.cli._stdout import print_json
from scaletune.errors import InvalidInputError
from scaletune.store import JobStatus

if TYPE_CHECKING:
    from scaletune.advice import Advice, SpotAdvice, SpotMarket


def advise(
    job_id: str,
    metric: Annotated[
        str | None,
        typer.Option(help="The quality to reach (default: the job's first validation metric)."),
    ] = None,
    minimize: Annotated[
        bool | None,
        typer.Option(
            "--minimize/--maximize",
            help="Whether lower is better (default: from the name: loss, error, rmse... lower).",
        ),
    ] = None,
    tolerance: Annotated[
        float,
        typer.Option(min=0.0, help="Count the quality as reached this close to the final value."),
    ] = 0.0,
    probe: Annotated[
        list[int] | None,
        typer.Option(
            min=1, help="Also run the job briefly on this many workers, to measure its speed there."
        ),
    ] = None,
    probe_steps: Annotated[int, typer.Option(help="Steps (rounds, epochs) of each probe run.")] = 5,
    probe_job: Annotated[
        list[str] | None,
        typer.Option(help="A finished run of the same job on another size, measured as a probe."),
    ] = None,
    max_workers: Annotated[
        int | None, typer.Option(min=1, help="Predict 1 to this many workers (default 4, or more).")
    ] = None,
    max_cost_ratio: Annotated[
        float,
        typer.Option(
            min=1.0, help="Recommend the fastest size costing at most this times the cheapest."
        ),
    ] = 1.5,
    preemptions_per_hour: Annotated[
        float | None,
        typer.Option(
            help="Also say what the job would cost on spot capacity preempted this often "
            "(per machine per hour): all on-demand, elastic on spot, or mixed.",
            rich_help_panel="Spot capacity",
        ),
    ] = None,
    notice_seconds: Annotated[
        float,
        typer.Option(help="A preemption's notice.", rich_help_panel="Spot capacity"),
    ] = 30.0,
    back_after_seconds: Annotated[
        float,
        typer.Option(
            help="Until a preempted machine's capacity returns.", rich_help_panel="Spot capacity"
        ),
    ] = 300.0,
    spot_price: Annotated[
        float | None,
        typer.Option(
            help="A spot worker-second's price over an on-demand one's (default: the job's "
            "cluster.prices, else 0.3).",
            rich_help_panel="Spot capacity",
        ),
    ] = None,
    max_time_ratio: Annotated[
        float,
        typer.Option(
            help="Recommend the cheapest mix at most this much slower than on-demand.",
            rich_help_panel="Spot capacity",
        ),
    ] = 1.5,
    json_output: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Which cluster size to train this job on: its measured speed (and probes') turned into
    predicted time and billable cost of reaching its final quality on 1..N workers."""
    from scaletune.advice import advise_job

    _check_market(preemptions_per_hour, notice_seconds, back_after_seconds, spot_price)
    _check_at_least("--max-time-ratio", max_time_ratio, 1.0)
    probes = list(probe_job or [])
    if probe:
        probes += _run_probes(job_id, probe, probe_steps, store, quiet=json_output)
    with open_store(store) as records:
        market = None
        if preemptions_per_hour is not None:
            market = _market(
                records.get_training_job(job_id).spec_view.prices,
                preemptions_per_hour,
                notice_seconds,
                back_after_seconds,
                spot_price,
            )
        advice = advise_job(
            records,
            job_id,
            metric=metric,
            maximize=None if minimize is None else not minimize,
            probe_ids=probes,
            max_workers=max_workers,
            max_cost_ratio=max_cost_ratio,
            tolerance=tolerance,
            market=market,
            max_time_ratio=max_time_ratio,
        )
    if json_output:
        print_json(advice.to_json_dict())
        return
    _show(advice)


DEFAULT_SPOT_PRICE = 0.3  # of on-demand: a common spot discount


def _check_at_least(option: str, value: float, least: float) -> None:
    if not (math.isfinite(value) and value >= least):
        raise InvalidInputError(f"{option} {value:g}: give a number of at least {least:g}")


def _check_market(
    preemptions: float | None, notice: float, back_after: float, price: float | None
) -> None:
    if preemptions is not None:
        _check_at_least("--preemptions-per-hour", preemptions, 0.0)
    _check_at_least("--notice-seconds", notice, 0.0)
    _check_at_least("--back-after-seconds", back_after, 0.0)
    if price is not None and not (math.isfinite(price) and price > 0):
        raise InvalidInputError(f"--spot-price {price:g}: give a price above 0")


def _market(
    prices: dict[str, float] | None,
    preemptions: float,
    notice: float,
    back_after: float,
    price: float | None,
) -> SpotMarket:
    """The spot price as a fraction of on-demand's: given, else the job's, else 0.3."""
    from scaletune.advice import SpotMarket

    if price is None and prices and prices.get("on-demand"):
        price = prices["spot"] / prices["on-demand"]
    spot_price = DEFAULT_SPOT_PRICE if price is None else price
    return SpotMarket(preemptions, notice, back_after, spot_price)


def _run_probes(
    job_id: str, sizes: list[int], steps: int, store: str | None, *, quiet: bool
) -> list[str]:
    """Each probe is an ordinary job in the store (named probe-Nw), run to its end."""
    from scaletune.advice import probe_spec
    from scaletune.api import Session

    with open_store(store) as records:
        record = records.get_training_job(job_id)
    specs = [probe_spec(record, size, steps) for size in sizes]
    cpus = max(s.task_count * s.cluster.cpus_per_worker for s in specs)
    backend = open_backend(specs[0].cluster.backend, None, cpus)
    ids = []
    with contextlib.closing(backend), Session(store, backend=backend) as session:
        for spec in specs:
            if not quiet:
                err.print(f"probe: {spec.instance_count} worker(s), {steps} steps", highlight=False)
            ran = session.controller.run(session.controller.prepare(spec))
            if ran.status is not JobStatus.COMPLETED:
                raise InvalidInputError(
                    f"--probe {spec.instance_count}: probe job {ran.id} ended {ran.status.value}: "
                    f"{ran.failure_reason}"
                )
            ids.append(ran.id)
    return ids


def _show(advice: Advice) -> None:
    out.print(
        f"job {advice.job_id}: {advice.metric} {advice.quality:.6g}, "
        f"reached at step {advice.steps_to_quality}",
        highlight=False,
        soft_wrap=True,
    )
    print_table(
        out,
        ["workers", "steps", "s/step", "wall s", "billable worker-s", "note"],
        (
            [
                str(p.workers),
                f"{p.steps:.1f}",
                f"{p.step_seconds:.3g}",
                f"{p.wall_seconds:.1f}",
                f"{p.billable_seconds:.1f}",
                ", ".join(
                    note
                    for note, applies in (
                        ("recommended", p.workers == advice.recommended),
                        ("measured", p.measured),
                    )
                    if applies
                ),
            ]
            for p in advice.predictions
        ),
        title="Predicted time and cost to reach that quality",
        right=["workers", "steps", "s/step", "wall s", "billable worker-s"],
    )
    least, most = advice.elastic_range
    if least < most:  # where capacity comes and goes: every size in it within the cost ratio
        out.print(
            f"- as an elastic job: instance_count = {{ min = {least}, max = {most} }}",
            highlight=False,
            soft_wrap=True,
        )
    for line in advice.basis:
        out.print(f"- {line}", highlight=False, soft_wrap=True)
    if advice.spot is not None:
        _show_spot(advice.spot)
    if advice.probes:
        out.print(f"- probe jobs: {', '.join(advice.probes)}", highlight=False, soft_wrap=True)


def _show_spot(spot: SpotAdvice) -> None:
    market = spot.market
    print_table(
        out,
        ["mix", "wall s", "cost (on-demand worker-s)", "cost p90", "steps redone", "preempted"],
        (
            [
                p.mix.value + (" (recommended)" if p.mix is spot.recommended else ""),
                f"{p.wall_seconds:.1f}",
                f"{p.cost:.1f}",
                f"{p.cost_p90:.1f}",
                f"{p.steps_redone:.1f}",
                f"{p.preemptions:.1f}",
            ]
            for p in spot.predictions
        ),
        title=(
            f"On spot capacity: {market.preemptions_per_hour:g} preemptions a machine an hour, "
            f"{market.notice_seconds:g}-s notices, back after {market.back_after_seconds:g} s, "
            f"spot at {market.spot_price:g} of on-demand"
        ),
        right=["wall s", "cost (on-demand worker-s)", "cost p90", "steps redone", "preempted"],
    )
    out.print(
        f"- elastic mixes from {spot.fewest} workers (mixed: those on-demand, the rest spot); "
        f"recommended: the cheapest within {spot.max_time_ratio:g}x on-demand's wall time; "
        "means over 200 simulated preemption processes of the job's measured step and restart "
        "times",
        highlight=False,
        soft_wrap=True,
    )
