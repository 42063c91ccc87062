"""Whether a rerun of LCBench methods reproduced committed runs: for every (method, task, seed)
in both files, are the reports and the best-so-far curve the same, and how did regret move
(paired, with a bootstrap interval)? For a change meant to keep proposals as they were.

    .bench-venv/bin/python -m benchmarks.tuning.run --task-set all --first-seed 40 --seeds 10 \
        --only 'LastValueTPE ASHA forecast' --name tuning_lcbench_rerun_seeds40to49
    .bench-venv/bin/python -m benchmarks.tuning.same_runs tuning_lcbench_rerun_seeds40to49 \
        --against tuning_lcbench_all_seeds40to49

Writes benchmarks/results/NAME_same.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

import numpy as np

from benchmarks._report import RESULTS, interval_text, paired_interval
from benchmarks.tuning._lcbench_results import CHECKPOINTS, at, load_runs


def compare(rerun: list[dict[str, Any]], committed: list[dict[str, Any]]) -> dict[str, Any]:
    before = {(r["method"], r["task"], r["seed"]): r for r in committed}
    paired = [
        (run, before[key])
        for run in rerun
        if (key := (run["method"], run["task"], run["seed"])) in before
    ]
    if not paired:
        raise SystemExit("no (method, task, seed) is in both files")
    same = [
        a for a, b in paired if a["reports"] == b["reports"] and a["incumbent"] == b["incumbent"]
    ]
    differences = [
        max(abs(at(a, f) - at(b, f)) for f in CHECKPOINTS) for a, b in paired if a not in same
    ]
    rng = np.random.default_rng(0)
    return {
        "pairs": len(paired),
        "same": len(same),
        "largest_difference": max(differences, default=0.0),
        # regret is the best known minus the best found: its change is the best found's, negated
        "regret_change": {
            str(f): paired_interval(np.array([at(b, f) - at(a, f) for a, b in paired]), rng)
            for f in CHECKPOINTS
        },
        "different": sorted(f"{a['task']}/{a['seed']}" for a, _ in paired if a not in same),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rerun")
    parser.add_argument("--against", required=True)
    args = parser.parse_args(argv)
    result = compare(load_runs(args.rerun), load_runs(args.against))
    command = "python -m benchmarks.tuning.same_runs " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    lines = [
        f"# {args.rerun} against {args.against}",
        "",
        f"`{command}`",
        "",
        f"- (method, task, seed) runs in both: {result['pairs']}",
        f"- the same reports and best-so-far curve: {result['same']}",
        f"- largest difference of best accuracy at 25 / 50 / 100 % of the budget where not: "
        f"{result['largest_difference']:.4f} points",
    ]
    change = result["regret_change"]
    lines.append(
        "- regret, rerun minus committed, mean [95 % interval] at 25 / 50 / 100 % of the "
        "budget: " + " / ".join(interval_text(change[str(f)]) for f in CHECKPOINTS) + " points"
    )
    if result["different"]:
        lines.append(f"- differing (task/seed): {', '.join(result['different'])}")
    text = "\n".join(lines) + "\n"
    (RESULTS / f"{args.rerun}_same.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
