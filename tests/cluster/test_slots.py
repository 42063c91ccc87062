"""The local backend's capacity: SCALETUNE_LOCAL_SLOTS as a number or a file that changes,
and jobs that wait for free slots (or learn they never fit)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from scaletune.cluster import FixedSlots, LocalBackend, SlotsFile, WorkerGroup, slots_from
from scaletune.cluster._slots import SlotCount, Unbounded
from scaletune.errors import ClusterTooSmallError, InvalidInputError, LaunchAbandonedError
from scaletune.spec import CapacityClass, CapacityPlan, ClusterSpec
from scaletune.worker import Finished
from tests.cluster import programs
from tests.cluster.test_local_backend import _collect, _tasks


def test_the_variable_gives_no_bound_a_number_or_a_file(tmp_path: Path) -> None:
    assert slots_from({}) == Unbounded()
    assert slots_from({"SCALETUNE_LOCAL_SLOTS": " 3 "}) == FixedSlots(3)
    (tmp_path / "slots").write_text("5\n")
    slots = slots_from({"SCALETUNE_LOCAL_SLOTS": str(tmp_path / "slots")})
    assert isinstance(slots, SlotsFile) and slots.count() == SlotCount(5)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("many", "SCALETUNE_LOCAL_SLOTS='many': give a number of workers, or a file holding one"),
        ("-1", "SCALETUNE_LOCAL_SLOTS='-1': give a number of workers, or a file holding one"),
        ("FILE", "the file does not hold a whole number of workers"),
    ],
)
def test_a_bad_value_names_itself(tmp_path: Path, value: str, expected: str) -> None:
    (tmp_path / "slots").write_text("two")
    value = value.replace("FILE", str(tmp_path / "slots"))
    with pytest.raises(InvalidInputError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        slots_from({"SCALETUNE_LOCAL_SLOTS": value})


def test_a_file_is_read_at_each_ask_and_a_bad_read_keeps_the_last_number(tmp_path: Path) -> None:
    path = tmp_path / "slots"
    path.write_text("4")
    slots = SlotsFile(path)
    assert slots.count() == SlotCount(4)
    path.write_text("2")
    assert slots.count() == SlotCount(2)
    path.write_text("")  # caught half-written
    assert slots.count() == SlotCount(2)
    path.unlink()
    assert slots.count() == SlotCount(2)
    slots.write(5)  # as a user should: aside, then renamed into place
    assert slots.count() == SlotCount(5) and list(tmp_path.iterdir()) == [path]


def test_groups_take_slots_until_they_end_and_a_job_waits_for_room(tmp_path: Path) -> None:
    path = tmp_path / "slots"
    path.write_text("2")
    with LocalBackend(warm_pool=False, slots=SlotsFile(path)) as backend:
        assert backend.capacity() == 2
        first = backend.launch(_tasks(programs.block_until_killed, 2, tmp_path))
        assert backend.capacity() == 0
        asked: list[int] = []

        def give_up() -> str | None:
            asked.append(1)
            return "stop requested" if len(asked) >= 3 else None

        with pytest.raises(LaunchAbandonedError, match="stop requested"):
            backend.launch(_tasks(programs.report_three_steps, 1, tmp_path), abandon=give_up)
        assert len(asked) == 3  # asked while it waited
        placed: list[WorkerGroup] = []
        waiting = threading.Thread(
            target=lambda: placed.append(
                backend.launch(_tasks(programs.report_three_steps, 1, tmp_path), abandon=None)
            )
        )
        waiting.start()
        path.write_text("3")  # a slot comes: the waiting job is placed
        waiting.join(timeout=30)
        assert not waiting.is_alive()
        (second,) = placed
        _collect(second, Finished, 1)
        second.release()
        first.kill()
        assert backend.capacity() == 3


def test_a_job_larger_than_a_fixed_number_of_slots_never_fits(tmp_path: Path) -> None:
    with LocalBackend(warm_pool=False, slots=FixedSlots(2)) as backend:
        with pytest.raises(ClusterTooSmallError, match="needs 3 workers at once but this machine"):
            backend.launch(_tasks(programs.report_three_steps, 3, tmp_path))
        assert backend.capacity() == 2  # nothing taken


def test_slots_may_be_named_by_capacity_class(tmp_path: Path) -> None:
    by_class = {CapacityClass.ON_DEMAND: 1, CapacityClass.SPOT: 2}
    assert slots_from({"SCALETUNE_LOCAL_SLOTS": "on-demand=1,spot=2"}) == FixedSlots(3, by_class)
    path = tmp_path / "slots"
    SlotsFile(path).write(by_class)
    assert path.read_text() == "on-demand=1 spot=2"
    assert SlotsFile(path).count() == SlotCount(3, by_class)
    with pytest.raises(InvalidInputError, match="'on-demand=1 preemptible=2' is not a whole"):
        slots_from({"SCALETUNE_LOCAL_SLOTS": "on-demand=1 preemptible=2"})


def test_workers_take_the_slots_of_their_class(tmp_path: Path) -> None:
    by_class = {CapacityClass.ON_DEMAND: 1, CapacityClass.SPOT: 2}
    spot = ClusterSpec(capacity=CapacityPlan.SPOT)
    with LocalBackend(warm_pool=False, slots=FixedSlots(3, by_class)) as backend:
        assert backend.spot_room_apart
        assert (backend.capacity(ClusterSpec()), backend.capacity(spot)) == (1, 2)
        tasks = [
            dataclasses.replace(task, capacity=CapacityClass.SPOT)
            for task in _tasks(programs.block_until_killed, 2, tmp_path)
        ]
        group = backend.launch(tasks)  # both on spot slots: the on-demand one stays free
        assert (backend.capacity(ClusterSpec()), backend.capacity(spot)) == (1, 0)
        with pytest.raises(ClusterTooSmallError, match="needs on-demand=0 spot=3 workers"):
            backend.launch(
                [
                    dataclasses.replace(task, capacity=CapacityClass.SPOT)
                    for task in _tasks(programs.report_three_steps, 3, tmp_path)
                ]
            )
        group.kill()
        assert backend.capacity(spot) == 2
    with LocalBackend(warm_pool=False, slots=FixedSlots(3)) as backend:
        assert not backend.spot_room_apart and backend.capacity(spot) == 3
