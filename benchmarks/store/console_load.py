"""The console under load: 1, 10 and 50 clients at once over a large simulated tuning job, each
holding a live page's event stream open and loading pages one after another (the tuning page,
a page of its trials, the jobs page, a trial's page, the charts' data), against one
`scaletune console` process. Reports each level's page latencies (p50, p99), the console's
memory and open connections after it, and whether a stop sent at the height of the load went
through.

    python -m benchmarks.store.console_load [--trials 10000] [--clients 1 10 50] [--seconds 20]

Clients are asyncio connections speaking HTTP/1.1 by hand (one request a connection), in this
process: at 50 clients the client side shares the 2 cores with the console, so the figures
are an upper bound on what a browser elsewhere would see. Writes
benchmarks/results/console_load.{md,json}."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from tests.console.browser import running_console

from benchmarks.scale._user_job import UserCurves, user_spec
from scaletune.simulation import simulate_tuning
from scaletune.store import NewTrainingJob, Store, TrainingJobRecord

RESULTS = Path(__file__).resolve().parents[1] / "results"


async def _request(port: int, raw: bytes) -> tuple[float, int, bytes]:
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    body = await reader.read()
    writer.close()
    status = int(body.split(b" ", 2)[1]) if body else 0
    return time.perf_counter() - started, status, body


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()


async def _stream(port: int, stop: asyncio.Event, events: list[int]) -> None:
    """A live page: its event stream held open, read as it comes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_get("/events").replace(b"Connection: close\r\n", b""))
    await writer.drain()
    while not stop.is_set():
        try:
            chunk = await asyncio.wait_for(reader.read(4096), 0.5)
        except TimeoutError:
            continue
        if not chunk:
            break
        events.append(chunk.count(b"event: "))
    writer.close()


async def _client(
    port: int, pages: list[tuple[str, str]], until: float, latencies: dict[str, list[float]]
) -> int:
    failures, i = 0, 0
    while time.perf_counter() < until:
        name, path = pages[i % len(pages)]
        i += 1
        seconds, status, _ = await _request(port, _get(path))
        if status != 200:
            failures += 1
        latencies.setdefault(name, []).append(seconds)
    return failures


async def _stop_at_height(port: int, job_id: str) -> int:
    """The Stop button, as a page sends it, in the middle of the load."""
    _, _, page = await _request(port, _get(f"/jobs/{job_id}"))
    found = re.search(rb'name="csrf_token" value="([^"]+)"', page)
    assert found is not None, "no Stop form on the running job's page"
    form = b"csrf_token=" + found.group(1)
    raw = (
        f"POST /jobs/{job_id}/stop HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Origin: http://127.0.0.1:{port}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(form)}\r\nConnection: close\r\n\r\n"
    ).encode() + form
    _, status, _ = await _request(port, raw)
    return status


async def _level(
    port: int, clients: int, seconds: float, pages: list[tuple[str, str]], running: str
) -> dict[str, Any]:
    stop = asyncio.Event()
    events: list[int] = []
    streams = [asyncio.create_task(_stream(port, stop, events)) for _ in range(clients)]
    latencies: dict[str, list[float]] = {}
    until = time.perf_counter() + seconds
    workers = [
        asyncio.create_task(_client(port, pages[i % len(pages) :] + pages, until, latencies))
        for i in range(clients)
    ]
    await asyncio.sleep(seconds / 2)
    stop_status = await _stop_at_height(port, running)
    failures = sum(await asyncio.gather(*workers))
    stop.set()
    await asyncio.gather(*streams)
    every = [s for values in latencies.values() for s in values]
    return {
        "clients": clients,
        "requests": len(every),
        "failures": failures,
        "requests_per_s": len(every) / seconds,
        "p50_s": statistics.median(every),
        "p99_s": _quantile(every, 0.99),
        "pages": {
            name: {"p50_s": statistics.median(v), "p99_s": _quantile(v, 0.99), "n": len(v)}
            for name, v in sorted(latencies.items())
        },
        "stream_events": sum(events),
        "stop_status": stop_status,
    }


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _console_footprint(pid: int) -> dict[str, float]:
    process = psutil.Process(pid)
    connections = [c for c in process.net_connections(kind="tcp") if c.status == "ESTABLISHED"]
    return {"rss_mb": process.memory_info().rss / 2**20, "open_connections": len(connections)}


