"""The environment a user's script starts in: what torchrun, TensorFlow and XGBoost's
collective read, scaletune's own variables, and this worker's shard of each channel."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scaletune.reporting import (
    CHECKPOINT_DIR_ENV,
    CHECKPOINT_KEEP_ENV,
    CHECKPOINT_ROOT_ENV,
    CHECKPOINT_SAVES_ENV,
    CHECKPOINT_STEP_ENV,
    COLLECTIVE_TIMEOUT_ENV,
    JUDGED_FILE_ENV,
    JUDGED_STEPS_ENV,
    REPORT_ENV,
    STOP_GOES_ON_ENV,
)
from scaletune.spec import TaskKind, TaskRole, task_role
from scaletune.worker import JUDGED_FILE, WorkerContext, inherited_environment

STOP_GOES_ON_FILE = "stop-goes-on"  # in the script's folder (`scaletune.stop_goes_on`)

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def script_environment(ctx: WorkerContext, folder: Path) -> dict[str, str]:
    """What the script's process sees: torchrun's and TensorFlow's variables, scaletune's
    own (reports, checkpoints, verdicts, its model folder) and its shard of each channel,
    written into `folder`."""
    task = ctx.task
    rendezvous = task.rendezvous
    environment = inherited_environment()  # not what scaletune's own imports set
    environment.update(
        {
            # torch.distributed (init_method="env://"), torchrun-style scripts.
            "RANK": str(ctx.rank),
            "WORLD_SIZE": str(ctx.world_size),
            "LOCAL_RANK": str(ctx.rank),
            "LOCAL_WORLD_SIZE": str(ctx.world_size),
            "MASTER_ADDR": rendezvous.master_addr,
            "MASTER_PORT": str(rendezvous.master_port),
            COLLECTIVE_TIMEOUT_ENV: f"{rendezvous.collective_timeout_seconds:g}",
            # TensorFlow's MultiWorkerMirroredStrategy, or its ParameterServerStrategy.
            "TF_CONFIG": json.dumps(tf_config(ctx)),
            REPORT_ENV: "stdout",
            "SCALETUNE_HYPERPARAMETERS": str(folder / "hyperparameters.json"),
            # Only rank 0's model folder is published; the others write to a throw-away one.
            "SCALETUNE_MODEL_DIR": str(task.model_dir if ctx.is_chief else folder / "model"),
            "SCALETUNE_JOB_ID": task.job_id,
            "SCALETUNE_SEED": str(task.seed),
            STOP_GOES_ON_ENV: str(folder / STOP_GOES_ON_FILE),
            # The reporting rank waits at these steps' reports (its peers, at their next
            # collective); its worker writes the verdict's step to the file.
            JUDGED_STEPS_ENV: ",".join(map(str, sorted(task.judged_steps)))
            if ctx.rank == task.reporting_rank
            else "",
            JUDGED_FILE_ENV: str(folder / JUDGED_FILE),
            "PYTHONUNBUFFERED": "1",  # reports and metric lines arrive as printed
            # Whatever the script leaves in its temp dir goes when the task ends.
            "TMPDIR": str(folder / "tmp"),
        }
    )
    (folder / "model").mkdir()
    (folder / "tmp").mkdir()
    environment.update(_checkpoint_variables(ctx, folder / "checkpoint"))
    environment.update(_tracker_variables(ctx))
    if task.concurrent_workers is not None:
        # One of a tuning job's parallel trials: its math libraries (OpenMP, as torch and
        # XGBoost use it; BLAS) on its share of the cores, as the built-in algorithms run,
        # unless the user's environment names a number itself.
        for name in THREAD_VARIABLES:
            environment.setdefault(name, str(ctx.threads))
    environment["SCALETUNE_SHARD_INDEX"] = str(ctx.rank)
    environment["SCALETUNE_SHARD_COUNT"] = str(ctx.world_size)
    role = _role(ctx)
    environment["SCALETUNE_TASK_ROLE"] = role.kind.value  # worker, chief or ps
    # Under ParameterServerStrategy the chief's dataset_fn feeds the workers: the chief gets
    # every row, the workers and servers none; otherwise each worker its ~1/N.
    serving = task.distribution.parameter_servers is not None and role.kind is not TaskKind.CHIEF
    part = (0, 1) if role.kind is TaskKind.CHIEF else (ctx.rank, ctx.world_size)
    for name, channel in [] if serving else task.channels.items():
        key = f"SCALETUNE_CHANNEL_{name.upper()}"
        shard = channel.read(*part)
        channel_folder = folder / "channels" / name
        channel_folder.mkdir(parents=True)
        np.save(channel_folder / "features.npy", shard.features)
        np.save(channel_folder / "labels.npy", shard.labels)
        environment[key] = str(channel_folder)  # this worker's rows, ready to load
        start, stop = channel.bounds(*part)
        environment[f"{key}_ROWS"] = f"{start}:{stop}"  # of the whole channel
        environment[f"{key}_TOTAL_ROWS"] = str(channel.n_rows())
        if channel.source is not None:  # for scripts that read the original files themselves
            environment[f"{key}_SOURCE"] = str(channel.source)
    return environment


def _role(ctx: WorkerContext) -> TaskRole:
    return task_role(ctx.rank, ctx.world_size, ctx.task.distribution.parameter_servers)


def tf_config(ctx: WorkerContext) -> dict[str, object]:
    """TensorFlow's cluster and this process's task in it. Each rank's address is on its
    own node, as the rendezvous chose it; the roles follow `task_role`."""
    addresses = list(ctx.task.rendezvous.worker_addresses)
    roles = [
        task_role(rank, len(addresses), ctx.task.distribution.parameter_servers)
        for rank in range(len(addresses))
    ]
    cluster: dict[str, list[str]] = {}
    for role, address in zip(roles, addresses, strict=True):
        cluster.setdefault(role.kind.value, []).append(address)
    mine = roles[ctx.rank]
    return {"cluster": cluster, "task": {"type": mine.kind.value, "index": mine.index}}


def _checkpoint_variables(ctx: WorkerContext, folder: Path) -> dict[str, str]:
    """The script's checkpoint folder, with the checkpoint to resume from restored in it
    (on every rank: each loads what rank 0 saved, as DDP scripts expect)."""
    folder.mkdir()
    checkpoints = ctx.checkpoints
    if checkpoints is None:
        return {}
    variables = {
        CHECKPOINT_DIR_ENV: str(folder),
        CHECKPOINT_ROOT_ENV: checkpoints.plan.root,
        CHECKPOINT_KEEP_ENV: str(checkpoints.plan.keep),
        CHECKPOINT_SAVES_ENV: "1" if ctx.is_chief else "0",
    }
    if checkpoints.resume_step is not None:
        for name, content in checkpoints.load().items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(content)
        variables[CHECKPOINT_STEP_ENV] = str(checkpoints.resume_step)
    return variables


def _tracker_variables(ctx: WorkerContext) -> dict[str, str]:
    """XGBoost's collective reads these (xgboost.collective.init(**from the environment))."""
    tracker = ctx.task.rendezvous.xgboost_tracker
    if not tracker:
        return {}
    return {
        "DMLC_TRACKER_URI": str(tracker["dmlc_tracker_uri"]),
        "DMLC_TRACKER_PORT": str(tracker["dmlc_tracker_port"]),
        "DMLC_TASK_ID": f"{ctx.rank:06d}",  # the tracker ranks workers by this
        "DMLC_NUM_WORKER": str(ctx.world_size),
    }
