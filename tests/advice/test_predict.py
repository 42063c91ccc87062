"""The step-time model, the steps to reach a quality and the recommendation, against numbers
worked out by hand."""

from __future__ import annotations

import pytest

from scaletune.advice import OverheadModel, RunMeasure, StepTimeModel, predict


def _run(workers: int, step_seconds: float, overhead: float = 2.0, steps: int = 10) -> RunMeasure:
    return RunMeasure(
        job_id=f"run-{workers}",
        workers=workers,
        tasks=workers,
        step_seconds=step_seconds,
        overhead_seconds=overhead,
        steps_run=steps,
        wall_seconds=overhead + steps * step_seconds,
    )


def test_one_size_is_read_as_all_parallel() -> None:
    model = StepTimeModel.fit([_run(2, 0.5)])
    assert (model.serial, model.parallel, model.exchange) == (0.0, 1.0, 0.0)
    assert model.at(4) == pytest.approx(0.25)


def test_two_sizes_fit_the_shared_work_and_what_each_worker_adds() -> None:
    # t(n) = 1.2 / n + 0.1 (n - 1): 1.2 s on one worker, 0.7 s on two.
    model = StepTimeModel.fit([_run(1, 1.2), _run(2, 0.7)])
    assert model.parallel == pytest.approx(1.2) and model.exchange == pytest.approx(0.1)
    assert model.at(4) == pytest.approx(0.3 + 0.3)


def test_three_sizes_recover_every_term() -> None:
    def truth(n: int) -> float:
        return 0.05 + 0.9 / n + 0.02 * (n - 1)

    model = StepTimeModel.fit([_run(n, truth(n)) for n in (1, 2, 4)])
    assert (model.serial, model.parallel, model.exchange) == pytest.approx((0.05, 0.9, 0.02))


def test_no_term_is_fitted_below_zero() -> None:
    # Slower on more workers than any positive mix of 1/n alone explains.
    model = StepTimeModel.fit([_run(1, 0.1), _run(2, 0.3), _run(3, 0.5)])
    assert min(model.serial, model.parallel, model.exchange) >= 0
    assert model.at(2) > model.at(1)


def test_the_gradient_noise_scale_sets_the_steps_on_each_size() -> None:
    # E(n) = E(n0) (1 + n b / B) / (1 + n0 b / B) with b = 32, B = 64, n0 = 2: 10 epochs on 2
    # workers become 10 x 1.5 / 2 = 7.5 on one, and 10 x 3 / 2 = 15 on four.
    predictions, _, basis = predict(
        _run(2, 0.5), 10, max_workers=4, noise_scale=64, per_worker_batch=32
    )
    assert [p.steps for p in predictions] == pytest.approx([7.5, 10, 12.5, 15])
    assert any("noise scale" in line for line in basis)


def test_the_recommendation_is_the_fastest_size_within_the_cost_ratio() -> None:
    # All parallel, 2 s outside steps: wall(n) = 2 + 10 / n, billable n x wall = 2n + 10.
    predictions, recommended, _ = predict(_run(1, 1.0), 10, max_workers=6, max_cost_ratio=1.5)
    assert [p.billable_seconds for p in predictions] == pytest.approx([12, 14, 16, 18, 20, 22])
    assert recommended == 4  # 18 <= 1.5 x 12; five workers (20) cost too much
    _, cheapest, _ = predict(_run(1, 1.0), 10, max_workers=6, max_cost_ratio=1.0)
    assert cheapest == 1


def test_a_parameter_server_jobs_chief_and_servers_are_billed_too() -> None:
    predictions, _, _ = predict(_run(2, 1.0), 10, max_workers=2, extra_tasks=2)
    assert predictions[1].billable_seconds == pytest.approx(4 * predictions[1].wall_seconds)


def test_the_time_outside_steps_grows_with_the_workers_it_starts() -> None:
    model = OverheadModel.fit([_run(1, 1.0, overhead=3.0), _run(2, 0.6, overhead=4.0)])
    assert (model.fixed, model.per_worker) == pytest.approx((2.0, 1.0))
    assert model.at(4) == pytest.approx(6.0)
    # Falling with more workers is noise, not a trend: the mean on every size.
    flat = OverheadModel.fit([_run(1, 1.0, overhead=4.0), _run(2, 0.6, overhead=3.0)])
    assert (flat.fixed, flat.per_worker) == (3.5, 0.0)
    assert OverheadModel.fit([_run(2, 1.0, overhead=5.0)]).at(8) == 5.0
