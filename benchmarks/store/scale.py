"""How the CLI's start and the store's reads grow with the size of a tuning job.

1. CLI start: `scaletune --help`, `jobs list` and `tuning show ID` against `python -c pass`,
   median of 10 runs each, alternated so that machine noise falls on all of them.
2. For simulated Hyperband tuning jobs of 1,000 / 10,000 / 100,000 trials, written as a user
   writes one (two ranges, curves of 100 steps, nothing pinned but the sizes;
   `benchmarks/scale/_user_job.py`), on SQLite and PostgreSQL:
   - simulation time per trial (the real tuning loop and store writes, no training);
   - `tuning show ID`, `tuning analytics ID --csv F`, `jobs list --tuning-job ID`, and
     `report ID` as commands (wall time including Python's start; peak RSS of the process),
     on both stores side by side, the stores' order alternating from one repeat to the next;
   - one trial's metric curve (`Store.metrics`, in process: the read a console makes), each
     beside a bare `SELECT 1` on the same pool (the floor any read pays on that store);
   - the console's trials table at its middle page, best first (in process), beside the same
     page read by sorting whole rows (the read before it sorted the keys alone).
PostgreSQL runs on a throw-away local server (scripts/test-postgres.sh), synchronous_commit
off: the same class of durability as SQLite's WAL with synchronous=NORMAL.

    python -m benchmarks.store.scale                      # 1k, 10k, 100k; both stores
    python -m benchmarks.store.scale --sizes 10000 --stores sqlite --name store_scale_quiet
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._report import summary, write
from benchmarks.scale._user_job import METRIC, UserCurves, user_spec
from scaletune.simulation import simulate_tuning
from scaletune.store import Store

ROOT = Path(__file__).resolve().parents[2]
TARGETS = {  # issue 15's targets at 10,000 trials on SQLite, in seconds
    "tuning show": 0.5,
    "tuning analytics --csv": 2.0,
    "one trial's curve": 0.05,
    "report": 10.0,
}

CURVE_READ = "one trial's curve"
ROUND_TRIP = "a bare round trip, SELECT 1 (control)"
CURVE_SAMPLES = 400
PAGE = 50  # the console's trials per page
PAGE_READ = "trials page (middle, best first)"
PAGE_CONTROL = "the same page, whole rows sorted (control)"

# `python -m scaletune ARGS` that prints its own peak RSS (VmHWM, KiB) on stderr as it exits:
# the kernel's rusage of a child also counts the parent it was forked from.
PEAK = (
    "import atexit, runpy, sys\n"
    "def peak():\n"
    "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
    "    print('PEAK', hwm.split()[1], file=sys.stderr)\n"
    "atexit.register(peak)\n"
    "sys.argv = ['scaletune', *sys.argv[1:]]\n"
    "runpy.run_module('scaletune', run_name='__main__', alter_sys=True)\n"
)


def _run(command: Sequence[str], store_url: str) -> tuple[float, float | None]:
    """Wall seconds and peak RSS (MiB, where the command reports it) of one command, which
    must succeed."""
    environment = {**os.environ, "SCALETUNE_STORE": store_url}
    # As installed: Python caches compiled modules by default (pip compiles them at install;
    # an editable install writes them at first run). Some sandboxes turn that off globally,
    # which would recompile every scaletune module at each command.
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.perf_counter()
    result = subprocess.run(
        command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    seconds = time.perf_counter() - started
    error = result.stderr.decode()
    if result.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed: {error.strip()[-500:]}")
    peaks = [line.split()[1] for line in error.splitlines() if line.startswith("PEAK ")]
    return seconds, int(peaks[-1]) / 1024 if peaks else None


def _scaletune(*args: str) -> list[str]:
    return [sys.executable, "-c", PEAK, *args]


def cli_start(store_url: str, tuning_id: str, repeats: int) -> dict[str, Any]:
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "scaletune --help": _scaletune("--help"),
        "scaletune jobs list": _scaletune("jobs", "list"),
        "scaletune tuning show ID": _scaletune("tuning", "show", tuning_id),
    }
    for command in commands.values():  # a first run writes the bytecode caches
        _run(command, store_url)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):  # alternated: noise falls on every command alike
        for name, command in commands.items():
            samples[name].append(_run(command, store_url)[0])
    return {name: summary(values) for name, values in samples.items()}


def _store_url(kind: str, folder: Path, size: int, postgres: str | None) -> str:
    if kind == "sqlite":
        return f"sqlite:///{folder / f'scale-{size}.db'}"
    assert postgres is not None
    from sqlalchemy import create_engine, text

    database = f"scale_{size}"
    engine = create_engine(
        postgres.replace("postgresql://", "postgresql+psycopg://", 1),
        isolation_level="AUTOCOMMIT",
    )
    with engine.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {database}"))
        conn.execute(text(f"CREATE DATABASE {database}"))
    engine.dispose()
    return postgres.rsplit("/", 1)[0] + f"/{database}"


def one_size(size: int, urls: dict[str, str], folder: Path, repeats: int) -> list[dict[str, Any]]:
    """Each store's tuning job of `size` trials, simulated; then the read commands on both
    stores side by side (each repeat runs every command on each store, the stores' order
    alternating), so that the machine's moods fall on both alike; then the reads in process."""
    built = {kind: _simulated(kind, size, url) for kind, url in urls.items()}
    commands = {
        kind: {
            "tuning show": _scaletune("tuning", "show", tuning_id),
            "tuning analytics --csv": _scaletune(
                "tuning", "analytics", tuning_id, "--csv", str(folder / f"{kind}-{size}.csv")
            ),
            "jobs list --tuning-job": _scaletune("jobs", "list", "--tuning-job", tuning_id),
            "report": _scaletune("report", tuning_id, "--out", str(folder / f"{kind}-{size}")),
        }
        for kind, (tuning_id, _) in built.items()
    }
    runs: dict[tuple[str, str], list[tuple[float, float | None]]] = {}
    for repeat in range(repeats):
        kinds = list(urls) if repeat % 2 == 0 else list(reversed(urls))
        for kind in kinds:
            for name, command in commands[kind].items():
                if name != "report" or repeat == 0:  # a report is one long run
                    runs.setdefault((kind, name), []).append(_run(command, urls[kind]))
    results = []
    for kind, (tuning_id, result) in built.items():
        url = urls[kind]
        in_process = _in_process(url, tuning_id, folder / f"{kind}-{size}-in-process", repeats)
        reads: dict[str, Any] = {}
        for name in commands[kind]:
            measured = runs[(kind, name)]
            reads[name] = {
                "seconds": summary([seconds for seconds, _ in measured]),
                "in_process_seconds": in_process[name],
                "peak_rss_mib": max(rss or 0.0 for _, rss in measured),
            }
            print(
                f"  {kind} {name}: {reads[name]['seconds']['median']:.2f} s",
                file=sys.stderr,
                flush=True,
            )
        pages = _middle_page(url, tuning_id, size, repeats)
        for name, seconds in (_curves(url, tuning_id) | pages).items():
            reads[name] = {"seconds": seconds, "in_process_seconds": seconds, "peak_rss_mib": None}
        results.append(result | {"reads": reads})
    return results


