"""What each DNN worker runs: build its data and model, train in the job's mode, save."""

from __future__ import annotations

import json

import torch

# torch's optimizers import torch._dynamo when first used (0.8 s): imported with the program,
# the fork server does it once for every worker it forks (cluster._zygote).
import torch._dynamo

from scaletune.spec import DistributionStrategy
from scaletune.worker import WorkerContext

from ._allreduce import train_allreduce
from ._allreduce_backup import train_allreduce_with_backups
from ._common import Examples, Plan, evaluate
from ._elastic_plan import ElasticPlan
from ._hyperparameters import DNNHyperparameters
from ._model import ModelConfig, save_model
from ._ps_modes import server_mode
from ._ps_training import train_parameter_server
from ._run import DNNRun


def train_dnn(ctx: WorkerContext) -> None:
    hyperparameters = ctx.task.hyperparameters
    assert isinstance(hyperparameters, DNNHyperparameters)  # the controller built it
    seed = hyperparameters.seed if hyperparameters.seed is not None else ctx.task.seed
    torch.set_num_threads(ctx.threads)
    distribution = ctx.task.distribution
    allreduce = distribution.strategy is DistributionStrategy.ALLREDUCE
    # The parameter server exchanges weights as host memory: it trains on the CPU.
    device = _device(ctx.rank) if allreduce else torch.device("cpu")
    # An elastic job's workers each hold the whole channel and take their rows of each
    # epoch's order (`ElasticPlan`); others read their shard.
    elastic = ctx.task.elastic
    train = ctx.task.channels["train"].read(0, 1) if elastic else ctx.channel("train")
    assert train is not None  # every job has a train channel
    plan_of = ElasticPlan if elastic else Plan
    validation = ctx.channel("validation") if ctx.is_chief else None
    test = ctx.channel("test") if ctx.is_chief else None
    run = DNNRun(
        ctx=ctx,
        hyperparameters=hyperparameters,
        plan=plan_of(
            hyperparameters, seed, ctx.rank, ctx.world_size, ctx.task.channels["train"].n_rows()
        ),
        config=ModelConfig.for_job(hyperparameters, train.n_features),
        seed=seed,
        device=device,
        train=Examples.of(train, device),
        validation=None if validation is None else Examples.of(validation, device),
    )
    if allreduce and distribution.backup_workers:
        model, epochs_run = train_allreduce_with_backups(run)
    elif allreduce:
        model, epochs_run = train_allreduce(run)
    else:
        model, epochs_run = train_parameter_server(run, server_mode(distribution))
    if not ctx.is_chief:
        return
    model = model.to(device)
    # A job that goes on from this stop's checkpoint reports its test metrics at its end.
    if test is not None and not ctx.stop_goes_on():
        ctx.report(epochs_run, **evaluate(model, Examples.of(test, device), "test"))
    save_model(model.cpu(), run.config, ctx.model_dir)
    (ctx.model_dir / "hyperparameters.json").write_text(
        json.dumps(hyperparameters.model_dump(mode="json"), indent=2)
    )


def _device(rank: int) -> torch.device:
    """One GPU per worker where there are GPUs (round robin), else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", rank % torch.cuda.device_count())
    return torch.device("cpu")
