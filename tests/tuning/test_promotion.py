"""Promotion-type Hyperband's decisions, by hand; fewer brackets; adaptive bracket weights.

min_resource=1, max_resource=9, eta=3, maximise, one bracket (plain ASHA): rungs 1 and 3.
At a rung a trial goes on at once if it is among the best max(1, n // 3) of the n values
there; otherwise it pauses, and `promote` resumes a paused trial once it ranks among the best
n // 3 (highest rung first).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from scaletune.spec import HyperbandType, ObjectiveType
from scaletune.tuning import (
    Decision,
    HyperbandScheduler,
    PromotionHyperband,
    StoppingHyperband,
    hyperband_scheduler,
)


def _asha(objective: ObjectiveType = ObjectiveType.MAXIMIZE) -> PromotionHyperband:
    asha = hyperband_scheduler(
        objective,
        min_resource=1,
        max_resource=9,
        eta=3,
        brackets=1,
        kind=HyperbandType.PROMOTION,
    )
    assert isinstance(asha, PromotionHyperband)
    return asha


def test_paused_trials_are_promoted_as_the_rung_fills() -> None:
    asha = _asha()

    def decide(trial: int, resource: int, value: float) -> Decision:
        return asha.on_report(trial, resource, value).decision

    assert decide(0, 1, 0.5) is Decision.CONTINUE  # the first at a rung goes on
    assert decide(1, 1, 0.4) is Decision.PAUSE
    assert decide(2, 1, 0.3) is Decision.PAUSE
    assert asha.paused == [1, 2]
    assert asha.promote() is None  # 3 values: the best 1 is trial 0's 0.5, already going on
    assert decide(3, 1, 0.6) is Decision.CONTINUE  # best of 4
    for trial, value in [(4, 0.1), (5, 0.2)]:
        assert decide(trial, 1, value) is Decision.PAUSE
    assert asha.promote() is None  # 6 values: the best 2 are 0.6 and 0.5, both going on
    for trial, value in [(6, 0.05), (7, 0.01), (8, 0.02)]:
        assert decide(trial, 1, value) is Decision.PAUSE
    assert asha.promote() == 1  # 9 values: 0.4 is now among the best 3
    assert asha.promote() is None
    assert 1 not in asha.paused
    # The promoted trial goes on from rung 1: its next judgement is at rung 3.
    assert decide(1, 2, 0.45) is Decision.CONTINUE
    assert decide(0, 3, 0.7) is Decision.CONTINUE
    assert decide(1, 3, 0.5) is Decision.PAUSE
    assert decide(3, 3, 0.8) is Decision.CONTINUE
    assert decide(0, 9, 0.9) is Decision.FINISH


def test_the_highest_rung_is_promoted_first() -> None:
    """eta=2, rungs 1, 2 and 4: the best n // 2 of a rung's n values may be promoted."""
    asha = hyperband_scheduler(
        ObjectiveType.MAXIMIZE,
        min_resource=1,
        max_resource=8,
        eta=2,
        brackets=1,
        kind=HyperbandType.PROMOTION,
    )
    assert isinstance(asha, PromotionHyperband)
    reports = [
        ("a", 1, 0.7, Decision.CONTINUE),
        ("b", 1, 0.8, Decision.CONTINUE),
        ("c", 1, 0.9, Decision.CONTINUE),
        ("a", 2, 0.5, Decision.CONTINUE),
        ("b", 2, 0.4, Decision.PAUSE),
        ("d", 1, 0.1, Decision.PAUSE),
        ("c", 2, 0.3, Decision.PAUSE),
        ("e", 1, 0.05, Decision.PAUSE),
        ("f", 1, 0.0, Decision.PAUSE),
        ("g", 1, -1.0, Decision.PAUSE),
        ("h", 1, -1.0, Decision.PAUSE),  # 8 values at rung 1: d's 0.1 is 4th
    ]
    names = {name: number for number, name in enumerate("abcdefghij")}
    for name, resource, value, decision in reports:
        assert asha.on_report(names[name], resource, value).decision is decision, name
    assert asha.promote() == names["d"]  # rung 2's b is 2nd of 3 there: not yet
    assert asha.on_report(names["d"], 2, -5.0).decision is Decision.PAUSE  # 4 at rung 2
    for name in "ij":
        assert asha.on_report(names[name], 1, -1.0).decision is Decision.PAUSE
    # Now both rung 2's b (2nd of 4) and rung 1's e (5th of 10) rank: rung 2 goes first.
    assert asha.promote() == names["b"]
    assert asha.promote() == names["e"]
    assert asha.promote() is None


