"""Event files read back with TensorBoard's own reader: scalars per step as the store has
them, and hyperparameters through the HParams plugin (a tuning job's experiment over its
trials)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata

from scaletune.api import Session
from scaletune.spec import training_spec_from_dict, tuning_spec_from_dict
from scaletune.store import JobStatus
from scaletune.tuning import TuningController
from tests.jobs import run_job

CHANNEL = {"dataset": "breast-cancer"}
HYPERPARAMETERS = {"num_round": 5, "max_depth": 2, "eval_metric": "auc"}


def _read(folder: Path) -> EventAccumulator:
    events = EventAccumulator(str(folder))
    events.Reload()
    return events


def _scalars(events: EventAccumulator, name: str) -> dict[int, float]:
    return {event.step: event.value for event in events.Scalars(name)}


def _stored(session: Session, job_id: str, name: str) -> dict[int, float]:
    return {point.step: point.value for point in session.store.metrics(job_id, name)}


def _session_hparams(events: EventAccumulator) -> dict[str, Any]:
    content = events.PluginTagToContent(metadata.PLUGIN_NAME)[metadata.SESSION_START_INFO_TAG]
    start = metadata.parse_session_start_info_plugin_data(content)
    return {
        name: value.WhichOneof("kind") and getattr(value, value.WhichOneof("kind"))
        for name, value in start.hparams.items()
    }


def test_a_job_writes_its_scalars_and_hyperparameters_in_its_own_folder(
    session: Session,
) -> None:
    spec = training_spec_from_dict(
        {
            "algorithm": "xgboost",
            "instance_count": 2,
            "hyperparameters": HYPERPARAMETERS,
            "channels": {"train": CHANNEL, "validation": CHANNEL},
        }
    )
    record = run_job(session, spec)
    folder = Path(record.log_dir or "").parent / "tensorboard"
    events = _read(folder)

    for name in ("train:auc", "validation:auc"):
        stored = _stored(session, record.id, name)
        assert len(stored) == 5
        assert _scalars(events, name) == pytest.approx(stored)  # float32 in the file
    hparams = _session_hparams(events)
    assert hparams["num_round"] == 5
    assert hparams["max_depth"] == 2
    assert hparams["eval_metric"] == "auc"


def test_no_event_files_when_tensorboard_is_off(session: Session) -> None:
    spec = training_spec_from_dict(
        {
            "algorithm": "xgboost",
            "hyperparameters": HYPERPARAMETERS,
            "channels": {"train": CHANNEL},
            "tracking": {"tensorboard": False},
        }
    )
    record = run_job(session, spec)
    assert record.status is JobStatus.COMPLETED
    assert not (Path(record.log_dir or "").parent / "tensorboard").exists()


def test_a_tuning_job_is_an_hparams_experiment_over_its_trials(
    session: Session, tmp_path: Path
) -> None:
    spec = tuning_spec_from_dict(
        {
            "objective_metric": "validation:auc",
            "strategy": "Random",
            "max_jobs": 2,
            "ranges": {
                "eta": {"type": "Continuous", "min_value": 0.05, "max_value": 0.5},
                "max_depth": {"type": "Integer", "min_value": 2, "max_value": 4},
            },
            "tracking": {"tensorboard": str(tmp_path / "runs")},
            "training": {
                "algorithm": "xgboost",
                "hyperparameters": {"num_round": 3, "eval_metric": "auc"},
                "channels": {"train": CHANNEL, "validation": CHANNEL},
            },
        }
    )
    tuner = TuningController(session.controller, poll_seconds=0.05)
    tuning_id = tuner.create(spec)
    assert tuner.run(tuning_id, spec).status is JobStatus.COMPLETED

    root = tmp_path / "runs" / tuning_id
    content = _read(root).PluginTagToContent(metadata.PLUGIN_NAME)[metadata.EXPERIMENT_TAG]
    experiment = metadata.parse_experiment_plugin_data(content)
    domains = {info.name: info for info in experiment.hparam_infos}
    assert domains["eta"].domain_interval.min_value == pytest.approx(0.05)
    assert domains["eta"].domain_interval.max_value == pytest.approx(0.5)
    assert domains["max_depth"].domain_interval.max_value == 4
    assert [m.name.tag for m in experiment.metric_infos] == ["validation:auc"]

    trials = session.store.training_jobs_of(tuning_id)
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == sorted(t.id for t in trials)
    for trial in trials:
        events = _read(root / trial.id)
        assert _session_hparams(events)["eta"] == pytest.approx(trial.hyperparameters["eta"])
        stored = _stored(session, trial.id, "validation:auc")
        assert _scalars(events, "validation:auc") == pytest.approx(stored)


WRITE_WITHOUT_TENSORFLOW = """
import sys
from pathlib import Path
from scaletune.store import JobStatus
from scaletune.tracking._events import JobEnd, TrackedJob
from scaletune.tracking._tensorboard import TensorBoardJob

job = TrackedJob("j", None, "xgboost", {"eta": 0.1}, 1, "local", 0.0)
written = TensorBoardJob(Path(sys.argv[1]), job)
written.report(1, {"validation:auc": 0.5}, 1.0)
written.finish(JobEnd(JobStatus.COMPLETED, 2.0, 2.0, 2.0, 1))
print("tensorflow" in sys.modules)
"""


def test_event_files_are_written_without_loading_tensorflow(tmp_path: Path) -> None:
    """TensorFlow is installed here (its scripts' extra): the controller must not pay for
    importing it (TensorBoard's own writer would)."""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed: nothing to keep from loading")
    out = subprocess.run(
        [sys.executable, "-c", WRITE_WITHOUT_TENSORFLOW, str(tmp_path / "tb")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "False"
    assert _scalars(_read(tmp_path / "tb"), "validation:auc") == {1: 0.5}
