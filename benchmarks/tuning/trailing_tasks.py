"""Where scaletune's default trails Syne Tune's BOHB on LCBench, and why: a control on the
committed runs (no new runs).

At the end of the budget the default (LastValueTPE proposals; its rungs ranked values then, as
VALUE_RANKED does, not forecasts) trails Syne Tune's BOHB by a
fraction of a point, within noise. If that gap were BOHB's better model across the board,
it would be spread over the tasks; if it is the default's model narrowing onto a poor
region on some tasks, it sits on the tasks where the default also trails random proposals
(the same scheduler without a model). Choosing those tasks and measuring on the same seeds
would find them by their noise, so the tasks are chosen on one half of the seeds and
measured on the other half, both ways round.

    .bench-venv/bin/python -m benchmarks.tuning.trailing_tasks   # reads tuning_lcbench_all_pooled

Writes benchmarks/results/tuning_lcbench_trailing.{json,md}.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import numpy as np

from benchmarks._report import RESULTS, write
from benchmarks.tuning._lcbench_results import RANDOM_PROPOSALS, VALUE_RANKED, at, load_runs

PEER = "Syne Tune BOHB"
FRACTIONS = (0.5, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", default="tuning_lcbench_all_pooled", help="a results file")
    parser.add_argument(
        "--margin",
        type=float,
        default=1.0,
        help="a task trails random proposals when the default's mean accuracy there is this "
        "many points below theirs",
    )
    args = parser.parse_args()
    if args.margin <= 0:
        parser.error(f"--margin {args.margin}: must be above 0")
    if not (RESULTS / f"{args.runs}.json").exists():
        parser.error(f"--runs {args.runs}: no benchmarks/results/{args.runs}.json")
    runs = load_runs(args.runs)
    by = {(run["method"], run["task"], run["seed"]): run for run in runs}
    tasks = list(dict.fromkeys(run["task"] for run in runs))
    seeds = sorted({run["seed"] for run in runs})
    halves = (seeds[: len(seeds) // 2], seeds[len(seeds) // 2 :])

    def ahead(method: str, task: str, on: list[int], fraction: float) -> float:
        """How many points of accuracy `method` is ahead of the default on `task`."""
        return statistics.fmean(
            at(by[(method, task, s)], fraction) - at(by[(VALUE_RANKED, task, s)], fraction)
            for s in on
        )

    result: dict[str, Any] = {"runs": args.runs, "margin": args.margin, "fractions": {}}
    for fraction in FRACTIONS:
        everywhere = [
            (ahead(RANDOM_PROPOSALS, t, seeds, fraction), ahead(PEER, t, seeds, fraction))
            for t in tasks
        ]
        splits = []
        for chosen_on, measured_on in (halves, halves[::-1]):
            trailing = [
                t for t in tasks if ahead(RANDOM_PROPOSALS, t, chosen_on, fraction) > args.margin
            ]
            groups = {}
            for label, group in (
                ("trailing", trailing),
                ("rest", [t for t in tasks if t not in trailing]),
            ):
                groups[label] = {
                    "tasks": group,
                    "random_ahead": statistics.fmean(
                        ahead(RANDOM_PROPOSALS, t, measured_on, fraction) for t in group
                    ),
                    "peer_ahead": statistics.fmean(
                        ahead(PEER, t, measured_on, fraction) for t in group
                    ),
                    # its share of the peer's lead over all tasks (the shares add up to it)
                    "peer_share": sum(ahead(PEER, t, measured_on, fraction) for t in group)
                    / len(tasks),
                }
            splits.append({"chosen_on": chosen_on, "measured_on": measured_on, **groups})
        result["fractions"][str(fraction)] = {
            "correlation": float(np.corrcoef(np.array(everywhere).T)[0, 1]),
            "splits": splits,
        }
    write(
        "tuning_lcbench_trailing",
        f"Where the default trails {PEER} on LCBench: the tasks where its model misleads it",
        result,
        _table(result),
        _notes(result, len(tasks), seeds),
        environment=".bench-venv",
    )


def _table(result: dict[str, Any]) -> list[list[str]]:
    header = ["at", "chosen on seeds", "group", "tasks", "random proposals ahead"]
    rows = [[*header, f"{PEER} ahead", f"share of {PEER}'s lead"]]
    for fraction, entry in result["fractions"].items():
        for split in entry["splits"]:
            chosen = f"{split['chosen_on'][0]}..{split['chosen_on'][-1]}"
            for label in ("trailing", "rest"):
                group = split[label]
                rows.append(
                    [
                        f"{int(float(fraction) * 100)} %",
                        chosen,
                        label,
                        str(len(group["tasks"])),
                        f"{group['random_ahead']:+.2f}",
                        f"{group['peer_ahead']:+.2f}",
                        f"{group['peer_share']:+.2f}",
                    ]
                )
    return rows


def _notes(result: dict[str, Any], task_count: int, seeds: list[int]) -> str:
    fractions = result["fractions"].items()
    correlations = "; ".join(
        f"{int(float(f) * 100)} %: {e['correlation']:.2f}" for f, e in fractions
    )
    trailing = "; ".join(
        f"{int(float(f) * 100)} %: "
        + " / ".join(", ".join(s["trailing"]["tasks"]) or "none" for s in e["splits"])
        for f, e in fractions
    )
    return (
        f"On the committed runs of `{result['runs']}.json`: {task_count} tasks × {len(seeds)} "
        f"seeds. Accuracy points by which {PEER} and random proposals ({RANDOM_PROPOSALS}: the "
        f"default's scheduler without a model) are ahead of the default ({VALUE_RANKED}); above "
        "zero, the default trails. A task is *trailing* when random proposals are ahead of the "
        f"default there by more than {result['margin']:g} (accuracy, % points) on the seeds it "
        "is chosen on; every figure is measured on the other seeds. Share: the group's part of "
        f"the peer's lead over all {task_count} tasks (the two shares add up to it).\n\n"
        "Over all seeds, the correlation across tasks of the two leads (random proposals' and "
        f"{PEER}'s over the default): {correlations}.\n\n"
        f"Trailing tasks, chosen on each half: {trailing}."
    )


if __name__ == "__main__":
    main()
