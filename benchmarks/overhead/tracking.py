"""What tracking costs a job: the reference's 3-worker XGBoost job (bank marketing, 600
rounds by default, train and validation AUC reported every round) with tracking off, with
TensorBoard's event files, and with an MLflow run on a real `mlflow server` on 127.0.0.1;
and with that server killed (SIGKILL) mid-job.

In one warm `Session` the settings alternate in rotating order; a run's time is the job's wall
time as recorded (workers placed to model published). MLflow's updates are sent from a
thread of their own: "caught up" is how long after the job ended the server had all of them
(the model in its xgboost flavour included). A one-shot `scaletune train` (a fresh process,
which imports MLflow's client on that thread) is timed as a command, off against MLflow.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from benchmarks import _mlflow_server as mlflow_servers
from benchmarks._report import BANK_MARKETING_FILE, Paired, spread, summary, write
from scaletune.algorithms.xgboost import REFERENCE_HYPERPARAMETERS
from scaletune.api import Session
from scaletune.spec import TrainingJobSpec, training_spec_from_dict
from scaletune.store import JobStatus
from scaletune.worker import Report

KILL_AT_ROUND = 50
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "xgboost-bank-marketing.toml"


def _spec(bank: Path, rounds: int, tracking: dict[str, Any]) -> TrainingJobSpec:
    channel = {"dataset": "bank-marketing", "dataset_file": str(bank)}
    return training_spec_from_dict(
        {
            "algorithm": "xgboost",
            "instance_count": 3,
            "hyperparameters": {**REFERENCE_HYPERPARAMETERS, "num_round": rounds},
            "channels": {"train": channel, "validation": channel},
            "tracking": tracking,
        }
    )


@dataclass(frozen=True)
class Cpu:
    """CPU seconds used so far: this process (the controller and its tracking threads), the
    workers (every other process under it), the MLflow server (its process group)."""

    controller: float
    workers: float
    server: float

    @classmethod
    def now(cls, server_pid: int) -> Cpu:
        own = resource.getrusage(resource.RUSAGE_SELF)
        workers = server = 0.0
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                times = child.cpu_times()
                used = times.user + times.system
                if os.getpgid(child.pid) == server_pid:
                    server += used
                else:
                    workers += used
        return cls(own.ru_utime + own.ru_stime, workers, server)

    def __sub__(self, other: Cpu) -> Cpu:
        return Cpu(
            self.controller - other.controller,
            self.workers - other.workers,
            self.server - other.server,
        )


def _run(session: Session, spec: TrainingJobSpec, on_report: Any = None) -> float:
    controller = session.controller
    record = controller.run(controller.prepare(spec), on_report=on_report)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    return float(record.wall_seconds or 0.0)


@dataclass(frozen=True)
class Measured:
    """A job's wall time; the CPU it and its tracking took until it ended, and in all (once
    MLflow had every update: the run's end and the model's upload come after the job)."""

    wall: float
    running: Cpu
    total: Cpu


def _measured(session: Session, spec: TrainingJobSpec, server_pid: int) -> Measured:
    before = Cpu.now(server_pid)
    wall = _run(session, spec)
    ended = Cpu.now(server_pid)
    session.controller.tracking.flush(300)
    return Measured(wall, ended - before, Cpu.now(server_pid) - before)


def _median_cpu(samples: list[Cpu]) -> Cpu:
    return Cpu(
        summary([c.controller for c in samples])["median"],
        summary([c.workers for c in samples])["median"],
        summary([c.server for c in samples])["median"],
    )


def _caught_up(session: Session) -> float:
    started = time.monotonic()
    assert session.controller.tracking.flush(300), "MLflow did not take every update"
    return time.monotonic() - started


def _one_shot(folder: Path, bank: Path, environment: dict[str, str]) -> tuple[float, float]:
    """`scaletune train` as a command: (the command's seconds, the job's wall seconds)."""
    job = folder / "job.toml"
    text = EXAMPLE.read_text().replace(
        "../../shared/data/bank-marketing/bank-additional-full.csv", str(bank)
    )
    job.write_text(text + "\n[tracking]\ntensorboard = false\n")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "scaletune", "train", str(job), "--json"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SCALETUNE_STORE": str(folder / "store.db"), **environment},
    )
    seconds = time.monotonic() - started
    return seconds, float(json.loads(done.stdout)["wall_seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10, help="runs of each setting")
    parser.add_argument("--kills", type=int, default=3, help="runs with the server killed")
    parser.add_argument("--one-shot", type=int, default=4, help="commands of each setting")
    parser.add_argument("--rounds", type=int, default=600, help="a job's rounds (reports)")
    parser.add_argument("--name", default="tracking_overhead", help="results/<name>.md")
    parser.add_argument("--bank", type=Path, default=BANK_MARKETING_FILE)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        server, url = mlflow_servers.start(scratch / "mlflow")
        port = int(url.rsplit(":", 1)[1])
        try:
            settings = {
                "off": _spec(args.bank, args.rounds, {"tensorboard": False}),
                "TensorBoard": _spec(args.bank, args.rounds, {"tensorboard": True}),
                "MLflow": _spec(args.bank, args.rounds, {"tensorboard": False, "mlflow": url}),
            }
            walls: dict[str, list[float]] = {label: [] for label in settings}
            cpus: dict[str, list[Measured]] = {label: [] for label in settings}
            caught_up: list[float] = []
            killed: list[float] = []
            beside_killed: list[float] = []  # an "off" run beside each killed one
            delivered_after_restart: list[float] = []
            with Session(scratch / "store.db") as session:
                session.backend.prestart(3)
                for spec in settings.values():  # warm-up: imports, the data's first read
                    _run(session, spec)
                _caught_up(session)
                labels = list(settings)
                for repeat in range(args.repeats):
                    turn = repeat % len(labels)
                    for label in labels[turn:] + labels[:turn]:
                        if label == "MLflow":  # how long the server takes to have it all
                            walls[label].append(_run(session, settings[label]))
                            caught_up.append(_caught_up(session))
                        else:
                            measured = _measured(session, settings[label], server.pid)
                            walls[label].append(measured.wall)
                            cpus[label].append(measured)
                for repeat in range(args.repeats):  # CPU, MLflow's included, beside "off"
                    for label in ["off", "MLflow"] if repeat % 2 == 0 else ["MLflow", "off"]:
                        cpus[label].append(_measured(session, settings[label], server.pid))
                for _ in range(args.kills):
                    victim = server

                    def kill_mid_job(report: Report, victim: Any = victim) -> None:
                        if report.step == KILL_AT_ROUND and victim.poll() is None:
                            os.killpg(victim.pid, signal.SIGKILL)

                    # Alternating which runs first, so that neither always follows the
                    # server's restart (its start-up work goes on for a while).
                    if len(killed) % 2 == 0:
                        beside_killed.append(_run(session, settings["off"]))
                        killed.append(_run(session, settings["MLflow"], kill_mid_job))
                    else:
                        killed.append(_run(session, settings["MLflow"], kill_mid_job))
                        beside_killed.append(_run(session, settings["off"]))
                    victim.wait()
                    restarted = time.monotonic()
                    server, _ = mlflow_servers.start(scratch / "mlflow", port=port)
                    _caught_up(session)
                    delivered_after_restart.append(time.monotonic() - restarted)
            one_shot: dict[str, list[tuple[float, float]]] = {"off": [], "MLflow": []}
            for repeat in range(args.one_shot):
                order = ["off", "MLflow"] if repeat % 2 == 0 else ["MLflow", "off"]
                for label in order:
                    environment = {
                        "SCALETUNE_MLFLOW_TRACKING_URI": url if label == "MLflow" else ""
                    }
                    one_shot[label].append(_one_shot(scratch, args.bank, environment))
        finally:
            mlflow_servers.stop(server)

    rows = [
        [
            "setting",
            "job wall s: median (min–max)",
            "vs off: ratio of medians",
            "paired ratios: median (min–max)",
            "CPU s a job: controller / workers / server (medians)",
            "CPU beyond off, as a share of the job's: in all (while the job ran)",
        ]
    ]

    def beyond_off(label: str, part: str) -> float:
        base = _median_cpu([getattr(m, part) for m in cpus["off"]])
        cpu = _median_cpu([getattr(m, part) for m in cpus[label]])
        extra = (cpu.controller - base.controller) + (cpu.server - base.server)
        return extra / (base.controller + base.workers)

    for label in settings:
        compared = Paired.of(walls["off"], walls[label])
        cpu = _median_cpu([m.total for m in cpus[label]])
        share, running = beyond_off(label, "total"), beyond_off(label, "running")
        results[label] = {
            "wall_seconds": walls[label],
            **compared.results(),
            "cpu_seconds": [vars(m.total) for m in cpus[label]],
            "cpu_seconds_while_running": [vars(m.running) for m in cpus[label]],
            "cpu_beyond_off_share": share,
            "cpu_beyond_off_share_while_running": running,
        }
        pairs = compared.pairs
        rows.append(
            [
                label,
                spread(compared.ours),
                "1.00" if label == "off" else f"{compared.ratio:.3f}",
                ""
                if label == "off"
                else f"{pairs['median']:.3f} ({pairs['min']:.3f}–{pairs['max']:.3f})",
                f"{cpu.controller:.2f} / {cpu.workers:.2f} / {cpu.server:.2f}",
                "" if label == "off" else f"{100 * share:.2f} % ({100 * running:.2f} %)",
            ]
        )
    killed_pairs = Paired.of(beside_killed, killed)
    rows.append(
        [
            f"MLflow, server SIGKILLed at round {KILL_AT_ROUND} (against an off run beside it)",
            spread(killed_pairs.ours),
            f"{killed_pairs.ratio:.3f}",
            f"{killed_pairs.pairs['median']:.3f} ({killed_pairs.pairs['min']:.3f}–"
            f"{killed_pairs.pairs['max']:.3f})",
            "",
            "",
        ]
    )
    results["killed"] = {
        "wall_seconds": killed,
        "off_wall_seconds_beside": beside_killed,
        **killed_pairs.results(),
        "seconds_from_restart_to_all_delivered": delivered_after_restart,
    }
    results["mlflow_caught_up_seconds"] = caught_up
    commands = {label: [c for c, _ in runs] for label, runs in one_shot.items()}
    jobs = {label: [j for _, j in runs] for label, runs in one_shot.items()}
    results["one_shot"] = {"command_seconds": commands, "job_wall_seconds": jobs}
    for label in one_shot:
        rows.append(
            [
                f"one-shot `scaletune train`, {label}: the command (the job inside it)",
                f"{spread(summary(commands[label]))} ({spread(summary(jobs[label]))})",
                f"{summary(commands[label])['median'] / summary(commands['off'])['median']:.3f}"
                f" ({summary(jobs[label])['median'] / summary(jobs['off'])['median']:.3f})",
                "",
                "",
                "",
            ]
        )
    caught = summary(caught_up)
    restart = summary(delivered_after_restart)
    write(
        args.name,
        "Tracking overhead: the reference's XGBoost job with tracking off, TensorBoard, MLflow",
        results,
        rows,
        f"""
{args.repeats} runs of each setting in rotating order on one warm `Session` (3 workers, 2
cores), after one warm-up run of each; wall time as the job record has it. The job is the
reference's (bank marketing, its settings) with {args.rounds} rounds, so that start-up
noise weighs less; it reports train and validation AUC every round: {2 * args.rounds}
metric points, sent to MLflow from a thread of the controller's in batches spaced so that
the server is busy with them at most 1 % of the time (1 to 10 s apart). MLflow
had every update (the model in its xgboost flavour included) {caught["median"]:.2f} s
(median; {caught["min"]:.2f}–{caught["max"]:.2f}) after a job ended.

Killed runs: {args.kills}, each beside an "off" run, which of the two goes first
alternating. The server's process group is SIGKILLed when round {KILL_AT_ROUND} is
reported; the job goes on and completes (updates wait and are retried with backoff; one
warning). Then the server is started again on its port, and every update that waited
reached it {restart["median"]:.1f} s (median) after the restart began, most of that the
server's own start.

CPU: each of {args.repeats} more runs of "off" and "MLflow" (alternating), and the rotating
runs of the others, counts the CPU seconds of the controller's process (its tracking
threads included, and MLflow's updates for that job all sent), of the workers, and of the
MLflow server. The share is what tracking adds (the controller's extra CPU and the
server's) over the job's own CPU with tracking off (controller and workers): with the
workers filling the cores, as here, about what it adds to the wall time, and far less noisy
than wall times on this shared machine. In brackets, the same counted only until the job
ended: what competes with its workers; the run's end and the model's upload come after.

One-shot commands: {args.one_shot} of each, alternating. Such a command pays MLflow's client
import (about 3 s of CPU on the sink's thread, beside the workers) and, after the job, the
model's upload in its flavour before it exits.
""",
    )


if __name__ == "__main__":
    main()
