"""examples/notebook.ipynb, run top to bottom in a real Jupyter kernel (nbclient): any error
fails the test; a job's wait leaves one display, updated in place, not a line per update."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"


def _html(output: Any) -> str:
    return str(output.get("data", {}).get("text/html", ""))


@pytest.mark.usefixtures("store_path")
def test_the_example_notebook_runs_in_a_kernel(tmp_path: Path) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # the store and home of this test: the kernel inherits the environment
    nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    ).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    fit, shown, _, tune, tuned = code[1], code[2], code[3], code[4], code[5]

    # fit's wait: one display, left showing the job as it ended
    assert [output.output_type for output in fit.outputs] == ["display_data"]
    assert "training job" in _html(fit.outputs[0]) and "Completed" in _html(fit.outputs[0])
    assert "step 40 of 40" in _html(fit.outputs[0])
    # the handle as the cell's value: the summary with its curve
    summary = _html(shown.outputs[0])
    assert "validation:auc" in summary and "<polyline" in summary

    assert [output.output_type for output in tune.outputs] == ["display_data"]
    assert "6 of 6" in _html(tune.outputs[0]) and "Completed" in _html(tune.outputs[0])
    assert "best validation:auc so far" in _html(tuned.outputs[0])

    # what the handles return renders too: the record, the summary
    described, summarized = code[7], code[8]
    assert "Completed" in _html(described.outputs[0])
    assert "validation:auc" in _html(described.outputs[0])
    assert "6 of 6" in _html(summarized.outputs[0])
