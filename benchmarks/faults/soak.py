"""Soak: the whole system on one PostgreSQL store for a long while, under faults. Four tuning
controllers (two of real 2-worker XGBoost trials on bank marketing, two of simulated trials,
each starting tuning job after tuning job), 20 CLI readers in a loop, 50 console clients
(each a live page's event stream and a page now and then), the PostgreSQL server restarted
every 5 minutes and a random worker process killed (SIGKILL) every 30 s. Loopback only.

    python -m benchmarks.faults.soak [--minutes 20] [--restart-every 300] [--kill-every 30]
        [--name soak]

At the end: every report stored once (each stored curve is its steps 1..N, each once, for
every trial of every tuning job), no trial failed by the faults, no process or database
connection left behind; the console's and the CLI's latencies (p50, p99). Writes
benchmarks/results/NAME.{md,json}. The controllers' own output goes to the run's folder,
kept when anything fails (its path is printed)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy import create_engine, text
from tests.console.browser import running_console
from tests.postgres import PostgresServer

from benchmarks.scale._user_job import UserCurves, user_spec
from scaletune.simulation import simulate_tuning
from scaletune.store import JobStatus, Store

RESULTS = Path(__file__).resolve().parents[1] / "results"
DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "bank-marketing"
RESTART_EVERY = 300.0
KILL_EVERY = 30.0
READERS = 20
CONSOLE_CLIENTS = 50
READS = (["jobs", "list"], ["tuning", "list"], ["jobs", "list", "--status", "InProgress"])

REAL_TUNING = """
objective_metric = "validation:auc"
objective_type = "Maximize"
strategy = "Hyperband"
max_jobs = 8
max_parallel_jobs = 2
seed = {seed}

[hyperband]
min_resource = 10
max_resource = 150
eta = 3

[ranges]
eta = {{ type = "Continuous", min_value = 0.05, max_value = 0.5 }}
max_depth = {{ type = "Integer", min_value = 2, max_value = 8 }}

[training]
algorithm = "xgboost"
instance_count = 2
hyperparameters = {{ num_round = 150, eval_metric = "auc", objective = "binary:logistic" }}
checkpoint = {{ every_steps = 10 }}
retry = {{ max_attempts = 50 }}

[training.channels.train]
dataset = "bank-marketing"
dataset_file = "{data}"

