"""Anytime performance on LCBench (YAHPO surrogate): scaletune's strategies against Optuna,
Ray Tune and Syne Tune, WORKERS trials at a time, on the same curves, costs and budget.

    .bench-venv/bin/python -m benchmarks.tuning.run            # 10 tasks x 10 seeds
    .bench-venv/bin/python -m benchmarks.tuning.run --tasks 2 --seeds 2   # a quick look
    .bench-venv/bin/python -m benchmarks.tuning.run --task-set other       # ten other tasks
    .bench-venv/bin/python -m benchmarks.tuning.run --task-set all \
        --only ASHA --only "Ray Tune ASHA" ...                          # all 34, some methods
    .bench-venv/bin/python -m benchmarks.tuning.run --task-set all --first-seed 10 \
        --name tuning_lcbench_all_seeds10to19 --only ...                # a replication
    .bench-venv/bin/python -m benchmarks.tuning.run --pool tuning_lcbench_all \
        --pool tuning_lcbench_all_seeds10to19 --name tuning_lcbench_all_pooled  # both, as one
    .bench-venv/bin/python -m benchmarks.tuning.run --task-set all --setting wide ...
        # 8 trials at a time, a budget of 5, 10 s start-up: files end in _wide

Writes benchmarks/results/tuning_lcbench.{json,md,png} (tuning_lcbench_other.* for the other
tasks). Runs go seed by seed, and each finished run is kept in benchmarks/results/in-progress/
(not committed): the same command run again goes on from them. `--fill` also keeps the
committed runs of the methods it runs; `--partial` writes the seeds every method has
finished, without running anything.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._report import RESULTS
from benchmarks.tuning._lcbench_results import (
    CONTROL,
    GRID,
    OURS,
    PEERS,
    TOP_K,
    incumbent_curve,
    kept_provenance,
    load_runs,
    pooled_runs,
    provenance,
    setting_of,
    summarize,
    write,
)
from benchmarks.tuning._problem import (
    COMMITTED,
    SETTINGS,
    TASK_SETS,
    Setting,
    Task,
    load_task,
    stream_seed,
)
from benchmarks.tuning._simulator import Trajectory, run_policy

Job = tuple[str, str, int, str]  # method, task, replicate, setting
PROGRESS = RESULTS / "in-progress"
PART = "part way"  # how the note of a file written with --partial begins


@functools.cache
def _task(name: str, setting: Setting) -> Task:
    return load_task(name, setting)


def _run(method: str, task: Task, seed: int) -> tuple[Trajectory, int]:
    """The reports, and how many proposals fell outside the space (clipped to it)."""
    if method in OURS:
        from benchmarks.tuning._scaletune import run_scaletune

        return run_scaletune(method, task, seed), 0
    from benchmarks.tuning import _baselines, _controls, _peers

    with tempfile.TemporaryDirectory(prefix="scaletune-bench-") as folder:
        policies: dict[str, Callable[[], Any]] = {
            CONTROL: lambda: _controls.HyperbandPolicy(seed),
            "Optuna TPE+HyperbandPruner": lambda: _peers.OptunaPolicy(seed),
            "Ray Tune ASHA": lambda: _peers.RayPolicy(seed, brackets=1),
            "Ray Tune AsyncHyperBand": lambda: _peers.RayPolicy(seed, brackets=3),
            **{
                f"Syne Tune {kind}": functools.partial(_peers.SynePolicy, seed, kind)
                for kind in _peers.SynePolicy.KINDS
            },
            "DEHB": lambda: _peers.DEHBPolicy(seed, folder),
            TOP_K: lambda: _baselines.TopKPolicy(seed, task),
        }
        policy = policies[method]()
        return run_policy(policy, task, task.setting.workers), getattr(policy, "clipped", 0)


def _one(job: Job) -> dict[str, Any]:
    method, task_name, seed, setting = job
    task = _task(task_name, SETTINGS[setting])
    started = time.perf_counter()
    trajectory, clipped = _run(method, task, stream_seed(task_name, seed))
    seconds = time.perf_counter() - started
    times = np.array([t for t, _ in trajectory]) / task.budget_seconds
    best = np.maximum.accumulate(np.array([v for _, v in trajectory]))
    incumbent = [float(best[times <= f][-1]) if (times <= f).any() else None for f in GRID]
    return {
        "method": method,
        "task": task_name,
        "seed": seed,  # the replicate; its stream: stream_seed
        "setting": setting,
        "stream_seed": stream_seed(task_name, seed),
        "budget_seconds": task.budget_seconds,
        "reports": len(trajectory),
        "run_seconds": seconds,
        "clipped_proposals": clipped,
        # best val_accuracy (%) reported by each fraction of GRID; 4 decimals and no flat
        # tail keep the file small (34 tasks x 10 seeds x 9 methods) and every figure drawn
        # from it exact
        "incumbent": incumbent_curve(
            [None if value is None else round(value, 4) for value in incumbent]
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task-set", choices=sorted(TASK_SETS), default="first")
    parser.add_argument("--tasks", type=int, help="the set's first N tasks (default: all)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="the first replicate: seeds FIRST..FIRST+SEEDS-1 (new streams for a replication)",
    )
    parser.add_argument(
        "--name", help="the results files' name (default: tuning_lcbench[_TASK_SET])"
    )
    parser.add_argument(
        "--pool",
        action="append",
        metavar="NAME",
        help="only summarise the runs of these committed results together (with --name): the "
        "methods run on every (task, seed) pair of them all",
    )
    parser.add_argument(
        "--setting",
        choices=sorted(SETTINGS),
        default=COMMITTED.name,
        help="how runs are timed: the committed one (4 at a time, budget 10, 2 s start-up) or "
        "wide (8 at a time, budget 5, 10 s start-up; the files' names end in _wide)",
    )
    parser.add_argument(
        "--fill",
        action="store_true",
        help="keep the committed runs of the methods run too: run only what the file lacks",
    )
    parser.add_argument(
        "--partial",
        action="store_true",
        help="run nothing: write the seeds on which every method has finished every task",
    )
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument(
        "--summarize",
        action="store_true",
        help="only rebuild the table, intervals and plot from the committed JSON",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=(*OURS, *PEERS),
        help="run just these methods; the others' runs are kept from the committed JSON",
    )
    args = parser.parse_args()
    if args.seeds < 1 or args.first_seed < 0:
        parser.error(f"--seeds {args.seeds} --first-seed {args.first_seed}: need 1+ and 0+")
    if args.pool and not args.name:
        parser.error("--pool needs --name: where the pooled summary goes")
    for source in [*(args.pool or ()), *([args.name or ""] if args.summarize else [])]:
        if source and not (RESULTS / f"{source}.json").exists():
            parser.error(f"{source!r}: no benchmarks/results/{source}.json to summarise")
    setting = SETTINGS[args.setting]
    default = "tuning_lcbench" if args.task_set == "first" else f"tuning_lcbench_{args.task_set}"
    name = args.name or default
    name += "" if name.endswith(setting.suffix) else setting.suffix  # a setting's own files
    if args.pool:
        try:
            _write_pooled(args.pool, name)
        except ValueError as error:
            parser.error(str(error))
        return
    if args.summarize:
        committed = json.loads((RESULTS / f"{name}.json").read_text())
        runs = load_runs(name)
        made_by, sources = kept_provenance(committed), committed.get("pooled_from")
        write(runs, summarize(runs), name, made_by, pooled_from=sources)
        return
    methods = args.only or (*OURS, *PEERS)
    jobs: list[Job] = [  # seed by seed: a run stopped part way leaves whole seeds behind
        (method, task, seed, setting.name)
        for seed in range(args.first_seed, args.first_seed + args.seeds)
        for task in TASK_SETS[args.task_set][: args.tasks]
        for method in methods
    ]
    try:
        kept = _kept_runs(jobs, name, fill=args.fill) if args.only else []
    except ValueError as error:
        parser.error(str(error))
    progress = _Progress(name, _command())
    fresh = progress.runs_of(jobs)
    ran = {_key(run) for run in fresh}  # a run both kept and in progress stands once
    done = [*(run for run in kept if _key(run) not in ran), *fresh]
    finished = {_key(run) for run in done}
    todo = [job for job in jobs if job not in finished]
    started = time.perf_counter()
    if todo and not args.partial:
        with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
            for run in pool.imap_unordered(_one, todo, chunksize=1):
                progress.add(run)
                done.append(run)
    wall = progress.wall_before + time.perf_counter() - started
    runs = _whole_seeds(done, jobs) if args.partial else done
    if not runs:
        parser.error(f"--partial: no seed of {name} has every method's every task yet")
    command, note = _command(), None
    if kept:  # the other methods' runs came from the committed file's command; its note holds
        earlier = json.loads((RESULTS / f"{name}.json").read_text())
        # a command run again replaced its own runs: it stands once, last
        before = [part for part in earlier["command"].split("` then `") if part != command]
        # a file written part way said so; once --fill has run every job, it no longer is
        notes = [
            n
            for n in (earlier.get("note") or "").split("; ")
            if n and not (args.fill and n.startswith(PART))
        ]
        command, note = "` then `".join([*before, command]), "; ".join(notes) or None
    if args.partial:
        seeds = sorted({run["seed"] for run in runs})
        partial = f"{PART}: seeds {', '.join(map(str, seeds))} of the command's"
        note = f"{note}; {partial}" if note else partial
    write(runs, summarize(runs), name, provenance(command, wall, note))
    if not args.partial:
        progress.finish()


def _key(run: dict[str, Any]) -> Job:
    return (run["method"], run["task"], run["seed"], run.get("setting", COMMITTED.name))


def _whole_seeds(runs: list[dict[str, Any]], jobs: list[Job]) -> list[dict[str, Any]]:
    """The runs of the seeds on which every job is done."""
    have, wanted = {_key(run) for run in runs}, set(jobs)
    missing = {seed for _, _, seed, _ in wanted - have}
    return [run for run in runs if run["seed"] not in missing and _key(run) in wanted]


class _Progress:
    """Finished runs of one results file, one JSON line each, so that a command stopped part
    way goes on where it was when run again. Before each run, a line names the command and
    the wall time it took since the one before."""

    def __init__(self, name: str, command: str) -> None:
        self.path = PROGRESS / f"{name}.jsonl"
        self.runs: list[dict[str, Any]] = []
        self.wall_before = 0.0
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                entry = json.loads(line)
                if "run" in entry:
                    self.runs.append(entry["run"])
                else:
                    self.wall_before += entry.get("wall_seconds", 0.0)
        PROGRESS.mkdir(parents=True, exist_ok=True)
        self._started = time.perf_counter()
        self._command = command

    def runs_of(self, jobs: list[Job]) -> list[dict[str, Any]]:
        wanted = set(jobs)
        return [run for run in self.runs if _key(run) in wanted]

    def add(self, run: dict[str, Any]) -> None:
        with self.path.open("a") as file:
            wall = time.perf_counter() - self._started
            self._started += wall
            file.write(json.dumps({"command": self._command, "wall_seconds": wall}) + "\n")
            file.write(json.dumps({"run": run}, separators=(",", ":")) + "\n")

    def finish(self) -> None:
        self.path.unlink(missing_ok=True)


def _command() -> str:
    """This command as the results name it (--partial only writes what another run made)."""
    arguments = [argument for argument in sys.argv[1:] if argument != "--partial"]
    return ("python -m benchmarks.tuning.run " + shlex.join(arguments)).strip()


def _write_pooled(names: list[str], name: str) -> None:
    """One summary of several results files' runs (a replication on other seeds beside the
    first). The file keeps the summary and the sources' names, not their runs again."""
    files = [json.loads((RESULTS / f"{source}.json").read_text()) for source in names]
    runs = pooled_runs(names)
    methods = ", ".join(dict.fromkeys(run["method"] for run in runs))
    commands = "` and `".join(file["command"] for file in files)
    note = (
        f"the runs of {', '.join(f'{source}.json' for source in names)} summarised as one; "
        f"the methods run on every (task, seed) pair of them: {methods}"
    )
    wall = sum(file["benchmark_wall_seconds"] for file in files)
    made_by = provenance(f"{commands}` pooled by `{_command()}", wall, note)
    write(runs, summarize(runs), name, made_by, pooled_from=names)


def _kept_runs(jobs: list[Job], name: str, *, fill: bool) -> list[dict[str, Any]]:
    """The committed runs of the methods not run again, for the same tasks and seeds (with
    `fill`, of those run again too: they run only where the file has none). ValueError: the
    file's runs are of another setting."""
    rerun = {method for method, _, _, _ in jobs}
    wanted = {(task, seed) for _, task, seed, _ in jobs}
    path = RESULTS / f"{name}.json"
    committed = json.loads(path.read_text())["runs"] if path.exists() else []
    if committed and setting_of(committed).name != jobs[0][3]:
        raise ValueError(f"{name}.json holds runs of another setting than --setting {jobs[0][3]}")
    kept = [
        run
        for run in committed
        if (fill or run["method"] not in rerun)
        and (run["task"], run["seed"]) in wanted
        and run.get("stream_seed") == stream_seed(run["task"], run["seed"])  # not a shared one
    ]
    order = {method: index for index, method in enumerate((*OURS, *PEERS))}
    return sorted(kept, key=lambda run: order[run["method"]])


if __name__ == "__main__":
    main()
