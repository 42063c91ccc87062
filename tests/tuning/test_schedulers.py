from __future__ import annotations

from scaletune.spec import ObjectiveType
from scaletune.tuning import Decision, FIFOScheduler, MedianStoppingScheduler


def test_fifo_never_stops() -> None:
    fifo = FIFOScheduler()
    assert all(
        fifo.on_report(t, r, -1e9).decision is Decision.CONTINUE
        for t in range(3)
        for r in range(1, 5)
    )


def test_median_stopping_compares_with_running_averages() -> None:
    median = MedianStoppingScheduler(ObjectiveType.MAXIMIZE, grace_resource=2, min_trials=2)
    for step, value in enumerate([0.5, 0.6, 0.7], 1):
        assert median.on_report(0, step, value).decision is Decision.CONTINUE
    for step, value in enumerate([0.3, 0.4, 0.5], 1):
        assert median.on_report(1, step, value).decision is Decision.CONTINUE  # 1 other trial
    # Running averages at step 2: trial 0 -> 0.55, trial 1 -> 0.35; median 0.45.
    assert median.on_report(2, 1, 0.1).decision is Decision.CONTINUE  # within the grace
    verdict = median.on_report(2, 2, 0.44)
    assert verdict.decision is Decision.STOP
    assert verdict.reason == "best 0.44 at step 2 is worse than the median 0.45 of 2 trials"
    assert median.on_report(3, 2, 0.46).decision is Decision.CONTINUE


def test_median_stopping_minimising() -> None:
    median = MedianStoppingScheduler(ObjectiveType.MINIMIZE, grace_resource=1, min_trials=1)
    median.on_report(0, 1, 0.2)
    assert median.on_report(1, 1, 0.3).decision is Decision.STOP
    assert median.on_report(2, 1, 0.1).decision is Decision.CONTINUE
