"""Why a TensorFlow job stepped slower under scaletune (issue 18): the same by-hand job three
ways, which differ only in where each rank's process is started. In the launcher's session
(as `tf_overhead` starts it by hand); in a session of its own (as scaletune's script program
started scripts until 2026-12-01: `start_new_session`); in a process group of its own in the
launcher's session (as it starts them now: `process_group=0`). With the kernel's autogroup
scheduling (`/proc/sys/kernel/sched_autogroup_enabled`), every session is a scheduling group
of its own, and CFS shares the CPUs between groups before it shares them between threads.

    python -m benchmarks.tensorflow.sessions [--repeats 5] [--epochs 4] [--workers 2]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._report import ratio_interval, spread, summary, write
from benchmarks.tensorflow.overhead import by_hand, mirrored_job, per_step_seconds, write_shards

ARMS: dict[str, dict[str, Any]] = {
    "the launcher's session": {},
    "a session of its own (scaletune before)": {"start_new_session": True},
    "a process group of its own (scaletune now)": {"process_group": 0},
}
AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    spec, arguments = mirrored_job(args.workers, args.epochs)
    names = list(ARMS)
    steps: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as scratch:
        environments = write_shards(spec, Path(scratch) / "shards", args.workers)
        for repeat in range(args.repeats):
            for name in names[repeat % 3 :] + names[: repeat % 3]:  # each takes each place
                _, output = by_hand(arguments, environments, Path(scratch), **ARMS[name])
                steps[name].append(per_step_seconds(output))
            print(
                f"repeat {repeat + 1}: per step "
                + ", ".join(f"{name} {steps[name][-1] * 1000:.2f} ms" for name in names),
                flush=True,
            )
    baseline = steps[names[0]]
    ratios = {name: ratio_interval(baseline, steps[name]) for name in names[1:]}
    rows = [["each rank's process started in", "per step, ms: median (min–max)", "ratio"]]
    rows.append([names[0], spread(summary(baseline), 1000), "1"])
    for name in names[1:]:
        ratio = ratios[name]
        interval = f"{ratio['ratio']:.3f} [{ratio['low']:.3f}, {ratio['high']:.3f}]"
        rows.append([name, spread(summary(steps[name]), 1000), interval])
    autogroup = AUTOGROUP.read_text().strip() if AUTOGROUP.exists() else "unknown"
    write(
        "tf_sessions",
        "TensorFlow MultiWorkerMirroredStrategy by hand: each rank in which session",
        {
            "workers": args.workers,
            "epochs": args.epochs,
            "repeats": args.repeats,
            "sched_autogroup_enabled": autogroup,
            "per_step_seconds": steps,
            "ratios": ratios,
        },
        rows,
        f"""
The job of `tf_overhead` ({args.workers} workers on MNIST, {args.epochs} epochs), launched by
hand {args.repeats} times in each of three ways, in an order that rotates each round. Per
step: as in `tf_overhead` (rank 0, the median over the epochs after the first). Ratio: the
geometric mean over rounds of each way's per-step time over the same round's run in the
launcher's session, with a 95 % BCa bootstrap interval. `sched_autogroup_enabled` here:
{autogroup}.
""",
    )


if __name__ == "__main__":
    main()