def _simulated(kind: str, size: int, url: str) -> tuple[str, dict[str, Any]]:
    """A simulated tuning job of `size` trials in the store at `url`: its id, and what its
    simulation cost."""
    with Store(url) as store:
        started = time.perf_counter()
        record = simulate_tuning(user_spec(size), UserCurves(), store, start_time=1e9)
        simulated = time.perf_counter() - started
        points = sum(len(curve) for curve in store.trials.curves(record.id, METRIC).values())
    print(f"{kind} {size}: simulated in {simulated:.1f} s", file=sys.stderr, flush=True)
    return record.id, {
        "store": kind,
        "trials": size,
        "metric_points": points,
        "simulation_seconds": simulated,
        "simulation_ms_per_trial": 1000 * simulated / size,
    }


def _curves(url: str, tuning_id: str, samples: int = CURVE_SAMPLES) -> dict[str, Any]:
    """One trial's metric curve, as the console reads it, each read followed by a bare round
    trip on the same pool (the control: what any read costs on this store before its work).
    Measured after the commands above have read every point, as a console user browses a
    job: right after a bulk write, PostgreSQL's first reads also set tuples' hint bits and
    share the machine with its autovacuum."""
    from sqlalchemy import text

    times: dict[str, list[float]] = {CURVE_READ: [], ROUND_TRIP: []}
    with Store(url) as store:
        job_ids = [row.id for row in store.trials.rows(tuning_id)]
        for job_id in random.Random(0).choices(job_ids, k=samples):
            began = time.perf_counter()
            store.metrics(job_id, METRIC)
            times[CURVE_READ].append(time.perf_counter() - began)
            began = time.perf_counter()
            with store._autocommit.connect() as conn:
                conn.execute(text("SELECT 1")).scalar_one()
            times[ROUND_TRIP].append(time.perf_counter() - began)
    return {name: summary(values) for name, values in times.items()}


