"""The LCBench harness's anchors (top-K, DEHB, Syne Tune's model-based ASHA), its settings,
its significance test and its resumable runs. The policies run on a made-up task whose
curves are known (no surrogate needed); the peers' libraries live in the benchmark
environment (`make bench-test`), where their tests run."""

from __future__ import annotations

import json
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from benchmarks.tuning import _lcbench_results as results
from benchmarks.tuning import run
from benchmarks.tuning._baselines import TopKPolicy
from benchmarks.tuning._problem import (
    COMMITTED,
    EPOCHS,
    MIN_RESOURCE,
    WIDE,
    Setting,
    Task,
)
from benchmarks.tuning._simulator import run_policy

from scaletune.simulation import Curve, CurvePoint

STEP_SECONDS = 1.0


class KnownCurves:
    """Each configuration's accuracy rises to 100 * (1 - |log10(lr) + 2| / 3), its learning
    rate's distance from 0.01; every epoch takes a second after the setting's start-up."""

    def __init__(self, start_seconds: float) -> None:
        self.start_seconds = start_seconds
        self.asked: list[dict[str, object]] = []

    def final(self, config: dict[str, object]) -> float:
        rate = float(config["learning_rate"])  # type: ignore[arg-type]
        return float(100 * (1 - abs(np.log10(rate) + 2) / 3))

    def curve(self, config: dict[str, object], instance_count: int) -> Curve:
        self.asked.append(config)
        final = self.final(config)
        points = [
            CurvePoint(
                epoch,
                self.start_seconds + STEP_SECONDS * (epoch - MIN_RESOURCE + 1),
                {"val_accuracy": final * (1 - 0.5 / epoch)},
            )
            for epoch in range(MIN_RESOURCE, EPOCHS + 1)
        ]
        return Curve(points, full_resource=EPOCHS, start_seconds=self.start_seconds)


def _task(setting: Setting = COMMITTED, full_trials: float | None = None) -> Task:
    source = KnownCurves(setting.start_seconds)
    full = setting.start_seconds + STEP_SECONDS * (EPOCHS - MIN_RESOURCE + 1)
    budget = (full_trials or setting.budget_full_trials) * full
    return Task("known", source, budget, setting, setting.start_seconds + STEP_SECONDS)  # type: ignore[arg-type]


def test_top_k_screens_half_the_budget_at_the_first_rung_then_trains_the_best_first() -> None:
    task = _task()
    policy = TopKPolicy(seed=0, task=task)
    trajectory = run_policy(policy, task, task.setting.workers)
    source: KnownCurves = task.source  # type: ignore[assignment]

    # half of 4 workers x 10 full trials' time, at 3 s to the first rung: 4 x 5 x 53 / 3
    assert policy.screen == int(0.5 * task.budget_seconds * 4 / 3.0)
    screened = [c for n, c in enumerate(source.asked) if n not in policy.trained]
    trained = [source.asked[n] for n in sorted(policy.trained)]
    assert len(screened) >= policy.screen and trained
    # each trained configuration is a screened one, in the order of their first-rung values
    finals = [source.final(config) for config in trained]
    assert finals == sorted(finals, reverse=True)
    assert finals[0] == max(source.final(config) for config in screened)
    assert all(config in screened for config in trained)
    assert max(value for _, value in trajectory) == pytest.approx(finals[0] * (1 - 0.5 / EPOCHS))


def test_the_wide_setting_runs_eight_at_a_time_with_a_dearer_start() -> None:
    assert (WIDE.workers, WIDE.budget_full_trials, WIDE.start_seconds) == (8, 5, 10.0)
    assert COMMITTED.suffix == "" and WIDE.suffix == "_wide"
    task = _task(WIDE)
    trajectory = run_policy(TopKPolicy(seed=0, task=task), task, WIDE.workers)
    firsts = [moment for moment, _ in trajectory[: WIDE.workers]]
    assert firsts == [WIDE.start_seconds + STEP_SECONDS] * WIDE.workers  # 8 start at once


