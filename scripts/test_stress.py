"""`make test-stress`: the tests most likely to fail by chance, run round after round with a
CPU hog on one core beside them; every failure counted, by test, in a Markdown table.

The tests are those listed in tests/stress.txt (the ones that failed in a CI run, and the
slowest, which wait longest on processes and clocks). A round is one pytest run of them all;
the tests marked serial run alone, the others on the suite's parallel workers, as `make unit`
runs them.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from test_timings import read_junit  # this folder: the JUnit reader of make test-timings

ROOT = Path(__file__).resolve().parents[1]


def listed(path: Path) -> list[str]:
    """Node ids, one a line; `#` starts a comment."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def cpu_hog() -> Iterator[None]:
    """One process that keeps one core busy, as another program on the machine would."""
    hog = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
    hog.start()
    try:
        yield
    finally:
        hog.terminate()
        hog.join()


def outcomes(junit: Path) -> dict[str, str]:
    """Each test's outcome in one round's JUnit XML, by node id (an error counts as failed)."""
    return {
        f"{test.path}::{test.name}": "failed" if test.outcome == "error" else test.outcome
        for test in read_junit(junit)
    }


def one_round(tests: list[str], workers: int, folder: Path, number: int) -> dict[str, str]:
    results: dict[str, str] = {}
    for phase, extra in (("serial", []), ("parallel", ["-n", str(workers), "--dist", "loadfile"])):
        junit = folder / f"round-{number}-{phase}.xml"
        marker = "serial" if phase == "serial" else "not serial"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker]
        command += [*extra, f"--junitxml={junit}", "--durations=0", *tests]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode not in (0, 1, 5):  # 5: no test of this phase in the list
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
            raise SystemExit(f"round {number}, {phase}: pytest exited {done.returncode}")
        if junit.exists():
            results.update(outcomes(junit))
        if done.returncode == 1:
            (folder / f"round-{number}-{phase}.log").write_text(done.stdout + done.stderr)
    return results


def render(tests: list[str], rounds: list[dict[str, str]], seconds: float, command: str) -> str:
    failed: Counter[str] = Counter()
    ran: Counter[str] = Counter()
    for results in rounds:
        for test, outcome in results.items():
            ran[test] += outcome != "skipped"
            failed[test] += outcome == "failed"
    lines = [
        "# Tests run round after round beside a CPU hog",
        "",
        f"Command: `{command}`; {len(rounds)} rounds of {len(tests)} entries (node ids), one "
        "core kept busy by another process throughout.",
        f"Machine: {os.cpu_count()} cores, {platform.platform()}; "
        f"{datetime.date.today().isoformat()}; {seconds / 60:.1f} minutes in all.",
        "",
        f"**{sum(failed.values())} failures** in {sum(ran.values())} test runs.",
        "",
        "| test | runs | failures |",
        "|---|---:|---:|",
    ]
    for test in sorted(ran, key=lambda t: (-failed[t], t)):
        lines.append(f"| `{test}` | {ran[test]} | {failed[test]} |")
    if sum(failed.values()):  # the folder is a temp one of this machine's: named on stderr
        lines += ["", "Each failing round's output was kept in a temp folder (named on stderr)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--list", type=Path, default=ROOT / "tests" / "stress.txt")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks/results/test_stress.md")
    parser.add_argument("tests", nargs="*", help="node ids instead of the list's")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, not {args.rounds}")
    tests = args.tests or listed(args.list)
    folder = Path(tempfile.mkdtemp(prefix="scaletune-stress-"))
    rounds: list[dict[str, str]] = []
    start = time.monotonic()
    if args.tests:  # a command of its own: say it as it was given
        command = " ".join(["python scripts/test_stress.py", *(argv or sys.argv[1:])])
    else:
        command = "make test-stress" + (f" ROUNDS={args.rounds}" if args.rounds != 20 else "")
    text = ""
    with cpu_hog():
        for number in range(1, args.rounds + 1):
            results = one_round(tests, args.workers, folder, number)
            rounds.append(results)
            bad = sorted(test for test, outcome in results.items() if outcome == "failed")
            print(f"round {number}: {len(results)} tests, {len(bad)} failed {bad}", flush=True)
            # Written after every round: a run cut short still leaves what it found.
            text = render(tests, rounds, time.monotonic() - start, command)
            args.output.write_text(text)
    print(f"wrote {args.output}; rounds' output in {folder}", file=sys.stderr)
    return 1 if "**0 failures**" not in text else 0


if __name__ == "__main__":
    sys.exit(main())
