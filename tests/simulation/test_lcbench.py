"""YAHPO Gym's LCBench surrogate as a curve source (runs where yahpo-gym is installed: the
benchmark environment, `make bench-env`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaletune.errors import InvalidInputError
from scaletune.simulation import ClusterCosts, LCBenchSurrogate

YAHPO = Path(__file__).resolve().parents[3] / "shared" / "data" / "yahpo"
CONFIG = {
    "batch_size": 64,
    "learning_rate": 0.01,
    "max_dropout": 0.2,
    "max_units": 256,
    "momentum": 0.9,
    "num_layers": 2,
    "weight_decay": 0.001,
}


@pytest.fixture(scope="module")
def surrogate() -> LCBenchSurrogate:
    pytest.importorskip("yahpo_gym", reason="yahpo-gym lives in the benchmark environment")
    if not (YAHPO / "lcbench" / "model.onnx").is_file():
        pytest.skip(f"{YAHPO} is missing (shared data)")
    return LCBenchSurrogate(YAHPO, "3945", ClusterCosts(start_seconds=2.0, scaling_efficiency=0.5))


def test_a_curve_has_every_epoch_with_its_metrics_and_times(surrogate: LCBenchSurrogate) -> None:
    curve = surrogate.curve(CONFIG, 1)
    assert curve.full_resource == 52
    assert [point.step for point in curve.points] == list(range(2, 53))  # epoch 1: untrained
    assert all(0 < point.metrics["val_accuracy"] <= 100 for point in curve.points)
    seconds = [point.seconds for point in curve.points]
    assert seconds == sorted(seconds) and seconds[0] > 2.0
    # Same configuration, same curve; two workers at half efficiency: steps 1.5x faster.
    assert surrogate.curve(CONFIG, 1) == curve
    faster = surrogate.curve(CONFIG, 2)
    assert faster.points[-1].seconds - 2.0 == pytest.approx((seconds[-1] - 2.0) / 1.5)


def test_bad_configurations_and_tasks_are_refused(surrogate: LCBenchSurrogate) -> None:
    with pytest.raises(InvalidInputError, match="max_units='many' is not a number"):
        surrogate.curve({**CONFIG, "max_units": "many"}, 1)
    with pytest.raises(InvalidInputError, match="LCBench has no task '1'"):
        LCBenchSurrogate(YAHPO, "1")
