"""`scaletune experiment convergence`, `report` and `demo` from the command line."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scaletune import ContinuousRange, Estimator, Session, Tuner
from tests.cli.test_cli import _cli


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0"], "--workers '0': give a number of workers from 1 to 256"),
        (["--workers", "2,x"], "--workers '2,x'"),
        (["--algorithm", "lightgbm"], "--algorithm 'lightgbm': choose one of 'xgboost', 'dnn'"),
        (["--data", "/no/such/file.csv"], "--data '/no/such/file.csv' does not exist"),
        (
            ["--max-jobs", "2", "--max-parallel-jobs", "3"],
            "--max-parallel-jobs 3 is more than --max-jobs 2",
        ),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(
    store_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    code, _, err = _cli(capsys, "experiment", "convergence", "--out", str(tmp_path / "out"), *args)
    assert code == 2
    assert message in err and err.strip().count("\n") == 0
    assert not (tmp_path / "out").exists()


def test_unreadable_data_is_named(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bank.csv"
    bad.write_text("not;the;bank;file\n1;2;3;4\n")
    code, _, err = _cli(capsys, "experiment", "convergence", "--data", str(bad))
    assert (code == 2 and "is not the UCI bank marketing CSV" in err) or "missing" in err


def test_demo_runs_the_small_experiment_and_says_where_the_report_is(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(capsys, "demo", "--out", str(tmp_path / "demo"))
    assert code == 0, err
    assert f"report: {tmp_path / 'demo' / 'report.html'}" in " ".join(out.split())
    assert "[7/7]" not in err and "[5/5] best tuned settings on 3 worker(s)" in err  # plain lines
    rendered = _render(tmp_path / "demo" / "report.html", tmp_path)
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    # Scaling out, tuning, and quality against billable cost: a table each; three pictures
    # and the front's.
    assert rendered.stdout.count("<table ") == 3 and rendered.stdout.count("<img ") == 4
    assert "Quality against billable cost, cluster sizes 1..3" in rendered.stdout


def _render(page: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    browser = next(
        (
            found
            for name in ("chromium", "chromium-browser", "google-chrome")
            if (found := shutil.which(name))
        ),
        None,
    )
    if browser is None:
        message = "no headless Chromium here: scripts/install-chromium.sh (.ci/run runs it)"
        if os.environ.get("SCALETUNE_REQUIRE_CHROMIUM"):
            pytest.fail(message)
        pytest.skip(message)
    return subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-crash-reporter",
            "--disable-breakpad",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_report_of_a_stored_tuning_job_renders_in_headless_chromium(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Session(store_path) as session:
        tuner = Tuner(
            Estimator(
                "xgboost", {"num_round": 9, "eval_metric": "auc"}, instance_count=2, session=session
            ),
            "validation:auc",
            {"eta": ContinuousRange(min_value=0.05, max_value=1)},
            strategy="Hyperband",
            hyperband={"min_resource": 1, "max_resource": 9},
            max_jobs=3,
            max_parallel_jobs=1,
        )
        job = tuner.fit(
            {"train": {"dataset": "breast-cancer"}, "validation": {"dataset": "breast-cancer"}}
        )
    code, out, err = _cli(capsys, "report", job.id, "--out", str(tmp_path / "report"))
    assert code == 0, err
    page = tmp_path / "report" / "report.html"
    assert f"report: {page}" in " ".join(out.split())
    rendered = _render(page, tmp_path)
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    dom = rendered.stdout
    assert dom.count("<table ") == 2 and dom.count("<img ") == 2
    assert f"Tuning job {job.id}" in dom


def test_data_is_recorded_as_given_and_jobs_resolve_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scaletune.cli._experiment import _data
    from scaletune.experiment._plans import plan_for
    from scaletune.spec import training_spec_from_dict

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "bank.csv").write_text("x\n")
    given = _data(Path("data/bank.csv"))
    assert given == Path("data/bank.csv")  # reports carry no machine's absolute path
    plan = plan_for("xgboost", given)
    assert plan.channels["train"]["dataset_file"] == "data/bank.csv"
    spec = training_spec_from_dict(
        {
            "algorithm": "dnn",
            "channels": {"train": {"dataset": "digits", "dataset_file": "data/bank.csv"}},
        }
    )
    assert spec.channels[next(iter(spec.channels))].dataset_file == tmp_path / "data" / "bank.csv"
