"""The read side loads no run side: importing `scaletune.analysis` (what every command, page,
report and notebook that reads a tuning job goes through) loads the store and the spec's
names, never the tuner, the training stack, Optuna or pydantic."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import scaletune.analysis
print(json.dumps(sorted(sys.modules)))
"""


def test_the_analyses_import_neither_the_run_side_nor_its_libraries() -> None:
    loaded = set(
        json.loads(
            subprocess.run(
                [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
            ).stdout
        )
    )
    ours = {name for name in loaded if name.startswith("scaletune.")}
    assert "scaletune.store" in ours and "scaletune.analysis._summary" in ours
    run_side = ("scaletune.tuning", "scaletune.training", "scaletune.cluster", "scaletune.api")
    assert not {name for name in ours if name.startswith(run_side)}
    assert not loaded & {"optuna", "pydantic", "torch", "xgboost", "pandas", "scipy"}
    assert not {name for name in ours if name.startswith("scaletune.spec.")} - {
        "scaletune.spec._names"
    }
