"""The typed description of a training job. Users' strings become these objects in the loader.

Past 400 lines: mostly field declarations, each with its bounds and one line of why; the
job's tables (cluster, distribution, channels, script, checkpoints, retries) are checked
across each other here, where all of them are known."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from scaletune.spec._frozen import Frozen
from scaletune.spec._names import CapacityClass
from scaletune.spec._tracking import TrackingSpec

HyperparameterValue = bool | int | float | str | list[str]

DEFAULT_CHECKPOINT_SECONDS = 30.0
DEFAULT_COLLECTIVE_TIMEOUT_SECONDS = 300.0  # gloo's own default wait is 30 minutes
URL_PATTERN = r"^[A-Za-z][A-Za-z0-9+.-]*://."
# A location fsspec opens (s3://bucket/key, gs://..., file:///...): kept as text, never a Path.
DataUrl = Annotated[str, StringConstraints(pattern=URL_PATTERN)]
# A URL when it looks like one, else a local (or shared-filesystem) path.
Location = Annotated[DataUrl | Path, Field(union_mode="left_to_right")]


def is_url(location: object) -> bool:
    return isinstance(location, str) and re.match(URL_PATTERN, location) is not None


class AlgorithmName(StrEnum):
    """The built-in algorithms' names (a plug-in adds its own: `algorithms.get_algorithm`)."""

    XGBOOST = "xgboost"
    DNN = "dnn"
    LIGHTGBM = "lightgbm"
    SCRIPT = "script"  # the user's own program, launched once per worker


class DistributionStrategy(StrEnum):
    ALLREDUCE = "allreduce"
    PARAMETER_SERVER = "parameter_server"


class SyncMode(StrEnum):
    SYNC = "sync"
    ASYNC = "async"


class StalenessCompensation(StrEnum):
    """How an asynchronous parameter server treats a gradient computed on old weights."""

    NONE = "none"  # applied as it is
    LR = "lr"  # its step divided by its staleness (Zhang et al. 2016)
    DC = "dc"  # delay-compensated (DC-ASGD, Zheng et al. 2017), strength `dc_lambda`
    AUTO = "auto"  # `dc` where the server applies pushes as they come, `none` otherwise


class ImplicitMomentum(StrEnum):
    """Asynchrony adds momentum of its own (Mitliagkas et al. 2016): about s / (1 + s) for a
    mean staleness s, 1 - 1/N with N workers. `subtract` lowers the optimiser's momentum by
    what the measured staleness implies, so that the two together stay near the job's;
    `adapt` (the default) also gives back the step that lowering costs, as far as the
    training loss allows."""

    IGNORE = "ignore"
    SUBTRACT = "subtract"
    # Subtract, and give back the step that costs where the training loss keeps falling
    # (at a small step asynchrony adds no length to it); best with staleness_compensation="dc".
    ADAPT = "adapt"


class TaskKind(StrEnum):
    """A process's part in a job, as TensorFlow's TF_CONFIG names it."""

    WORKER = "worker"
    CHIEF = "chief"  # ParameterServerStrategy's coordinator: runs the training loop
    PS = "ps"  # a parameter server: holds variables, serves the workers


@dataclass(frozen=True)
class TaskRole:
    kind: TaskKind
    index: int

    def __str__(self) -> str:
        return "chief" if self.kind is TaskKind.CHIEF else f"{self.kind.value} {self.index}"


def task_role(rank: int, task_count: int, parameter_servers: int | None) -> TaskRole:
    """Rank 0 is the chief under ParameterServerStrategy (so it reports, saves the model and
    the checkpoints, as rank 0 always does), then the workers, then the parameter servers;
    otherwise every rank is a worker of its own index."""
    if parameter_servers is None:
        return TaskRole(TaskKind.WORKER, rank)
    workers = task_count - 1 - parameter_servers
    if rank == 0:
        return TaskRole(TaskKind.CHIEF, 0)
    if rank <= workers:
        return TaskRole(TaskKind.WORKER, rank - 1)
    return TaskRole(TaskKind.PS, rank - 1 - workers)