def _middle_page(url: str, tuning_id: str, size: int, repeats: int) -> dict[str, Any]:
    """The console's trials table at its middle page, best first: the store's read (the page's
    keys sorted alone, then its rows) beside the same page sorted as whole rows, alternated."""
    from sqlalchemy import select

    from scaletune.store import TrialOrder, TrialSortKey
    from scaletune.store._queries import _ROW_COLUMNS
    from scaletune.store._schema import training_jobs

    order = TrialOrder(TrialSortKey.OBJECTIVE, descending=True)
    offset = size // 2
    whole_rows = (
        select(*_ROW_COLUMNS)
        .where(training_jobs.c.tuning_job_id == tuning_id)
        .order_by(*order.clauses())
        .offset(offset)
        .limit(PAGE)
    )
    samples: dict[str, list[float]] = {PAGE_READ: [], PAGE_CONTROL: []}
    with Store(url) as store:
        page = [
            row.id for row in store.trials.rows(tuning_id, limit=PAGE, offset=offset, order=order)
        ]
        with store._autocommit.connect() as conn:  # the control reads the same page
            assert [row.id for row in conn.execute(whole_rows)] == page
        for _ in range(repeats):
            began = time.perf_counter()
            store.trials.rows(tuning_id, limit=PAGE, offset=offset, order=order)
            samples[PAGE_READ].append(time.perf_counter() - began)
            began = time.perf_counter()
            with store._autocommit.connect() as conn:
                list(conn.execute(whole_rows))
            samples[PAGE_CONTROL].append(time.perf_counter() - began)
    return {name: summary(values) for name, values in samples.items()}


def _in_process(url: str, tuning_id: str, out: Path, repeats: int) -> dict[str, Any]:
    """The same reads as functions, in this process: the read without Python's start."""
    from scaletune.analysis import analytics_dataframe, summarize
    from scaletune.experiment import stored_tuning_report

    store = Store(url)

    def report() -> None:  # as the command builds it
        stored_tuning_report(store, tuning_id).write(out)

    reads = {
        "tuning show": lambda: summarize(store, tuning_id),
        "tuning analytics --csv": lambda: analytics_dataframe(store, tuning_id).to_csv(
            out.with_suffix(".csv"), index=False
        ),
        "jobs list --tuning-job": lambda: store.list_training_jobs(
            tuning_job_id=tuning_id, limit=20
        ),
        "report": report,
    }
    times: dict[str, Any] = {}
    with store:
        for name, read in reads.items():
            samples = []
            for _ in range(1 if name == "report" else repeats):
                started = time.perf_counter()
                read()
                samples.append(time.perf_counter() - started)
            times[name] = summary(samples)
    return times


