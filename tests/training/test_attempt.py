"""Which checkpoint a new attempt starts from, and how long it waits for room."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scaletune.api import Session
from scaletune.checkpoints import CheckpointFolder
from scaletune.simulation import SimulatedClock
from scaletune.spec import training_spec_from_dict
from scaletune.training import PreparedJob, Stopper
from scaletune.training._attempt import RoomWait, resume_point


def test_a_resume_passes_over_a_checkpoint_whose_reports_were_lost(tmp_path: Path) -> None:
    folder = CheckpointFolder(tmp_path)
    folder.save(100, {"state": b"a"}, {"reported_step": 1})
    folder.save(200, {"state": b"b"}, {"reported_step": 2})
    # A controller killed before it wrote step 2's report: the newer checkpoint would leave
    # a gap in the curve, so the one whose reports are all stored serves.
    chosen = resume_point(folder, stored_up_to=1)
    assert chosen is not None and chosen.step == 100
    chosen = resume_point(folder, stored_up_to=2)
    assert chosen is not None and chosen.step == 200
    assert resume_point(folder, stored_up_to=None) is None  # nothing stored: from the start
    folder.save(300, {"state": b"c"}, {"reported_step": None})  # saved before any report
    chosen = resume_point(folder, stored_up_to=None)
    assert chosen is not None and chosen.step == 300


def _elastic_job(session: Session, **fields: Any) -> PreparedJob:
    channel = {"dataset": "breast-cancer"}
    raw = {
        "algorithm": "xgboost",
        "instance_count": {"min": 2, "max": 4},
        "channels": {"train": channel},
        **fields,
    }
    return session.controller.prepare(training_spec_from_dict(raw))


def test_an_elastic_job_waiting_for_room_takes_a_smaller_size_once_capacity_goes(
    session: Session,
) -> None:
    job = _elastic_job(session)
    fits = [4]
    clock = SimulatedClock()
    wait = RoomWait(session.store, clock, job, Stopper(), 0.0, 4, lambda: fits[0])
    assert wait() is None and wait.waited  # room for 4 may still come: it waits
    assert session.store.get_training_job(job.id).waiting_since is not None
    fits[0] = 3
    assert wait() == "resized to 3 workers: room for 4 went while they waited"
    assert wait.resize_to == 3 and not wait.timed_out
    # It waits on, in the same attempt, for the smaller size, which fits.
    assert wait.shrink() == 3 and wait.resize_to is None
    assert wait() is None


def test_waiting_past_the_placement_timeout_fails_the_job(session: Session) -> None:
    job = _elastic_job(session, retry={"placement_timeout_seconds": 30})
    clock = SimulatedClock()
    wait = RoomWait(session.store, clock, job, Stopper(), 0.0, 2, lambda: 2)
    assert wait() is None
    clock.advance_to(30.0)
    assert wait() == (
        "2 workers (its fewest) could not be placed within retry.placement_timeout_seconds=30"
    )
    assert wait.timed_out and wait.resize_to is None