def run(trials: int, levels: list[int], seconds: float, folder: Path) -> dict[str, Any]:
    url = f"sqlite:///{folder / 'console-load.db'}"
    with Store(url) as store:
        record = simulate_tuning(user_spec(trials), UserCurves(), store, start_time=1e9)
        [trial] = store.list_training_jobs(tuning_job_id=record.id, limit=1)
        running = {clients: f"running-at-{clients}-clients" for clients in levels}
        for job_id in running.values():  # a running job for each level's Stop
            store.create_training_job(_running_copy(trial, job_id))
            store.mark_in_progress(job_id, time.time(), pid=psutil.Process().pid, host="here")
    middle = max(1, trials // 50 // 2)
    pages = [
        ("tuning page", f"/tuning/{record.id}"),
        ("trials page", f"/tuning/{record.id}/trials?sort=objective&desc=1&page={middle}"),
        ("jobs page", "/"),
        ("job page", f"/jobs/{trial.id}"),
        ("charts data", f"/api/tuning/{record.id}/charts"),
    ]
    results: dict[str, Any] = {"trials": trials, "seconds_per_level": seconds, "levels": []}
    with running_console(url) as console, Store(url) as store:
        port = int(console.base.rsplit(":", 1)[1])
        asyncio.run(_warm(port, pages))
        results["idle"] = _console_footprint(console.process.pid)
        for clients in levels:
            level = asyncio.run(_level(port, clients, seconds, pages, running[clients]))
            level.update(_console_footprint(console.process.pid))
            level["stop_recorded"] = store.get_training_job(running[clients]).stop_requested
            results["levels"].append(level)
            print(clients, {k: v for k, v in level.items() if k != "pages"}, file=sys.stderr)
    return results


def _running_copy(trial: TrainingJobRecord, job_id: str) -> NewTrainingJob:
    return NewTrainingJob(
        id=job_id,
        name=None,
        algorithm=trial.algorithm,
        spec=trial.spec,
        hyperparameters=trial.hyperparameters,
        instance_count=trial.instance_count,
        created_at=time.time(),
        log_dir="",
    )


async def _warm(port: int, pages: list[tuple[str, str]]) -> None:
    """Each page once: the charts' data is built on its first ask and cached after."""
    for _, path in pages:
        await _request(port, _get(path))


def markdown(results: dict[str, Any], command: str) -> str:
    lines = [
        "# The console under load",
        "",
        f"Command: `{command}`. A simulated Hyperband tuning job of {results['trials']:,} "
        f"trials on SQLite; each level runs {results['seconds_per_level']:g} s; every client "
        "holds a live page's event stream open and loads pages one after another; one Stop "
        "is sent halfway through each level. 2-core machine, clients and console on it.",
        "",
        "| clients | requests | failed | requests/s | p50 | p99 | console RSS | open "
        "connections after | stop at the height |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for level in results["levels"]:
        stopped = "recorded" if level["stop_recorded"] and level["stop_status"] == 303 else "LOST"
        lines.append(
            f"| {level['clients']} | {level['requests']:,} | {level['failures']} | "
            f"{level['requests_per_s']:.0f} | {level['p50_s'] * 1000:.0f} ms | "
            f"{level['p99_s'] * 1000:.0f} ms | {level['rss_mb']:.0f} MB | "
            f"{level['open_connections']} | {stopped} |"
        )
    lines += ["", "Each page's latency (p50 / p99):", ""]
    names = sorted(results["levels"][0]["pages"])
    lines.append("| clients | " + " | ".join(names) + " |")
    lines.append("|---:|" + "---:|" * len(names))
    for level in results["levels"]:
        cells = [
            f"{level['pages'][n]['p50_s'] * 1000:.0f} / {level['pages'][n]['p99_s'] * 1000:.0f} ms"
            for n in names
        ]
        lines.append(f"| {level['clients']} | " + " | ".join(cells) + " |")
    idle = results["idle"]
    lines += [
        "",
        f"Idle after one load of each page: {idle['rss_mb']:.0f} MB, "
        f"{idle['open_connections']} connections. The console serves at most 64 live pages at "
        "once (`--max-live-pages`); past that a page is told to wait.",
        "",
        "Clients load pages back to back, with no pause between: a closed loop, so past one "
        "client the console is saturated and a page's latency is about the clients ÷ the "
        "console's pages a second (its CPU shared with the clients on these 2 cores). A "
        "page's own cost is the 1-client row; what more clients add is their wait in line. "
        "Nothing failed and the Stop sent at each level's height was recorded.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = run(args.trials, args.clients, args.seconds, Path(folder))
    command = ("python -m benchmarks.store.console_load " + " ".join(sys.argv[1:])).strip()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "console_load.json").write_text(
        json.dumps({"command": command, **results}, indent=2) + "\n"
    )
    text = markdown(results, command)
    (RESULTS / "console_load.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
