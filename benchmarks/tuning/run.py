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

Writes benchmarks/results/tuning_lcbench.{json,md,png} (tuning_lcbench_other.* for the other
tasks).
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import shlex
import sys
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
    incumbent_curve,
    kept_provenance,
    load_runs,
    pooled_runs,
    provenance,
    summarize,
    write,
)
from benchmarks.tuning._problem import TASK_SETS, WORKERS, Task, load_task, stream_seed
from benchmarks.tuning._simulator import Trajectory, run_policy


@functools.cache
def _task(name: str) -> Task:
    return load_task(name)


def _run(method: str, task: Task, seed: int) -> tuple[Trajectory, int]:
    """The reports, and how many proposals fell outside the space (clipped to it)."""
    if method in OURS:
        from benchmarks.tuning._scaletune import run_scaletune

        return run_scaletune(method, task, seed), 0
    from benchmarks.tuning import _controls, _peers

    policies: dict[str, Callable[[], Any]] = {
        CONTROL: lambda: _controls.HyperbandPolicy(seed),
        "Optuna TPE+HyperbandPruner": lambda: _peers.OptunaPolicy(seed),
        "Ray Tune ASHA": lambda: _peers.RayPolicy(seed, brackets=1),
        "Ray Tune AsyncHyperBand": lambda: _peers.RayPolicy(seed, brackets=3),
        "Syne Tune ASHA": lambda: _peers.SynePolicy(seed, "ASHA"),
        "Syne Tune BOHB": lambda: _peers.SynePolicy(seed, "BOHB"),
    }
    policy = policies[method]()
    return run_policy(policy, task, WORKERS), getattr(policy, "clipped", 0)


def _one(job: tuple[str, str, int]) -> dict[str, Any]:
    method, task_name, seed = job
    task = _task(task_name)
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
    default = "tuning_lcbench" if args.task_set == "first" else f"tuning_lcbench_{args.task_set}"
    name = args.name or default
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
    jobs = [
        (method, task, seed)
        for task in TASK_SETS[args.task_set][: args.tasks]
        for seed in range(args.first_seed, args.first_seed + args.seeds)
        for method in methods
    ]
    kept = _kept_runs(jobs, name) if args.only else []
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
        runs = kept + pool.map(_one, jobs, chunksize=1)
    wall = time.perf_counter() - started
    command, note = _command(), None
    if kept:  # the other methods' runs came from the committed file's command; its note holds
        earlier = json.loads((RESULTS / f"{name}.json").read_text())
        # a command run again replaced its own runs: it stands once, last
        before = [part for part in earlier["command"].split("` then `") if part != command]
        command, note = "` then `".join([*before, command]), earlier.get("note")
    write(runs, summarize(runs), name, provenance(command, wall, note))


def _command() -> str:
    return ("python -m benchmarks.tuning.run " + shlex.join(sys.argv[1:])).strip()


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


def _kept_runs(jobs: list[tuple[str, str, int]], name: str) -> list[dict[str, Any]]:
    """The committed runs of the methods not run again, for the same tasks and seeds."""
    rerun = {method for method, _, _ in jobs}
    wanted = {(task, seed) for _, task, seed in jobs}
    path = RESULTS / f"{name}.json"
    committed = json.loads(path.read_text())["runs"] if path.exists() else []
    kept = [
        run
        for run in committed
        if run["method"] not in rerun
        and (run["task"], run["seed"]) in wanted
        and run.get("stream_seed") == stream_seed(run["task"], run["seed"])  # not a shared one
    ]
    order = {method: index for index, method in enumerate((*OURS, *PEERS))}
    return sorted(kept, key=lambda run: order[run["method"]])


if __name__ == "__main__":
    main()