def _runs(
    methods: dict[str, list[float]], setting: str = "committed", seeds: int = 8
) -> list[dict[str, Any]]:
    """Runs whose incumbents hold one value each from start to end, per task and seed."""
    return [
        {
            "method": method,
            "task": f"t{task}",
            "seed": seed,
            "setting": setting,
            "run_seconds": 1.0,
            "incumbent": [values[task] + 0.01 * seed * (method == results.DEFAULT)],
        }
        for method, values in methods.items()
        for task in range(len(values))
        for seed in range(seeds)
    ]


def test_the_summary_names_the_best_peer_and_tests_the_lead_by_wilcoxon() -> None:
    ahead = _runs(
        {
            results.DEFAULT: [90.0, 80.0, 70.0],
            "Syne Tune ASHA-CQR": [89.0, 79.5, 69.0],
            "DEHB": [85.0, 75.0, 60.0],
        }
    )
    summary = results.summarize(ahead)
    at_end = summary["comparisons"]["1.0"]
    assert at_end["best_peer"] == "Syne Tune ASHA-CQR"
    row = at_end["differences"][f"{results.DEFAULT} - Syne Tune ASHA-CQR"]
    assert row["mean"] < 0 and row["wilcoxon_p"] < 0.001  # ahead on all 24 pairs
    lines = results._lead_lines(summary)
    assert any("at 100 %: the lowest mean regret" in line for line in lines)
    assert any("a significant lead" in line for line in lines)

    mixed = results.summarize(
        _runs({results.DEFAULT: [90.0, 80.0, 70.0], "DEHB": [90.5, 79.0, 70.2]})
    )
    row = mixed["comparisons"]["1.0"]["differences"][f"{results.DEFAULT} - DEHB"]
    assert row["mean"] < 0 and row["wilcoxon_p"] > 0.05
    assert any(
        "DEHB, -0.1" in line and ": ahead, not significantly" in line
        for line in results._lead_lines(mixed)
    )
    behind = results.summarize(
        _runs({results.DEFAULT: [90.0, 80.0, 70.0], "DEHB": [91.0, 81.0, 71.0]})
    )
    assert any(
        "not the lowest (DEHB is)" in line and line.endswith(": behind.")
        for line in results._lead_lines(behind)
    )
    assert results._wilcoxon_p(np.zeros(5)) == 1.0


def test_each_method_names_its_package_and_settings_are_never_mixed() -> None:
    assert results.package_of("Syne Tune ASHA-CQR") == "syne-tune"
    assert results.package_of("Ray Tune ASHA") == "ray"
    assert results.package_of("Optuna TPE+HyperbandPruner") == "optuna"
    assert results.package_of("DEHB") == "dehb"
    assert results.package_of(results.TOP_K) == "scaletune"
    assert results.package_of(results.DEFAULT) == "scaletune"
    assert results.setting_of(_runs({"DEHB": [1.0]}, "wide")) is WIDE
    assert results.setting_of([{"method": "DEHB"}]) is COMMITTED  # runs from before settings
    with pytest.raises(ValueError, match="several settings"):
        results.setting_of(_runs({"DEHB": [1.0]}) + _runs({"DEHB": [1.0]}, "wide"))


def test_a_stopped_run_goes_on_from_its_finished_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run, "PROGRESS", tmp_path)
    jobs: list[run.Job] = [(m, "t0", s, "wide") for s in (0, 1) for m in ("DEHB", "A")]
    first = run._Progress("x", "the command")
    for method, task, seed, setting in jobs[:3]:  # stopped before its last job
        first.add({"method": method, "task": task, "seed": seed, "setting": setting})
    again = run._Progress("x", "the command")
    assert [run._key(r) for r in again.runs_of(jobs)] == jobs[:3]
    assert again.wall_before > 0
    assert [r["seed"] for r in run._whole_seeds(again.runs, jobs)] == [0, 0]  # seed 1 lacks A
    again.finish()
    assert not (tmp_path / "x.jsonl").exists()