class ChannelName(StrEnum):
    TRAIN = "train"
    VALIDATION = "validation"
    TEST = "test"


class ShardingMode(StrEnum):
    SHARDED = "sharded"  # each worker reads about 1/N of the rows
    REPLICATED = "replicated"  # every worker reads every row


class BuiltinDataset(StrEnum):
    BANK_MARKETING = "bank-marketing"
    BREAST_CANCER = "breast-cancer"
    DIGITS = "digits"  # scikit-learn's bundled 8x8 digits
    MNIST = "mnist"  # dataset_file: the folder holding the four IDX files


class BackendName(StrEnum):
    LOCAL = "local"  # worker processes on this machine
    RAY = "ray"  # Ray actors in one placement group


class Placement(StrEnum):
    PACK = "PACK"  # as few nodes as possible
    SPREAD = "SPREAD"  # across nodes, as far as they go


class CapacityPlan(StrEnum):
    """Which capacity a job's workers run on."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    MIXED = "mixed"  # an elastic job's `min` workers on on-demand capacity, the rest on spot


class CapacityPrices(Frozen):
    """The price of a worker-second on each capacity class, in any one currency."""

    on_demand: float = Field(ge=0, allow_inf_nan=False)
    spot: float = Field(ge=0, allow_inf_nan=False)

    def of(self, capacity: CapacityClass) -> float:
        return self.on_demand if capacity is CapacityClass.ON_DEMAND else self.spot


class ClusterSpec(Frozen):
    """Where the workers run, what each reserves (Ray only: the local backend ignores
    placement and resources), and where data and model pass between machines (`staging`)."""

    backend: BackendName = BackendName.LOCAL
    placement: Placement = Placement.PACK
    cpus_per_worker: float = Field(default=1.0, ge=0)
    gpus_per_worker: float = Field(default=0.0, ge=0)
    memory_per_worker_mb: int | None = Field(default=None, ge=1)
    staging: Location | None = Field(
        default=None,
        description="where each job's data shards and model pass between the controller and "
        "its workers: a folder every node shares or an object-storage URL (s3://bucket/prefix); "
        "the controller's temporary folder if unset (one machine)",
    )
    notice_seconds: float = Field(
        default=30.0,
        gt=0,
        description="how long a worker that gets SIGTERM has before its machine goes (a pod's "
        "grace period, Kubernetes' default 30 s; a spot VM's notice, 30 s to 2 min): the job "
        "saves a checkpoint and goes on without it within that time",
    )
    capacity: CapacityPlan = Field(
        default=CapacityPlan.ON_DEMAND,
        description="what the workers run on, and are billed as: 'on-demand', 'spot', or "
        "'mixed' (an elastic job's min workers on on-demand capacity, the rest on spot); on Ray "
        "a spot worker is placed on a node with a 'spot' resource "
        "(ray start --resources='{\"spot\": 1}')",
    )
    prices: CapacityPrices | None = Field(
        default=None,
        description="the price of a worker-second on each class ({ on_demand = 1.0, spot = 0.3 "
        "}): the job's cost per class beside its worker-seconds",
    )


class DistributionSpec(Frozen):
    strategy: DistributionStrategy = DistributionStrategy.ALLREDUCE
    mode: SyncMode = SyncMode.SYNC  # parameter_server only
    max_staleness: int | None = Field(
        default=None,
        ge=0,
        description="parameter_server async: a worker more than this many updates ahead of "
        "the slowest waits for it (stale-synchronous parallel); 0 is synchronous (the same "
        "rounds as mode='sync'); unbounded if unset",
    )
    backup_workers: int = Field(
        default=0,
        ge=0,
        description="synchronous rounds (all-reduce, or the parameter server's mode='sync'): "
        "a round goes on with the first N - b gradients and drops the late ones (never "
        "applied late); the learning rate and the job's progress count the gradients applied",
    )
    staleness_compensation: StalenessCompensation = Field(
        default=StalenessCompensation.AUTO,
        description="parameter_server async: how a stale gradient is applied ('auto': "
        "delay-compensated where pushes apply as they come)",
    )
    implicit_momentum: ImplicitMomentum = Field(
        default=ImplicitMomentum.ADAPT,
        description="parameter_server async: whether the optimiser's momentum is lowered by "
        "the momentum that asynchrony adds ('subtract'), and with 'adapt' (the default) the "
        "step that costs given back while the training loss keeps falling (best with delay "
        "compensation, which staleness_compensation='auto' gives)",
    )
    dc_lambda: float = Field(
        default=2.0,
        gt=0,
        le=1000,
        description="staleness_compensation='dc': lambda_0 of DC-ASGD-a (adapted by the "
        "gradient's running mean square)",
    )
    parameter_servers: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="script jobs with strategy parameter_server (TensorFlow's "
        "ParameterServerStrategy): how many `ps` tasks run beside the workers and the chief",
    )

    @model_validator(mode="before")
    @classmethod
    def _async_means_parameter_server(cls, data: Any) -> Any:
        """`mode = "async"` alone selects the parameter server: all-reduce has no async mode.
        `staleness_bound`, `max_staleness`'s former name, is still read (jobs in a store)."""
        if isinstance(data, dict) and "staleness_bound" in data and "max_staleness" not in data:
            data = {k: v for k, v in data.items() if k != "staleness_bound"} | {
                "max_staleness": data["staleness_bound"]
            }
        if isinstance(data, dict) and data.get("mode") == "async" and "strategy" not in data:
            return {**data, "strategy": DistributionStrategy.PARAMETER_SERVER.value}
        return data

    @property
    def applies_asynchronously(self) -> bool:
        """Whether the server applies each gradient as it comes: `mode = "async"`, unless
        `max_staleness = 0`, which is synchronous (no worker ahead of another)."""
        return self.mode is SyncMode.ASYNC and self.max_staleness != 0

    @model_validator(mode="after")
    def _parameter_server_settings(self) -> DistributionSpec:
        if self.strategy is DistributionStrategy.PARAMETER_SERVER:
            return self
        if self.max_staleness is not None:
            raise ValueError(
                f"distribution.max_staleness={self.max_staleness} applies to the parameter "
                "server's asynchronous mode (mode='async'); all-reduce is synchronous"
            )
        return self


