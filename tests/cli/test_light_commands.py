"""Commands that read records start at once: they import no training stack, none of the
heavy libraries and not the validation library (records were validated when written);
`jobs list` pages through a tuning job's trials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scaletune.store import Store
from tests.simulated import simulated_tuning

HEAVY = {"matplotlib", "optuna", "pandas", "ray", "scipy", "sklearn", "tensorflow", "torch"}
HEAVY |= {"xgboost", "starlette", "uvicorn", "jinja2"}  # the console's server too
# Run the CLI as its entry point does, then list the top-level packages it loaded.
PROBE = """
import json, sys
from scaletune.cli import main
sys.argv = ["scaletune", *sys.argv[1:]]
try:
    main()
except SystemExit as exit_:
    code = exit_.code
print("MODULES " + json.dumps(sorted({m.split(".")[0] for m in sys.modules})), file=sys.stderr)
"""


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("light") / "scaletune.db"
    with Store(f"sqlite:///{path}") as store:
        record = simulated_tuning(store, 12)
    return path, record.id


def _loaded(store: Path, *args: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env={**os.environ, "SCALETUNE_STORE": str(store)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    line = next((line for line in result.stderr.splitlines() if line.startswith("MODULES ")), None)
    assert line is not None, result.stderr
    assert result.returncode == 0, result.stderr
    return set(json.loads(line.removeprefix("MODULES ")))


@pytest.mark.parametrize(
    "command",
    [
        ["jobs", "list"],
        ["jobs", "list", "--tuning-job", "{tuning}", "--limit", "3", "--json"],
        ["jobs", "show", "{job}"],
        ["jobs", "show", "{job}", "--json"],
        ["jobs", "metrics", "{job}", "--name", "accuracy"],
        ["tuning", "list"],
        ["tuning", "show", "{tuning}"],
        ["tuning", "show", "{tuning}", "--json"],
        ["tuning", "stop", "{tuning}"],
        ["prices"],
    ],
    ids=" ".join,
)
def test_reading_records_imports_no_heavy_library(
    tuned: tuple[Path, str], command: list[str]
) -> None:
    store, tuning_id = tuned
    args = [part.format(tuning=tuning_id, job=f"{tuning_id}-000") for part in command]
    assert _loaded(store, *args) & (HEAVY | {"pydantic"}) == set()


def test_help_imports_neither_the_database_nor_the_validation_library(
    tuned: tuple[Path, str],
) -> None:
    loaded = _loaded(tuned[0], "--help")
    assert loaded & (HEAVY | {"sqlalchemy", "pydantic", "numpy"}) == set()


def test_analytics_needs_pandas_and_nothing_heavier(tuned: tuple[Path, str]) -> None:
    csv = tuned[0].parent / "analytics.csv"
    loaded = _loaded(tuned[0], "tuning", "analytics", tuned[1], "--csv", str(csv))
    assert loaded & HEAVY == {"pandas"}
    assert len(csv.read_text().splitlines()) == 1 + 12


def test_rungs_need_scipy_and_nothing_heavier(tuned: tuple[Path, str]) -> None:
    loaded = _loaded(tuned[0], "tuning", "rungs", tuned[1], "--json")
    assert loaded & (HEAVY | {"pydantic"}) == {"scipy"}  # its Kendall's tau


def test_jobs_list_pages_through_a_tuning_jobs_trials(
    tuned: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli.test_cli import _cli

    store, tuning_id = tuned
    monkeypatch.setenv("SCALETUNE_STORE", str(store))
    pages = []
    for offset in (0, 5, 10):
        code, out, _ = _cli(
            capsys,
            "jobs", "list", "--tuning-job", tuning_id, "--limit", "5",
            "--offset", str(offset), "--json",
        )  # fmt: skip
        assert code == 0
        pages.append([job["id"] for job in json.loads(out)])
    assert [len(page) for page in pages] == [5, 5, 2]
    everything = [job_id for page in pages for job_id in page]
    assert sorted(everything) == [f"{tuning_id}-{n:03d}" for n in range(12)]
    code, out, _ = _cli(capsys, "jobs", "list", "--tuning-job", "no-such-tuning", "--json")
    assert (code, json.loads(out)) == (0, [])


def test_jobs_metrics_prints_one_jobs_curve(
    tuned: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli.test_cli import _cli

    store, tuning_id = tuned
    monkeypatch.setenv("SCALETUNE_STORE", str(store))
    job_id = f"{tuning_id}-000"
    code, out, _ = _cli(capsys, "jobs", "metrics", job_id, "--name", "accuracy", "--json")
    assert code == 0
    with Store(f"sqlite:///{store}") as records:
        expected = records.metrics(job_id, "accuracy")
    assert [(p["name"], p["step"], p["value"]) for p in json.loads(out)] == [
        (p.name, p.step, p.value) for p in expected
    ]
    assert expected, "the trial reported"
    code, out, _ = _cli(capsys, "jobs", "metrics", job_id)
    assert code == 0 and out.splitlines()[0].split() == ["name", "step", "value", "time", "(UTC)"]
    code, _, err = _cli(capsys, "jobs", "metrics", "no-such-job")
    assert (code, err.strip()) == (2, "error: no training job with id 'no-such-job'")