def test_dehb_trains_each_job_from_scratch_to_its_fidelity(tmp_path: Path) -> None:
    pytest.importorskip("dehb", reason="DEHB lives in the benchmark environment")
    from benchmarks.tuning._peers import DEHBPolicy

    task = _task(full_trials=3)
    policy = DEHBPolicy(seed=0, folder=str(tmp_path))
    trajectory = run_policy(policy, task, task.setting.workers)
    fidelities = {int(np.ceil(job["fidelity"] - 1e-9)) for job, _ in policy.jobs.values()}
    assert min(fidelities) == MIN_RESOURCE and max(fidelities) == EPOCHS
    assert all(epochs == np.ceil(job["fidelity"] - 1e-9) for job, epochs in policy.jobs.values())
    assert policy.dehb.inc_score < 0  # told the negative of a value it maximises
    assert max(value for _, value in trajectory) > 0


@pytest.mark.parametrize("kind", ["ASHA-CQR", "ASHA-BORE"])
def test_syne_tunes_model_based_asha_stops_trials_at_its_rungs(kind: str) -> None:
    pytest.importorskip("syne_tune", reason="Syne Tune lives in the benchmark environment")
    from benchmarks.tuning._peers import SynePolicy

    # Budget for 0.4 of a full trial: some ten trials, most stopped at the first rung, five
    # of them proposed by the fitted model (each fit is five boosted quantile regressions)
    task = _task(full_trials=0.4)
    policy = SynePolicy(seed=0, kind=kind)
    trajectory = run_policy(policy, task, task.setting.workers)
    reports = len(trajectory)
    full = len(policy.trials) * (EPOCHS - MIN_RESOURCE + 1)
    assert len(policy.trials) > task.setting.workers and reports < full  # some were stopped


@pytest.fixture(scope="module")
def pool_helper() -> None:
    """multiprocessing's resource tracker, which a pool starts and which lives as long as this
    process: started before a test's leak check counts processes."""
    resource_tracker.ensure_running()


@pytest.mark.usefixtures("pool_helper")
def test_a_file_written_part_way_says_so_and_fill_runs_only_what_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # onnxruntime (YAHPO's surrogate) leaves a session file in $TMPDIR when it is imported,
    # here and in the pool's processes: theirs is a folder of this test's own
    (tmp_path / "imports").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "imports"))
    pytest.importorskip("yahpo_gym", reason="yahpo-gym lives in the benchmark environment")
    from benchmarks.tuning._problem import YAHPO_DATA

    if not (YAHPO_DATA / "lcbench" / "model.onnx").is_file():
        pytest.skip(f"{YAHPO_DATA} is missing (shared data)")
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    monkeypatch.setattr(run, "PROGRESS", tmp_path / "in-progress")
    methods = (results.DEFAULT, results.TOP_K)
    arguments = ["--tasks", "1", "--seeds", "2", "--name", "t"]
    arguments += [argument for method in methods for argument in ("--only", method)]
    firsts = [run._one((method, "3945", 0, "committed")) for method in methods]
    progress = run._Progress("t", "the command")  # seed 0 ran, then a stop
    for first in firsts:
        progress.add(first)

    monkeypatch.setattr("sys.argv", ["run", *arguments, "--partial"])
    run.main()
    written = json.loads((tmp_path / "t.json").read_text())
    assert [r["seed"] for r in written["runs"]] == [0, 0]
    assert written["note"].startswith("part way: seeds 0 ")
    assert "--partial" not in written["command"]
    # Written again part way with --fill: the committed runs and those in progress are the
    # same runs, kept once (each such write had added them again: a file of 7x its runs).
    monkeypatch.setattr("sys.argv", ["run", *arguments, "--fill", "--partial"])
    run.main()
    again = json.loads((tmp_path / "t.json").read_text())
    assert [r["seed"] for r in again["runs"]] == [0, 0]

    (tmp_path / "in-progress" / "t.jsonl").unlink()  # another machine: only the file is left
    monkeypatch.setattr("sys.argv", ["run", *arguments, "--fill", "--processes", "1"])
    run.main()
    filled = json.loads((tmp_path / "t.json").read_text())
    assert sorted(r["seed"] for r in filled["runs"]) == [0, 0, 1, 1]
    assert [r for r in filled["runs"] if r["seed"] == 0] == firsts  # kept, not run again
    assert "note" not in filled and not (tmp_path / "in-progress" / "t.jsonl").exists()
