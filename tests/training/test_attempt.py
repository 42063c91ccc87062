"""Which checkpoint a new attempt starts from."""

from __future__ import annotations

from pathlib import Path

from scaletune.checkpoints import CheckpointFolder
from scaletune.training._attempt import resume_point


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