def _postgres_server() -> tuple[str, str]:
    environment = {**os.environ, "SCALETUNE_PG_SETTINGS": "-c synchronous_commit=off"}
    output = subprocess.run(
        [str(ROOT / "scripts" / "test-postgres.sh"), "start"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    values = dict(
        line.removeprefix("export ").split("=", 1) for line in output.splitlines() if "=" in line
    )
    return values["SCALETUNE_TEST_POSTGRES_URL"], values["_PGDIR"]


def _table(cli: dict[str, Any], sizes: list[dict[str, Any]]) -> list[list[str]]:
    base = cli["python -c pass"]["median"]
    rows = [["measure", "store", "trials", "command s", "in process s", "peak RSS MiB", "target"]]
    for name, stats in cli.items():
        rows.append(
            [
                f"start: {name}",
                "sqlite",
                "",
                f"{stats['median']:.3f} ({stats['median'] / base:.0f}× python -c pass)",
                "",
                "",
                "",
            ]
        )
    for result in sizes:
        rows.append(
            [
                "simulation per trial",
                result["store"],
                f"{result['trials']:,}",
                "",
                f"{result['simulation_ms_per_trial'] / 1000:.4f}",
                "",
                "≤ 0.005",
            ]
        )
        for name, read in result["reads"].items():
            target = TARGETS.get(name)
            rss = read["peak_rss_mib"]
            rows.append(
                [
                    name,
                    result["store"],
                    f"{result['trials']:,}",
                    "" if rss is None else f"{read['seconds']['median']:.3f}",
                    _seconds(read["in_process_seconds"]["median"]),
                    "" if rss is None else f"{rss:.0f}",
                    "" if target is None or result["trials"] != 10_000 else f"≤ {target:g}",
                ]
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each read command")
    parser.add_argument("--start-repeats", type=int, default=10)
    parser.add_argument(
        "--name", default="store_scale", help="results/NAME.md and .json (another run beside)"
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    stores = args.stores.split(",")
    postgres, server = _postgres_server() if "postgresql" in stores else (None, None)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            results = []
            cli: dict[str, Any] = {}
            for size in sizes:
                urls = {kind: _store_url(kind, folder, size, postgres) for kind in stores}
                results.extend(one_size(size, urls, folder, args.repeats))
                if "sqlite" in urls and size == min(sizes):
                    with Store(urls["sqlite"]) as store:
                        tuning_id = store.list_tuning_jobs(limit=1)[0].id
                    cli = cli_start(urls["sqlite"], tuning_id, args.start_repeats)
    finally:
        if server is not None:
            subprocess.run(
                [str(ROOT / "scripts" / "test-postgres.sh"), "stop", server], check=False
            )
    results.sort(key=lambda result: (stores.index(result["store"]), result["trials"]))
    ratios = _ratios(results)
    write(
        args.name,
        "Store reads and CLI start at 1,000 to 100,000 trials",
        {"cli_start_seconds": cli, "sizes": results, "postgres_over_sqlite": ratios},
        _table(cli, results),
        _notes(results, ratios),
    )


def _seconds(value: float) -> str:
    return f"{value:.4f}" if value < 0.1 else f"{value:.3f}"


def _ratios(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """PostgreSQL's median over SQLite's, per read and size."""
    by = {(r["store"], r["trials"]): r for r in results}
    ratios: dict[str, dict[str, float]] = {}
    for (kind, trials), result in by.items():
        lite = by.get(("sqlite", trials))
        if kind != "postgresql" or lite is None:
            continue
        ratios[str(trials)] = {
            name: read["seconds"]["median"] / lite["reads"][name]["seconds"]["median"]
            for name, read in result["reads"].items()
        } | {"simulation": result["simulation_seconds"] / lite["simulation_seconds"]}
    return ratios


def _notes(results: list[dict[str, Any]], ratios: dict[str, dict[str, float]]) -> str:
    lines = [
        "Reads run as commands, so their times include Python's start and imports "
        "(`python -c pass` and `scaletune --help` above show that floor); `one trial's curve` "
        "is the store read alone, in process. The report folder holds every trial in "
        "analytics.csv; its trials picture draws up to 2,000 curves (past that, the best 200 "
        "and others evenly spaced).",
    ]
    for trials, values in sorted(ratios.items(), key=lambda item: int(item[0])):
        worst = max(values.items(), key=lambda item: item[1])
        lines.append(
            f"PostgreSQL over SQLite at {int(trials):,} trials: "
            + ", ".join(f"{name} {ratio:.2f}×" for name, ratio in values.items())
            + f" (largest: {worst[0]})."
        )
    by = {(r["store"], r["trials"]): r["reads"] for r in results}
    for size in sorted(int(t) for t in ratios):
        extra = {
            kind: 1000
            * (
                by[(kind, size)][CURVE_READ]["seconds"]["median"]
                - by[(kind, size)][ROUND_TRIP]["seconds"]["median"]
            )
            for kind in ("sqlite", "postgresql")
        }
        floor = {
            kind: 1000 * by[(kind, size)][ROUND_TRIP]["seconds"]["median"]
            for kind in ("sqlite", "postgresql")
        }
        lines.append(
            f"One trial's curve at {size:,} trials, beyond a bare round trip: SQLite "
            f"{extra['sqlite']:.3f} ms, PostgreSQL {extra['postgresql']:.3f} ms; the round trip "
            f"itself {floor['sqlite']:.3f} ms and {floor['postgresql']:.3f} ms."
        )
    ten = [r for r in results if r["trials"] == 10_000 and r["store"] == "sqlite"]
    if ten:
        missed = [
            f"{name} {ten[0]['reads'][name]['seconds']['median']:.2f} s > {target:g} s"
            for name, target in TARGETS.items()
            if ten[0]["reads"][name]["seconds"]["median"] > target
        ]
        lines.append(
            "Targets at 10,000 trials on SQLite: "
            + ("all met." if not missed else "not met: " + "; ".join(missed) + ".")
        )
    return "\n\n".join(lines)


if __name__ == "__main__":
    main()