[training.channels.validation]
dataset = "bank-marketing"
dataset_file = "{data}"
"""


def _scaletune(*args: str, store: str, log: Path | None = None) -> subprocess.Popen[bytes]:
    output = subprocess.DEVNULL if log is None else log.open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "scaletune", *args, "--store", store],
        stdout=output,
        stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"},
    )


class _Threads:
    """A group of threads started and joined together."""

    threads: list[threading.Thread]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join()


class Controllers(_Threads):
    """The four tuning controllers, each starting its next tuning job as the last ends."""

    def __init__(self, url: str, folder: Path, until: float) -> None:
        self.url, self.folder, self.until = url, folder, until
        self.jobs_started = Counter[str]()
        self.exit_codes: list[tuple[str, int]] = []
        self.failures: list[dict[str, Any]] = []  # each non-zero exit, with its output's end
        self.threads = [
            threading.Thread(target=self._real, args=(i,), name=f"real-{i}") for i in range(2)
        ] + [
            threading.Thread(target=self._simulated, args=(i,), name=f"simulated-{i}")
            for i in range(2)
        ]

    def _real(self, index: int) -> None:
        seed = index * 1000
        while time.monotonic() < self.until:
            seed += 1
            spec = self.folder / f"real-{index}-{seed}.toml"
            spec.write_text(REAL_TUNING.format(seed=seed, data=DATA / "bank-additional-full.csv"))
            log = self.folder / f"real-{index}.log"
            process = _scaletune("tune", str(spec), "--json", store=self.url, log=log)
            self.jobs_started["real"] += 1
            self._ended(f"real-{index}", process.wait(), log)

    def _simulated(self, index: int) -> None:
        log = self.folder / f"simulated-{index}.log"
        with log.open("ab") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.faults.soak", "--simulated-controller", self.url,
                 "--until-epoch", str(time.time() + self.until - time.monotonic())],
                stdout=output,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
            code = process.wait()
        self._ended(f"simulated-{index}", code, log)

    def _ended(self, name: str, code: int, log: Path) -> None:
        self.exit_codes.append((name, code))
        if code != 0:
            tail = log.read_bytes()[-1500:].decode("utf-8", errors="replace")
            self.failures.append({"controller": name, "exit_code": code, "output_end": tail})


def simulated_controller(url: str, until_epoch: float) -> None:
    """Tuning job after tuning job of simulated trials (40 trials of 100 reports each),
    five seconds apart."""
    seed = os.getpid()
    with Store(url) as store:
        while time.time() < until_epoch:
            seed += 1
            spec = user_spec(40).model_copy(update={"seed": seed})
            record = simulate_tuning(spec, UserCurves(), store, start_time=time.time())
            print(record.id, record.status.value, flush=True)
            time.sleep(5.0)  # a steady load beside the real trials, not a flood


class Readers(_Threads):
    """20 CLI readers, each running a read command after another; their wall times."""

    def __init__(self, url: str, until: float) -> None:
        self.url, self.until = url, until
        self.seconds: list[float] = []
        self.exit_codes = Counter[int]()
        self.unexpected: list[str] = []
        self.threads = [threading.Thread(target=self._read, args=(i,)) for i in range(READERS)]

    def _read(self, index: int) -> None:
        pick = random.Random(index)
        while time.monotonic() < self.until:
            began = time.perf_counter()
            command = [sys.executable, "-m", "scaletune", *pick.choice(READS), "--store", self.url]
            done = subprocess.run(command, capture_output=True, text=True)
            self.seconds.append(time.perf_counter() - began)
            self.exit_codes[done.returncode] += 1
            if done.returncode not in (0, 3):  # what else went wrong, kept to look at
                self.unexpected.append(done.stderr.strip()[-500:])
            time.sleep(pick.uniform(2.0, 6.0))  # a person at a terminal, or a cron job


async def _page_loads(port: int, until: float, seconds: list[float], codes: Counter[int]) -> None:
    pages = ["/", "/tuning", "/jobs?status=InProgress"]
    pick = random.Random(port)
    while time.monotonic() < until:
        began = time.perf_counter()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                f"GET {pick.choice(pages)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            body = await reader.read()
            writer.close()
            codes[int(body.split(b" ", 2)[1]) if body else 0] += 1
        except OSError:
            codes[0] += 1
        seconds.append(time.perf_counter() - began)
        await asyncio.sleep(pick.uniform(2.0, 8.0))


async def _live_page(port: int, until: float, events: Counter[str]) -> None:
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            while time.monotonic() < until:
                try:
                    chunk = await asyncio.wait_for(reader.read(4096), 1.0)
                except TimeoutError:
                    continue
                if not chunk:
                    break
                for kind in (b"change", b"store-error", b"busy"):
                    events[kind.decode()] += chunk.count(b"event: " + kind)
            writer.close()
        except OSError:
            events["refused"] += 1
            await asyncio.sleep(2.0)


def console_clients(port: int, until: float) -> dict[str, Any]:
    seconds: list[float] = []
    codes: Counter[int] = Counter()
    events: Counter[str] = Counter()

    async def run() -> None:
        await asyncio.gather(
            *(_page_loads(port, until, seconds, codes) for _ in range(CONSOLE_CLIENTS)),
            *(_live_page(port, until, events) for _ in range(CONSOLE_CLIENTS)),
        )

    asyncio.run(run())
    return {"seconds": seconds, "codes": dict(codes), "events": dict(events)}


class Faults:
    """PostgreSQL restarted every 5 minutes; a random worker killed every 30 s."""

    def __init__(
        self,
        server: PostgresServer,
        until: float,
        restart_every: float = RESTART_EVERY,
        kill_every: float = KILL_EVERY,
        seed: int = 0,
    ) -> None:
        self.server, self.until = server, until
        self.restart_every, self.kill_every = restart_every, kill_every
        self.restarts = 0
        self.kills: list[int] = []
        self.random = random.Random(seed)
        self.thread = threading.Thread(target=self._run, name="faults")

    def _run(self) -> None:
        began = time.monotonic()
        next_restart, next_kill = began + self.restart_every, began + self.kill_every
        while time.monotonic() < self.until:
            time.sleep(1.0)
            now = time.monotonic()
            if now >= next_kill:
                next_kill += self.kill_every
                workers = _workers()
                if workers:
                    victim = self.random.choice(workers)
                    with contextlib.suppress(psutil.NoSuchProcess):
                        victim.send_signal(signal.SIGKILL)
                        self.kills.append(victim.pid)
            if now >= next_restart and now < self.until - 30:
                next_restart += self.restart_every
                self.server.stop()
                time.sleep(2.0)  # down a moment, as an operator's restart is
                self.server.start()
                self.restarts += 1


def _workers() -> list[psutil.Process]:
    """Worker processes of running jobs: the fork server's children (not the fork server)."""
    found = []
    for process in psutil.process_iter(["cmdline", "ppid"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "scaletune.cluster._zygote" in cmdline or "scaletune.cluster._entry" in cmdline:
            with contextlib.suppress(psutil.NoSuchProcess):
                parent = psutil.Process(process.info["ppid"])
                if "_zygote" in " ".join(parent.cmdline()):
                    found.append(process)
    return found


def _scaletune_processes() -> list[str]:
    """What is left of scaletune's processes (controllers, workers, fork servers, readers,
    the console): their command lines. The soak's own PostgreSQL server is not one."""
    mine = os.getpid()
    left = []
    for process in psutil.process_iter(["cmdline", "name"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if process.pid == mine or "postgres" in (process.info["name"] or ""):
            continue
        if "-m scaletune" in cmdline or "scaletune.cluster" in cmdline or "soak --sim" in cmdline:
            left.append(cmdline)
    return left


def check_reports(url: str) -> dict[str, Any]:
    """Each trial's stored curve against what its workers report: steps 1..N of each metric,
    each once (a retry's reports past its checkpoint are removed before they come again),
    up to its full resource for a completed trial. No trial here fails but by a fault: a
    Failed one counts as failed by the faults."""
    lost = duplicated = trials = 0
    failed_from_faults = 0
    statuses: Counter[str] = Counter()
    reasons: Counter[str] = Counter()  # why the failed trials failed, each reason's count
    with Store(url) as store:
        for tuning in store.list_tuning_jobs():
            for trial in store.training_jobs_of(tuning.id):
                trials += 1
                statuses[trial.status.value] += 1
                if trial.status is JobStatus.FAILED:
                    failed_from_faults += 1
                    reasons[(trial.failure_reason or "").splitlines()[0][:300]] += 1
                by_metric: dict[str, Counter[int]] = {}
                for point in store.metrics(trial.id):
                    by_metric.setdefault(point.name, Counter())[point.step] += 1
                for steps in by_metric.values():
                    duplicated += sum(count - 1 for count in steps.values() if count > 1)
                    lost += max(steps) - len(steps)  # the gaps below the highest step
                    full = int(trial.hyperparameters.get("num_round", 0))  # both kinds say
                    if trial.status is JobStatus.COMPLETED:
                        lost += max(0, full - max(steps))  # its last reports missing
    return {
        "trials": trials,
        "lost_reports": lost,
        "duplicated_reports": duplicated,
        "failed_trials_from_faults": failed_from_faults,
        "failed_trials_reasons": dict(reasons),
        **{f"trials_{k.lower()}": v for k, v in statuses.items()},
    }


def _quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_s": None, "p99_s": None, "n": 0}
    ordered = sorted(values)
    return {
        "p50_s": statistics.median(ordered),
        "p99_s": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        "n": len(ordered),
    }


@contextlib.contextmanager
def _folder() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="scaletune-soak-"))
    os.environ["SCALETUNE_HOME"] = str(folder / "home")
    ok = False
    try:
        yield folder
        ok = True
    finally:
        if ok:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"kept for a look: {folder}", file=sys.stderr)


def soak(minutes: float, restart_every: float, kill_every: float) -> dict[str, Any]:
    with _folder() as folder:
        # Under /tmp itself: the server's own user cannot enter other folders of root's.
        data = Path(tempfile.mkdtemp(prefix="scaletune-pg-", dir="/tmp"))
        server = PostgresServer(data)
        try:
            return _soak(minutes, folder, server, Faults(server, 0.0, restart_every, kill_every))
        finally:
            server.close()
            shutil.rmtree(data, ignore_errors=True)


def _soak(minutes: float, folder: Path, server: PostgresServer, faults: Faults) -> dict[str, Any]:
    url = server.url
    Store(url).close()  # the schema, before anyone reads
    began = time.monotonic()
    until = began + minutes * 60
    controllers, readers = Controllers(url, folder, until), Readers(url, until)
    faults.until = until
    with running_console(url) as console:
        port = int(console.base.rsplit(":", 1)[1])
        controllers.start()
        readers.start()
        faults.thread.start()
        clients = console_clients(port, until)
        faults.thread.join()
        readers.join()
        controllers.join()
        console_footprint = psutil.Process(console.process.pid).memory_info().rss / 2**20
    elapsed = (time.monotonic() - began) / 60
    time.sleep(2.0)  # processes that were ending have ended
    left = _scaletune_processes()
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        connections = conn.execute(
            text("SELECT count(*) FROM pg_stat_activity WHERE datname = 'test'")
        ).scalar_one()
    engine.dispose()
    reports = check_reports(url)
    return {
        "minutes": round(elapsed, 2),
        "postgres_restarts": faults.restarts,
        "worker_kills": len(faults.kills),
        **reports,
        "tuning_controller_exits": Counter(code for _, code in controllers.exit_codes),
        "tuning_controller_failures": controllers.failures,
        "real_tuning_jobs": controllers.jobs_started["real"],
        "leaked_processes": len(left),
        "leaked_process_command_lines": left,
        "leaked_connections": int(connections) - 1,  # less this check's own
        "cli_reads": {
            **_quantiles(readers.seconds),
            "exit_codes": dict(readers.exit_codes),
            "unexpected_errors": readers.unexpected,
        },
        "console_pages": {**_quantiles(clients["seconds"]), "status_codes": clients["codes"]},
        "console_stream_events": clients["events"],
        "console_rss_mb": round(console_footprint, 1),
    }


def markdown(results: dict[str, Any], command: str) -> str:
    goals = {
        "lost_reports": 0,
        "duplicated_reports": 0,
        "failed_trials_from_faults": 0,
        "leaked_processes": 0,
        "leaked_connections": 0,
    }
    met = all(results[key] == value for key, value in goals.items())
    cli, pages = results["cli_reads"], results["console_pages"]
    lines = [
        "# Soak: four controllers, readers and console clients on one PostgreSQL store, "
        "under faults",
        "",
        f"Command: `{command}`. Loopback only; 2-core machine.",
        "",
        f"**Goal (0 lost or duplicated reports, 0 trials failed by the faults, 0 leaked "
        f"processes or connections): {'met' if met else 'NOT met'}.**",
        "",
        "| | |",
        "|---|---:|",
        f"| minutes | {results['minutes']} |",
        f"| PostgreSQL restarts | {results['postgres_restarts']} |",
        f"| workers killed (SIGKILL) | {results['worker_kills']} |",
        f"| trials (real and simulated) | {results['trials']:,} |",
        f"| real tuning jobs started | {results['real_tuning_jobs']} |",
        f"| lost reports | {results['lost_reports']} |",
        f"| duplicated reports | {results['duplicated_reports']} |",
        f"| trials failed by the faults | {results['failed_trials_from_faults']} |",
        f"| leaked processes | {results['leaked_processes']} |",
        f"| leaked database connections | {results['leaked_connections']} |",
        f"| CLI reads: p50 / p99 ({cli['n']:,} reads) | "
        f"{_ms(cli['p50_s'])} / {_ms(cli['p99_s'])} |",
        f"| console pages: p50 / p99 ({pages['n']:,} loads) | "
        f"{_ms(pages['p50_s'])} / {_ms(pages['p99_s'])} |",
        f"| console RSS at the end | {results['console_rss_mb']} MB |",
        "",
        f"Tuning controllers' exit codes: {dict(results['tuning_controller_exits'])}; CLI "
        f"reads' exit codes: {cli['exit_codes']} (3: the store was down at that moment, said "
        f"on one line); console answers: {pages['status_codes']}; live pages' events: "
        f"{results['console_stream_events']}.",
        "",
        "Latencies are under the whole load: each CLI read is a process of its own (Python's "
        "start, scaletune's imports, a query) on 2 cores whose load average stood near 20 (the "
        "real trials' worker processes, two simulated controllers, the console and its 50 "
        "clients, 20 readers); a read alone is in `store_scale.md`. A console page waits "
        "up to 5 s for the store, then answers 503 saying it cannot be read "
        f"({pages['status_codes'].get('503', 0)} did); a live page asks without waiting, "
        "says so (`store-error`) and carries on.",
        "",
    ]
    reasons = results.get("failed_trials_reasons")
    if reasons:
        lines += ["Why the failed trials failed (reason: trials):", ""]
        lines += [f"- `{reason}`: {count}" for reason, count in reasons.items()]
        lines.append("")
    for failure in results.get("tuning_controller_failures", []):
        last = failure["output_end"].strip().splitlines()[-1:] or ["(nothing)"]
        lines.append(
            f"Controller {failure['controller']} exited {failure['exit_code']}; its last "
            f"line: `{last[0]}`."
        )
        lines.append("")
    unexpected = results["cli_reads"].get("unexpected_errors")
    if unexpected:
        lines += ["CLI reads that failed otherwise (the end of their stderr):", ""]
        lines += [f"- `{error.splitlines()[-1] if error else '(nothing)'}`" for error in unexpected]
        lines.append("")
    return "\n".join(lines)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--name", default="soak", help="results/NAME.{md,json}")
    parser.add_argument("--restart-every", type=float, default=RESTART_EVERY, metavar="SECONDS")
    parser.add_argument("--kill-every", type=float, default=KILL_EVERY, metavar="SECONDS")
    parser.add_argument("--simulated-controller", metavar="STORE_URL", help=argparse.SUPPRESS)
    parser.add_argument("--until-epoch", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.simulated_controller:
        simulated_controller(args.simulated_controller, args.until_epoch)
        return
    results = soak(args.minutes, args.restart_every, args.kill_every)
    command = ("python -m benchmarks.faults.soak " + " ".join(sys.argv[1:])).strip()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(
        json.dumps({"command": command, **results}, indent=2, default=str) + "\n"
    )
    text_ = markdown(results, command)
    (RESULTS / f"{args.name}.md").write_text(text_)
    print(text_)


if __name__ == "__main__":
    main()