class ChannelSpec(Frozen):
    """One data channel: a CSV file or folder (label first, no header), local or at a URL
    fsspec opens (s3://bucket/train.csv), or a built-in dataset."""

    path: Location | None = None
    dataset: BuiltinDataset | None = None
    dataset_file: Path | None = Field(
        default=None, description="the raw file a built-in dataset is prepared from"
    )
    split: ChannelName | None = Field(
        default=None, description="which split of a built-in dataset; the channel's name if unset"
    )
    distribution: ShardingMode | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ChannelSpec:
        if (self.path is None) == (self.dataset is None):
            raise ValueError("give exactly one of 'path' or 'dataset'")
        if self.path is not None and (self.dataset_file is not None or self.split is not None):
            raise ValueError("'dataset_file' and 'split' go with 'dataset', not with 'path'")
        for name, value in (("path", self.path), ("dataset_file", self.dataset_file)):
            # A URL is checked when it is read: checking here would need the network.
            if isinstance(value, Path) and not _readable(value):
                raise ValueError(f"{name} {str(value)!r} does not exist or cannot be read")
        return self


def _readable(path: Path) -> bool:
    try:
        if path.is_dir():
            return any(path.iterdir())
        with path.open("rb"):
            return True
    except OSError:
        return False


class MetricDefinition(Frozen):
    """A metric read from rank 0's output: the regex's group `value` (or its first group);
    the step from a group `step` if there is one, else the count of matches so far."""

    name: str = Field(min_length=1, max_length=200)
    regex: str

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            pattern = re.compile(value)
        except re.error as exc:
            raise ValueError(f"does not compile: {exc}") from None
        if pattern.groups == 0:
            raise ValueError("needs a group around the value, e.g. 'loss=([0-9.eE+-]+)'")
        return value


