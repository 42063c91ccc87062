"""Where the test suite's time goes: `.ci/run`'s steps, each test folder's total and the 30
slowest tests, as one Markdown table (`make test-timings` runs it after a timed `.ci/run`).

Inputs: the steps file `.ci/run` appends to (name, seconds, exit code per line) and the JUnit
XML files each pytest phase wrote (`--junitxml`; a test's time there is its set-up, call and
tear-down together, so a module-wide fixture's start counts in its first test).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class TestTime:
    phase: str  # the JUnit file's stem: which pytest run it was
    path: str  # tests/cluster/test_ray_multinode.py
    name: str
    seconds: float
    outcome: str  # passed, failed, error or skipped

    @property
    def folder(self) -> str:
        return str(Path(self.path).parent)


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    seconds: float
    exit_code: int


def read_steps(path: Path) -> list[Step]:
    steps = []
    for line in path.read_text().splitlines():
        name, seconds, code = line.split("\t")
        steps.append(Step(name, float(seconds), int(code)))
    return steps


def read_junit(path: Path) -> list[TestTime]:
    times = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "")
        # classname is the module's dotted path, then the class if the test is a method
        parts = module.split(".")
        while parts and not Path(*parts).with_suffix(".py").exists() and len(parts) > 1:
            parts = parts[:-1]
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = "failed" if tag == "failure" else tag
        times.append(
            TestTime(
                phase=path.stem,
                path=str(Path(*parts).with_suffix(".py")),
                name=case.get("name", ""),
                seconds=float(case.get("time", "0")),
                outcome=outcome,
            )
        )
    return times


def render(
    steps: list[Step], tests: list[TestTime], *, command: str, commit: str, total: float | None
) -> str:
    lines = [
        "# Where the test suite's time goes",
        "",
        f"Command: `{command}` (a clean clone of `{commit}`, `.ci/run` timed step by step, each "
        "pytest phase writing JUnit XML).",
        f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python "
        f"{platform.python_version()}; {datetime.date.today().isoformat()}.",
        "",
        "## `.ci/run`, step by step",
        "",
        "| step | seconds | exit |",
        "|---|---:|---:|",
    ]
    lines += [f"| {s.name} | {s.seconds:.1f} | {s.exit_code} |" for s in steps]
    summed = sum(s.seconds for s in steps)
    lines.append(f"| **all steps, summed** | **{summed:.1f}** | |")
    if total is not None:
        lines.append(f"| `.ci/run` as a whole, wall | {total:.1f} | |")
        if summed > total:
            lines += [
                "",
                "Some steps overlap (Chromium installs beside the steps after it, the YAHPO tests "
                "run beside the wheel check, the type-check beside the serial tests): their sum "
                "exceeds the wall time.",
            ]

    counts: dict[str, int] = defaultdict(int)
    for test in tests:
        counts[test.outcome] += 1
    lines += [
        "",
        "## The suite",
        "",
        "Outcomes: " + ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) + ".",
        "Seconds are each test's own (set-up, call, tear-down); under parallel workers they add "
        "up to more than the step's wall time.",
        "",
        "| phase | tests | seconds, summed |",
        "|---|---:|---:|",
    ]
    by_phase: dict[str, list[TestTime]] = defaultdict(list)
    for test in tests:
        by_phase[test.phase].append(test)
    for phase, members in sorted(by_phase.items()):
        lines.append(f"| {phase} | {len(members)} | {sum(t.seconds for t in members):.1f} |")

    lines += ["", "### Each test folder", "", "| folder | tests | seconds | share |"]
    lines.append("|---|---:|---:|---:|")
    folders: dict[str, list[TestTime]] = defaultdict(list)
    for test in tests:
        folders[f"{test.folder} ({test.phase})"].append(test)
    grand = sum(t.seconds for t in tests) or 1.0
    totals = {folder: sum(t.seconds for t in members) for folder, members in folders.items()}
    for folder, members in sorted(folders.items(), key=lambda item: -totals[item[0]]):
        seconds = totals[folder]
        lines.append(f"| {folder} | {len(members)} | {seconds:.1f} | {seconds / grand:.1%} |")

    lines += ["", "### The 30 slowest tests", "", "| seconds | test | phase | outcome |"]
    lines.append("|---:|---|---|---|")
    for test in sorted(tests, key=lambda t: -t.seconds)[:30]:
        where = f"`{test.path}::{test.name}`"
        lines.append(f"| {test.seconds:.1f} | {where} | {test.phase} | {test.outcome} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=Path, required=True)
    parser.add_argument("--junit", type=Path, required=True, help="a folder of JUnit XML files")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--command", default="make test-timings")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--total", type=float, default=None, help="`.ci/run`'s wall seconds")
    args = parser.parse_args(argv)
    steps = read_steps(args.steps) if args.steps.exists() else []
    tests = [t for path in sorted(args.junit.glob("*.xml")) for t in read_junit(path)]
    text = render(steps, tests, command=args.command, commit=args.commit, total=args.total)
    args.output.write_text(text)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
