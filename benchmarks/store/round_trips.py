"""Round trips to PostgreSQL per simulated trial, and what they cost: the store as it is
(reads and single-statement writes in autocommit, a connection pinged only after sitting idle)
against the store at an earlier revision (`--before`: SQLAlchemy's ping at every checkout,
every read inside BEGIN ... ROLLBACK, every write inside BEGIN ... COMMIT).

Each run is a process of its own, the earlier revision's from a git worktree of it. Round
trips are counted exactly: libpq's trace of every connection the store opens, one round trip
per simple query (BEGIN, COMMIT, ROLLBACK, a ping's SELECT 1) or per extended query's Sync.
Times are the seconds per trial of a simulated Hyperband tuning job
(`benchmarks/scale/_synthetic.py`), the two revisions alternating, each run on a database of
its own on a throw-away local server; SQLite's time per trial (both revisions) runs beside
them for the ratio the issue sets (PostgreSQL within twice SQLite's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._report import summary, write
from benchmarks.store.scale import ROOT, _postgres_server, _store_url

BEFORE = "a382a8d"  # the last revision with a ping at every checkout and transactional reads


def child(url: str, trials: int, trace: str | None) -> None:
    """One simulated tuning job on `url`; prints seconds per trial and round trips."""
    from sqlalchemy import event

    from benchmarks.scale._synthetic import SyntheticCurves, spec
    from scaletune.simulation import simulate_tuning
    from scaletune.store import Store

    store = Store(url)
    files: list[Any] = []
    if trace is not None:

        def on_connect(dbapi_connection: Any, _record: Any) -> None:
            handle = (Path(trace) / f"connection-{len(files)}.trace").open("w")
            files.append(handle)
            dbapi_connection.pgconn.trace(handle.fileno())
            dbapi_connection.pgconn.set_trace_flags(0)

        store._engine.pool.dispose()  # opening the store's schema is not counted
        event.listen(store._engine, "connect", on_connect)
    with store:
        started = time.perf_counter()
        simulate_tuning(spec(trials), SyntheticCurves(), store, start_time=1e9)
        seconds = (time.perf_counter() - started) / trials
    for handle in files:
        handle.close()
    trips = None if trace is None else _round_trips(Path(trace)) / trials
    print(json.dumps({"seconds_per_trial": seconds, "round_trips_per_trial": trips}))


def _round_trips(trace: Path) -> int:
    """Messages the client sent that wait for an answer: Query, or Sync after Parse/Bind."""
    count = 0
    for path in trace.glob("*.trace"):
        for line in path.read_text().splitlines():
            fields = line.split("\t")
            if len(fields) > 3 and fields[1] == "F" and fields[3] in ("Query", "Sync"):
                count += 1
    return count


def _run(source: Path, url: str, trials: int, trace: Path | None = None) -> dict[str, Any]:
    """A child process whose scaletune is the one under `source`."""
    environment = {**os.environ, "PYTHONPATH": f"{source / 'src'}{os.pathsep}{ROOT}"}
    command = [sys.executable, "-m", "benchmarks.store.round_trips", "--child", url, str(trials)]
    if trace is not None:
        trace.mkdir()
        command.append(str(trace))
    done = subprocess.run(
        command, env=environment, cwd=ROOT, capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=1000, help="trials per timed run")
    parser.add_argument("--counted", type=int, default=200, help="trials per traced run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", default=BEFORE, help="the earlier revision")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, trials, *trace = args.child
        child(url, int(trials), trace[0] if trace else None)
        return
    before = subprocess.run(
        ["git", "rev-parse", "--short", args.before],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    labels = {
        f"before ({before}): a ping at every checkout, every call in a transaction": "before",
        "now: reads and single statements in autocommit, a ping after 5 s idle": "now",
    }
    postgres, pg_dir = _postgres_server()
    results: dict[str, Any] = {"before": before, "trials": args.trials, "counted": args.counted}
    sqlite_labels = {f"before ({before})": "before", "now": "now"}
    seconds: dict[str, list[float]] = {label: [] for label in (*labels, *sqlite_labels)}
    trips: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        worktree = folder / "before"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(worktree), before],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        sources = {"before": worktree, "now": ROOT}
        try:
            for index, (label, which) in enumerate(labels.items()):
                url = _store_url("postgresql", folder, index, postgres)
                counted = _run(sources[which], url, args.counted, folder / f"trace-{index}")
                trips[label] = counted["round_trips_per_trial"]
            for repeat in range(args.repeats):
                for index, (label, which) in enumerate(labels.items()):
                    url = _store_url("postgresql", folder, 10 + 2 * repeat + index, postgres)
                    seconds[label].append(
                        _run(sources[which], url, args.trials)["seconds_per_trial"]
                    )
                for index, (label, which) in enumerate(sqlite_labels.items()):
                    sqlite = _store_url("sqlite", folder, 100 + 2 * repeat + index, None)
                    run = _run(sources[which], sqlite, args.trials)
                    seconds[label].append(run["seconds_per_trial"])
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT)
            subprocess.run([str(ROOT / "scripts" / "test-postgres.sh"), "stop", pg_dir])
    stats = {label: summary(values) for label, values in seconds.items()}
    results.update(round_trips_per_trial=trips, seconds_per_trial=seconds, stats=stats)
    rows = [["store", "round trips per trial", "ms per trial: median (min–max)", "× SQLite now"]]
    sqlite_median = stats["now"]["median"]
    for label in (*labels, *sqlite_labels):
        s = stats[label]
        rows.append(
            [
                f"SQLite, {label}" if label in sqlite_labels else f"PostgreSQL, {label}",
                f"{trips[label]:.1f}" if label in trips else "",
                f"{1000 * s['median']:.2f} ({1000 * s['min']:.2f}–{1000 * s['max']:.2f})",
                f"{s['median'] / sqlite_median:.2f}",
            ]
        )
    write(
        "store_round_trips",
        "PostgreSQL round trips per simulated trial, before and now",
        results,
        rows,
        f"""
Round trips: libpq's trace of a simulated Hyperband job of {args.counted} trials (every
connection the store opened, after opening it), one per Query or Sync the client sent,
divided by the trials. Times: {args.repeats} simulated jobs of {args.trials} trials per
revision, alternating, each a process of its own on a new database of a local server
(`synchronous_commit=off`, as in store_scale), and SQLite beside them (both revisions).
A simulated trial is a handful of store calls (create, start, its reports with its
outcome, the tuner's read of its result and the result written back); on a server each
costs its round trips: tens of microseconds each on a local socket, far more across a
network.
""",
    )


if __name__ == "__main__":
    main()