class ScriptSpec(Frozen):
    """A user's training program: a Python file (run with scaletune's interpreter) or a
    command, started once per worker in `source_dir` with the environment frameworks expect."""

    entry_point: str = Field(min_length=1)
    source_dir: Path | None = None  # default: the job file's folder (or the current one)
    metric_definitions: list[MetricDefinition] = Field(default_factory=list)
    xgboost_tracker: bool = Field(
        default=False, description="start XGBoost's tracker and pass its DMLC_* variables"
    )
    metrics_rank: int = Field(
        default=0, ge=0, description="the rank whose reports and output lines count"
    )

    @model_validator(mode="after")
    def _entry_exists(self) -> ScriptSpec:
        if self.source_dir is not None and not self.source_dir.is_dir():
            raise ValueError(f"source_dir {str(self.source_dir)!r} is not a directory")
        if self.entry_point.endswith(".py"):
            entry = (self.source_dir or Path.cwd()) / self.entry_point
            if not entry.is_file():
                raise ValueError(f"entry_point {str(entry)!r} does not exist")
        return self


class StartFrom(Frozen):
    """Another job's checkpoint to begin from: its model and optimiser state, and its reports
    up to there (to train on from another job's model; population-based training's copies)."""

    job: str = Field(min_length=1)
    step: int | None = Field(default=None, ge=0, description="its newest complete one if unset")


class CheckpointSpec(Frozen):
    """When a job saves what resuming needs, how many it keeps, and where.

    A step is a boosting round for XGBoost, an optimiser update for the DNN, and whatever the
    script passes to `scaletune.checkpoint(step)` for a user's script."""

    enabled: bool = True
    every_steps: int | None = Field(default=None, ge=1)
    every_seconds: float | None = Field(
        default=DEFAULT_CHECKPOINT_SECONDS,
        gt=0,
        description="a checkpoint at the first step after this long since the last one",
    )
    keep: int = Field(default=2, ge=1, le=1000)
    path: Location | None = Field(
        default=None,
        description="a folder (shared, for workers on several machines) or an object-storage "
        "URL; the job's own folder if unset. Each job's checkpoints go under <path>/<job id>",
    )
    start_from: StartFrom | None = None

    @model_validator(mode="after")
    def _start_needs_a_folder(self) -> CheckpointSpec:
        if self.start_from is not None and not self.enabled:
            raise ValueError(
                "start_from copies the other job's checkpoint into this job's own: "
                "enabled must be true"
            )
        return self


class RetrySpec(Frozen):
    """How often a job whose workers broke is started again from its latest checkpoint."""

    # SageMaker's MaximumRetryAttempts: retries after the first attempt, not attempts in all.
    max_attempts: int = Field(default=2, ge=0, le=100)
    retry_on_program_error: bool = Field(
        default=False,
        description="retry an exception in the training program too (not only killed, lost "
        "or silent workers)",
    )
    heartbeat_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="a worker silent this long (stopped, hung) is taken for lost",
    )
    placement_timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        description="a job whose workers (an elastic job's fewest) cannot all be placed "
        "this long fails; unset: it waits up to max_runtime_seconds, then stops",
    )
    collective_timeout_seconds: float = Field(
        default=DEFAULT_COLLECTIVE_TIMEOUT_SECONDS,
        gt=0,
        description="a collective (an all-reduce, a parameter server's reply) that waits this "
        "long on a peer fails, and the attempt is taken for hung: a worker alive but stuck "
        "still sends heartbeats",
    )


_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,47})$")


