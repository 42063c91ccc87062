"""Each rung's agreement with the end, worked out by hand on four stored learning curves."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaletune.analysis import rung_agreement
from scaletune.errors import InvalidInputError
from scaletune.store import Store
from tests.simulated import SLOW_AND_FAST, hand_ranked_job, simulated_tuning


@pytest.mark.parametrize("objective_type", ["Maximize", "Minimize"])
def test_a_worked_example(tmp_path: Path, objective_type: str) -> None:
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        record = hand_ranked_job(store, objective_type)
        report = rung_agreement(store, record.id)
        winner = next(
            t.id for t in store.training_jobs_of(record.id) if t.hyperparameters["x"] == 2
        )
    assert (report.min_resource, report.eta, report.max_resource) == (1, 3, 9)
    assert (report.finished, report.winner, report.winner_step) == (4, winner, 9)
    assert report.winner_value == pytest.approx(0.9 if objective_type == "Maximize" else -0.9)
    first, second = report.rungs
    # Step 1 (x=3 from its step-2 report): 0.9, 0.7, 0.8, 0.6; the end: 0.1, 0.2, 0.9, 0.3.
    # Of the 6 pairs, (1, 2) and (2, 3) are ordered alike: tau = (2 - 4) / 6. The winner is
    # second, and 4 // 3 = 1 is kept.
    assert (first.resource, first.trials, first.pairs) == (1, 4, 4)
    assert first.kendall_tau == pytest.approx(-2 / 6)
    assert (first.winner_rank, first.keeps_winner) == (2, False)
    # Step 3 (x=3 from step 4): 0.5, 0.6, 0.8, 0.7: the end's order.
    assert (second.resource, second.trials, second.pairs) == (3, 4, 4)
    assert second.kendall_tau == pytest.approx(1.0)
    assert (second.winner_rank, second.keeps_winner) == (1, True)
    assert report.safe_first_rung == 3
    assert report.to_json_dict()["safe_first_rung"] == 3


def test_forecasts_in_a_job_too_short_for_any_rung_to_forecast_rank_values(
    tmp_path: Path,
) -> None:
    # Rungs 1 and 3 below 9: none has 4 reports, and none after them will; the scheduler
    # ranks the values there, and so does the analysis.
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        record = hand_ranked_job(store)
        by_value = rung_agreement(store, record.id, rank_by="value")
        by_forecast = rung_agreement(store, record.id, rank_by="forecast")
    assert by_forecast.rank_by == "forecast"
    assert by_forecast.rungs == by_value.rungs
    assert [rung.trials for rung in by_forecast.rungs] == [4, 4]


def test_rungs_given_override_the_default(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        record = hand_ranked_job(store)
        report = rung_agreement(store, record.id, min_resource=2, eta=2)
        with pytest.raises(InvalidInputError, match=r"eta must be 2 or more \(got 1\)"):
            rung_agreement(store, record.id, eta=1)
        with pytest.raises(InvalidInputError, match=r"min_resource must be 1 or more \(got 0\)"):
            rung_agreement(store, record.id, min_resource=0)
    # Rungs 2, 4 and 8, all below 9. Step 2 takes x=0..2's step-3 values and x=3's step-2 one:
    # 0.5, 0.6, 0.8, 0.6. Only x=3 reports between 4 and 8 (at 4); no trial between 8 and 9.
    assert [rung.resource for rung in report.rungs] == [2, 4, 8]
    assert [rung.trials for rung in report.rungs] == [4, 1, 0]
    assert report.rungs[0].winner_rank == 1
    assert report.rungs[1].kendall_tau is None  # one pair
    assert report.rungs[2].keeps_winner is None  # the winner has no value there
    assert (report.safe_first_rung, report.last_judging_rung) == (2, 2)  # rungs 4, 8 judge none
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        wide = rung_agreement(store, record.id, eta=8)
    # Rungs 1 and 8; the winner is second at 1, where 4 // 8 keeps one, and has no value at 8.
    assert [(rung.resource, rung.keeps_winner) for rung in wide.rungs] == [(1, False), (8, None)]
    assert (wide.safe_first_rung, wide.last_judging_rung) == (None, 1)


def test_a_hyperband_jobs_own_rungs(tmp_path: Path) -> None:
    """On a simulated Hyperband job whose curves keep their order (accuracy grows with x at
    every step), every rung agrees with the end and keeps the winner."""
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        record = simulated_tuning(store, 40)
        report = rung_agreement(store, record.id)
    assert (report.min_resource, report.eta, report.max_resource) == (1, 3, 9)
    assert [rung.resource for rung in report.rungs] == [1, 3]
    assert report.rungs[0].trials == 40  # every trial reports at step 1
    assert 2 <= report.finished < 40  # only the trials Hyperband let run
    for rung in report.rungs:
        assert rung.pairs == report.finished
        assert rung.kendall_tau == pytest.approx(1.0)
        assert rung.winner_rank == 1
    assert report.safe_first_rung == 1


def test_forecasts_rank_the_slow_learner_that_values_drop(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        record = hand_ranked_job(store, curves=SLOW_AND_FAST)
        by_value = rung_agreement(store, record.id, min_resource=4)
        by_forecast = rung_agreement(store, record.id, min_resource=4, rank_by="forecast")
        too_early = rung_agreement(store, record.id, rank_by="forecast")
        with pytest.raises(InvalidInputError, match=r"rank_by must be .* \(got 'median'\)"):
            rung_agreement(store, record.id, rank_by="median")
    assert by_value.rank_by == "value"  # a Grid job's own: it has no rungs to rank by forecast
    assert [rung.resource for rung in by_value.rungs] == [4, 12]
    # At step 4 the slow learner (the winner at 27: 0.80 against 0.70) stands at 0.65 against
    # 0.6875: second of two, and one is kept; by step 12 it leads.
    assert [(r.kendall_tau, r.winner_rank) for r in by_value.rungs] == [(-1.0, 2), (1.0, 1)]
    assert by_value.safe_first_rung == 12
    # Its 4 reports point to 0.80 at step 27, the fast one's to 0.70: first already at 4.
    assert [(r.kendall_tau, r.winner_rank) for r in by_forecast.rungs] == [(1.0, 1), (1.0, 1)]
    assert by_forecast.safe_first_rung == 4
    # Rungs 1 and 3 (eta 3) come before 4 reports: they rank nothing; rung 9 ranks both.
    assert [(r.resource, r.trials) for r in too_early.rungs] == [(1, 0), (3, 0), (9, 2)]
    assert too_early.safe_first_rung == 9