def test_minimising_promotes_the_lowest() -> None:
    asha = _asha(ObjectiveType.MINIMIZE)
    for trial, value in enumerate([0.5, 0.6, 0.7, 0.9, 0.8, 0.95, 1.0, 1.1, 1.2]):
        asha.on_report(trial, 1, value)
    assert asha.paused == [1, 2, 3, 4, 5, 6, 7, 8]
    assert asha.promote() == 1  # the lowest paused value; 0.6 is second of the best 3
    assert asha.promote() == 2
    assert asha.promote() is None


def test_a_paused_trial_that_ends_or_resumes_is_no_longer_paused() -> None:
    asha = _asha()
    asha.on_report(0, 1, 0.9)
    asha.on_report(1, 1, 0.1)
    asha.on_report(2, 1, 0.2)
    assert asha.paused == [1, 2]
    asha.on_end(1)  # its tuning job ended it (Stopped)
    asha.on_resumed(2)  # resumed after a restart: it counts as promoted
    assert asha.paused == []
    assert asha.promote() is None


def test_a_replay_sees_a_promotion_in_a_report_past_the_next_rung() -> None:
    """Restoring replays stored reports: a paused trial's reports up to where it stopped change
    nothing, and one that reaches its next rung shows it was promoted meanwhile."""
    asha = _asha()
    asha.on_report(0, 1, 0.9)
    assert asha.on_report(1, 1, 0.1).decision is Decision.PAUSE
    asha.on_report(1, 2, 0.15)  # reported while it stopped
    assert asha.paused == [1]
    asha.on_report(1, 3, 0.2)  # after its promotion
    assert asha.paused == []


def test_stopping_type_never_pauses() -> None:
    stopping = hyperband_scheduler(
        ObjectiveType.MAXIMIZE, min_resource=1, max_resource=9, eta=3, brackets=1
    )
    stopping.on_report(0, 1, 0.9)
    assert stopping.on_report(1, 1, 0.1).decision is Decision.STOP
    assert isinstance(stopping, StoppingHyperband)  # a class that never pauses
    assert stopping.promote() is None


@pytest.mark.parametrize(("brackets", "drawn"), [(1, {0}), (2, {0, 1}), (None, {0, 1, 2})])
def test_fewer_brackets_keep_the_most_aggressive(brackets: int | None, drawn: set[int]) -> None:
    hyperband = hyperband_scheduler(
        ObjectiveType.MAXIMIZE, min_resource=1, max_resource=9, eta=3, brackets=brackets
    )
    assert [b.rungs for b in hyperband.brackets] == [[1, 3], [3], []][: len(drawn)]
    assert {hyperband.bracket_of(trial) for trial in range(200)} == drawn


def test_more_brackets_than_there_are_is_refused() -> None:
    with pytest.raises(ValueError, match=r"brackets must be within \[1, 3\] \(got 4\)"):
        hyperband_scheduler(
            ObjectiveType.MAXIMIZE, min_resource=1, max_resource=9, eta=3, brackets=4
        )


def _adaptive() -> HyperbandScheduler:
    # rungs: bracket 0 at 1 and 3, bracket 1 at 3, bracket 2 runs to 9; weights 9:5:3
    return hyperband_scheduler(
        ObjectiveType.MAXIMIZE, min_resource=1, max_resource=9, eta=3, bracket_weights="adaptive"
    )


def _feed(hyperband: HyperbandScheduler, trials: range, early: Callable[[int], float]) -> None:
    """Trials that report at steps 1 and 3 (bracket 0's and 1's first rungs), then at 9."""
    for trial in trials:
        hyperband.on_report(trial, 1, early(trial))
        hyperband.on_report(trial, 3, float(trial))  # step 3 ranks them as the end does
        hyperband.on_report(trial, 9, float(trial))


def test_adaptive_weights_stay_hyperbands_until_measured() -> None:
    hyperband = _adaptive()
    _feed(hyperband, range(7), lambda trial: -float(trial))
    assert hyperband.bracket_weights() == pytest.approx([9 / 17, 5 / 17, 3 / 17])


def test_a_first_rung_that_ranks_backwards_loses_its_bracket() -> None:
    hyperband = _adaptive()
    _feed(hyperband, range(100, 110), lambda trial: -float(trial))  # step 1: tau = -1
    # Bracket 0 keeps 5 % of its weight; bracket 1 (first rung 3, tau = 1) keeps all of it.
    raw = np.array([9 * 0.05, 5, 3])
    assert hyperband.bracket_weights() == pytest.approx(raw / raw.sum())
    draws = [hyperband.bracket_of(trial) for trial in range(2000)]
    assert draws.count(0) / len(draws) == pytest.approx(raw[0] / raw.sum(), abs=0.02)


def test_a_first_rung_that_ranks_as_the_end_keeps_its_weight() -> None:
    hyperband = _adaptive()
    _feed(hyperband, range(10), float)  # step 1 ranks as step 9: tau = 1 everywhere
    assert hyperband.bracket_weights() == pytest.approx([9 / 17, 5 / 17, 3 / 17])