class TrainingJobSpec(Frozen):
    name: str | None = None
    # A built-in's name (AlgorithmName) or a plug-in's: the loader finds it once built.
    algorithm: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,47}$")
    hyperparameters: dict[str, HyperparameterValue] = Field(default_factory=dict)
    instance_count: int = Field(
        default=1,
        ge=1,
        le=256,
        description="the workers; an elastic job's most (written `{ min = 2, max = 8 }`)",
    )
    min_instance_count: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="an elastic job's fewest workers: it goes on with as many as can be "
        "placed, from this up to instance_count; unset: always instance_count",
    )
    distribution: DistributionSpec = Field(default_factory=DistributionSpec)
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    channels: dict[ChannelName, ChannelSpec] = Field(default_factory=dict)
    output_path: Path | None = None
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    max_runtime_seconds: float = Field(default=86_400.0, gt=0)
    script: ScriptSpec | None = None  # algorithm "script" only
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec)
    retry: RetrySpec = Field(default_factory=RetrySpec)
    tracking: TrackingSpec = Field(default_factory=TrackingSpec)

    @field_validator("name")
    @classmethod
    def _name_shape(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.match(value):
            raise ValueError("use 1-48 letters, digits or '-', starting with a letter or digit")
        return value

    @model_validator(mode="before")
    @classmethod
    def _size_range(cls, data: Any) -> Any:
        """`instance_count = { min = 2, max = 8 }`: kept as the most and the fewest workers."""
        if not isinstance(data, dict) or not isinstance(data.get("instance_count"), dict):
            return data
        table = data["instance_count"]
        unknown = sorted(set(table) - {"min", "max"})
        if unknown:
            raise ValueError(f"instance_count: a range has 'min' and 'max', not {unknown}")
        for bound in ("min", "max"):
            value = table.get(bound)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(
                    f"instance_count.{bound}={value!r}: give a whole number of workers"
                )
            if not 1 <= value <= 256:
                raise ValueError(f"instance_count.{bound}={value}: from 1 to 256 workers")
        if table["min"] > table["max"]:
            raise ValueError(f"instance_count: min={table['min']} is more than max={table['max']}")
        if "min_instance_count" in data:
            raise ValueError("give instance_count = { min, max } or min_instance_count, not both")
        return {**data, "instance_count": table["max"], "min_instance_count": table["min"]}

    @model_validator(mode="after")
    def _script_settings(self) -> TrainingJobSpec:
        # Which channels and whether a [script] table the algorithm takes: its own check.
        if self.script is not None and self.script.metrics_rank >= self.min_workers:
            raise ValueError(
                f"script.metrics_rank={self.script.metrics_rank} but instance_count="
                f"{self.min_workers}{' at the fewest' if self.elastic else ''}: ranks are 0 "
                f"to {self.min_workers - 1}"
            )
        servers = self.distribution.parameter_servers
        if self.script is not None and (
            self.distribution.strategy is DistributionStrategy.PARAMETER_SERVER
        ):
            if servers is None:
                raise ValueError(
                    "distribution.parameter_servers: a script job with strategy "
                    "'parameter_server' runs TensorFlow's ParameterServerStrategy; say how "
                    "many parameter-server tasks it needs (1 or more)"
                )
            if self.script.metrics_rank != 0:
                raise ValueError(
                    f"script.metrics_rank={self.script.metrics_rank}: under "
                    "ParameterServerStrategy the chief (rank 0) runs the training loop"
                )
            if self.distribution.max_staleness is not None or self.distribution.backup_workers:
                raise ValueError(
                    "distribution.max_staleness and backup_workers are the built-in dnn's "
                    "parameter server's; TensorFlow's ParameterServerStrategy has neither"
                )
        elif servers is not None:
            raise ValueError(
                f"distribution.parameter_servers={servers} is for script jobs with strategy "
                "'parameter_server' (TensorFlow); the built-in dnn's parameter server runs "
                "in rank 0's process"
            )
        return self

    @model_validator(mode="after")
    def _elastic_can_resize(self) -> TrainingJobSpec:
        if self.min_instance_count is None:
            return self
        if self.min_instance_count > self.instance_count:
            raise ValueError(
                f"min_instance_count={self.min_instance_count} is more than "
                f"instance_count={self.instance_count}"
            )
        if self.distribution.strategy is DistributionStrategy.PARAMETER_SERVER:
            raise ValueError(
                "instance_count: an elastic job (a min and a max) needs distribution.strategy "
                "'allreduce'; a parameter server's workers are not resized"
            )
        if not self.checkpoint.enabled:
            raise ValueError(
                "instance_count: an elastic job resizes from a checkpoint, so "
                "checkpoint.enabled must be true"
            )
        return self

    @model_validator(mode="after")
    def _mixed_is_elastic(self) -> TrainingJobSpec:
        if self.cluster.capacity is CapacityPlan.MIXED and not self.elastic:
            raise ValueError(
                "cluster.capacity='mixed' puts an elastic job's min workers on on-demand "
                "capacity and the rest on spot: give instance_count = { min = ..., max = ... }"
            )
        return self

    def capacity_of(self, workers: int) -> dict[CapacityClass, int]:
        """The processes of an attempt at this many workers on each capacity class (a
        TensorFlow chief and servers run where the job's workers do)."""
        tasks = self.tasks_at(workers)
        plan = self.cluster.capacity
        if plan is CapacityPlan.MIXED:
            held = min(self.min_workers, tasks)
            return {CapacityClass.ON_DEMAND: held, CapacityClass.SPOT: tasks - held}
        return {CapacityClass(plan.value): tasks}

    def capacity_of_rank(self, rank: int) -> CapacityClass:
        """Rank by rank: under 'mixed', the first `min` ranks hold the on-demand workers."""
        plan = self.cluster.capacity
        if plan is CapacityPlan.MIXED:
            return CapacityClass.ON_DEMAND if rank < self.min_workers else CapacityClass.SPOT
        return CapacityClass(plan.value)

    @property
    def elastic(self) -> bool:
        """Whether the job goes on with fewer workers, or grows, as capacity comes and goes."""
        return self.min_instance_count is not None and self.min_instance_count < self.instance_count

    @property
    def min_workers(self) -> int:
        """The fewest workers the job trains on (instance_count unless elastic)."""
        return self.instance_count if self.min_instance_count is None else self.min_instance_count

    @property
    def tensorflow_parameter_server(self) -> bool:
        """A script job under TensorFlow's ParameterServerStrategy: beside its workers, a
        chief that runs the training loop and `parameter_servers` ps tasks."""
        return self.distribution.parameter_servers is not None

    @property
    def task_count(self) -> int:
        """How many processes the job runs, each holding a worker's resources and billed as
        one: its workers, and for TensorFlow's ParameterServerStrategy the chief and the
        parameter servers as well (as a managed service bills each machine of the cluster)."""
        return self.tasks_at(self.instance_count)

    def tasks_at(self, workers: int) -> int:
        """The processes of an attempt at this many workers (an elastic job's size varies)."""
        servers = self.distribution.parameter_servers
        return workers + (0 if servers is None else 1 + servers)

    def task_name(self, rank: int) -> str:
        """How a failure names a process: "worker 2", or "ps 0 (rank 4)" under
        ParameterServerStrategy, where ranks and TensorFlow's indices differ."""
        if not self.tensorflow_parameter_server:
            return f"worker {rank}"
        role = task_role(rank, self.task_count, self.distribution.parameter_servers)
        return f"{role} (rank {rank})"

    def sharding(self, channel: ChannelName) -> ShardingMode:
        """Training data is split across workers; evaluation data is whole on every worker."""
        explicit = self.channels[channel].distribution
        if explicit is not None:
            return explicit
        return ShardingMode.SHARDED if channel is ChannelName.TRAIN else ShardingMode.REPLICATED
