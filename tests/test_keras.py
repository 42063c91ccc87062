"""scaletune.keras in a real tf_keras fit, in this process: reports each epoch, a SIGTERM
(how scaletune stops a script) ends fit at the next batch, checkpoints restore."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scaletune.checkpoints import CheckpointFolder
from scaletune.keras import WEIGHTS_FILE, metric_names, restore
from scaletune.reporting import (
    CHECKPOINT_DIR_ENV,
    CHECKPOINT_ROOT_ENV,
    CHECKPOINT_SAVES_ENV,
    CHECKPOINT_STEP_ENV,
    REPORT_ENV,
    REPORT_PREFIX,
    STOP_GOES_ON_ENV,
)
from tests.conftest import require_tensorflow

require_tensorflow("needs scaletune[tensorflow] and tf-keras")


def _keras() -> Any:
    import tf_keras  # here, not at collection: every pytest process collects this module

    return tf_keras


@pytest.fixture(autouse=True)
def _tf_keras_imported_first() -> None:
    """As a script does: scaletune.keras builds its callback on the Keras imported."""
    _keras()


def _model() -> Any:
    keras = _keras()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    # Eagerly: no autograph files left in this test process's temp folder.
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer="sgd", loss=loss, run_eagerly=True)
    return model


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    features = rng.normal(size=(64, 4)).astype("float32")
    return features, (features[:, 0] > 0).astype("int32")


def _reports(out: str) -> list[dict[str, Any]]:
    lines = [line for line in out.splitlines() if line.startswith(REPORT_PREFIX)]
    return [json.loads(line[len(REPORT_PREFIX) :]) for line in lines]


def test_keras_names_become_scaletunes() -> None:
    assert metric_names({"loss": 1, "accuracy": 0.5, "val_loss": 2, "val_accuracy": 0.25}) == {
        "train:loss": 1.0,
        "train:accuracy": 0.5,
        "validation:loss": 2.0,
        "validation:accuracy": 0.25,
    }


def test_each_epoch_is_reported_and_a_stop_ends_fit_at_the_next_batch(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaletune.keras import ReportCallback

    monkeypatch.setenv(REPORT_ENV, "stdout")
    model = _model()
    features, labels = _data()
    model.fit(features, labels, epochs=3, batch_size=16, verbose=0, callbacks=[ReportCallback()])
    reports = _reports(capsys.readouterr().out)
    assert [r["step"] for r in reports] == [1, 2, 3]
    assert set(reports[0]["metrics"]) == {"train:loss"}

    class StopAtEpoch2Batch1(_keras().callbacks.Callback):  # type: ignore[misc]  # as scaletune's stop would land
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if self.epoch == 1 and batch == 1:
                os.kill(os.getpid(), signal.SIGTERM)

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.epoch = epoch

    before = signal.getsignal(signal.SIGTERM)
    history = model.fit(
        features,
        labels,
        epochs=50,
        batch_size=16,
        verbose=0,
        callbacks=[StopAtEpoch2Batch1(), ReportCallback()],
    )
    assert len(history.history["loss"]) == 2  # epoch 2 ended early, and fit with it
    assert signal.getsignal(signal.SIGTERM) == before  # this process's own handler is back
    assert [r["step"] for r in _reports(capsys.readouterr().out)] == [1, 2]


def test_weights_are_checkpointed_and_restored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from scaletune.keras import ReportCallback

    folder, root = tmp_path / "checkpoint", tmp_path / "checkpoints"
    folder.mkdir()
    monkeypatch.setenv(CHECKPOINT_DIR_ENV, str(folder))
    monkeypatch.setenv(CHECKPOINT_ROOT_ENV, str(root))
    monkeypatch.setenv(CHECKPOINT_SAVES_ENV, "1")
    model = _model()
    assert restore(model) == 0  # nothing restored: a fresh start
    features, labels = _data()
    model.fit(features, labels, epochs=4, verbose=0, callbacks=[ReportCallback(checkpoint_every=2)])
    saved = CheckpointFolder(str(root)).complete()
    assert [c.step for c in saved] == [2, 4]
    # A retry: the newest checkpoint's files back in the folder, its step said.
    for path in folder.iterdir():
        path.unlink()
    for name, content in CheckpointFolder(str(root)).load(saved[-1]).items():
        (folder / name).write_bytes(content)
    monkeypatch.setenv(CHECKPOINT_STEP_ENV, "4")
    resumed = _model()
    assert restore(resumed) == 4
    assert (folder / WEIGHTS_FILE).is_file()
    for mine, theirs in zip(resumed.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_a_stop_the_job_goes_on_from_finishes_the_epoch_and_checkpoints_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A preemption notice, a resize or a pause: SIGTERM after the worker said the job goes
    on (`scaletune.stop_goes_on`): the epoch under way ends, is saved, and fit ends."""
    from scaletune.keras import ReportCallback

    folder, root, goes_on = tmp_path / "checkpoint", tmp_path / "checkpoints", tmp_path / "on"
    folder.mkdir()
    monkeypatch.setenv(REPORT_ENV, "stdout")
    monkeypatch.setenv(CHECKPOINT_DIR_ENV, str(folder))
    monkeypatch.setenv(CHECKPOINT_ROOT_ENV, str(root))
    monkeypatch.setenv(CHECKPOINT_SAVES_ENV, "1")
    monkeypatch.setenv(STOP_GOES_ON_ENV, str(goes_on))

    class NoticeAtEpoch2Batch1(_keras().callbacks.Callback):  # type: ignore[misc]
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if self.epoch == 1 and batch == 1:
                goes_on.touch()  # as the worker does, before its SIGTERM
                os.kill(os.getpid(), signal.SIGTERM)

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.epoch = epoch

    features, labels = _data()
    history = _model().fit(
        features,
        labels,
        epochs=50,
        batch_size=16,
        verbose=0,
        callbacks=[NoticeAtEpoch2Batch1(), ReportCallback(checkpoint_every=10)],
    )
    assert len(history.history["loss"]) == 2  # epoch 2 ran to its end, then fit ended
    assert [r["step"] for r in _reports(capsys.readouterr().out)] == [1, 2]
    assert [c.step for c in CheckpointFolder(str(root)).complete()] == [2]  # not due by count
