"""The typed description of a tuning job: what to search, how, and within which limits.

Past 400 lines: mostly field declarations with their bounds, and the checks that need the
whole job at once (a strategy's settings against its ranges, objectives and training job)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import Field, ValidationError, model_validator

from scaletune.errors import InvalidInputError

if TYPE_CHECKING:
    from pydantic import BaseModel
from scaletune.spec._errors import describe_validation_error
from scaletune.spec._frozen import Frozen
from scaletune.spec._names import (
    CLUSTER_SIZE,
    COST_METRICS,
    BracketWeights,
    ObjectiveType,
    RankBy,
    default_rank_by,
)
from scaletune.spec._objectives import ConstraintSpec, ObjectiveSpec
from scaletune.spec._ranges import (
    CategoricalRange,
    CategoryValue,
    ContinuousRange,
    ParameterRange,
    Range,
)
from scaletune.spec._tracking import TrackingSpec
from scaletune.spec._training import CapacityPlan, StartFrom, TrainingJobSpec

# A range over the number of workers: cluster size as a tuned choice, not a hyperparameter.


class Strategy(StrEnum):
    RANDOM = "Random"
    GRID = "Grid"
    BAYESIAN = "Bayesian"
    HYPERBAND = "Hyperband"
    NSGA_II = "NSGA-II"  # a genetic search over several objectives (Optuna's NSGAIISampler)
    PBT = "PBT"  # population-based training: copy the better trials' checkpoints, perturb


class EarlyStopping(StrEnum):
    OFF = "Off"
    AUTO = "Auto"  # median stopping


class RungPlacement(StrEnum):
    """Which capacity a promotion-type Hyperband's trials run on."""

    SAME = "same"  # the training job's cluster.capacity, throughout
    RUNGS = "rungs"  # spot until a trial's first promotion, on-demand once promoted


class HyperbandType(StrEnum):
    """What happens to a trial that reaches a rung without ranking in its top 1/eta."""

    STOPPING = "stopping"  # it is stopped for good (ASHA's stopping variant)
    PROMOTION = "promotion"  # it pauses, and resumes from its checkpoint once it ranks there


HyperbandSearcher = Literal[
    "Random", "Bayesian", "BOHB", "LastValueTPE", "LastValueCQR", "LastValueTPEThenCQR"
]
# Those whose model fits one objective: refused with several.
ONE_OBJECTIVE_SEARCHERS: tuple[HyperbandSearcher, ...] = (
    "BOHB",
    "LastValueTPE",
    "LastValueCQR",
    "LastValueTPEThenCQR",
)


def default_searcher(multi_objective: bool) -> HyperbandSearcher:
    """Hyperband's proposals when the spec names none. LastValueTPEThenCQR with one
    objective: on LCBench it ends lower than LastValueTPE, and on a job of fewer than 32
    trials, as the reference's bank job, it is LastValueTPE, which keeps the bank goal there
    where LastValueCQR throughout does not (benchmarks/README.md, "Where scaletune stands
    against the other tools"). Its model fits one objective: Random with several."""
    return "Random" if multi_objective else "LastValueTPEThenCQR"


class HyperbandSpec(Frozen):
    """The resource is the step of the objective metric (boosting round, epoch)."""

    min_resource: int = Field(default=1, ge=1)
    max_resource: int = Field(ge=2)
    eta: int = Field(default=3, ge=2)
    # Bayesian: TPE on each finished trial's last value (pruned ones by how far they got);
    # BOHB: TPE on the highest rung with enough results; LastValueTPE: independent TPE on
    # every trial's latest report, running trials included (as Syne Tune's BOHB);
    # LastValueCQR: conformalized quantile regression on the same (as Syne Tune's ASHA-CQR);
    # LastValueTPEThenCQR: LastValueTPE's until 32 trials have values, LastValueCQR's after.
    # None: the default, `default_searcher` (LastValueTPEThenCQR with one objective, Random
    # with several).
    searcher: HyperbandSearcher | None = None
    type: HyperbandType = HyperbandType.STOPPING
    # How many of Hyperband's brackets, most aggressive first (1: plain asynchronous successive
    # halving); None: all of them. More than there are is refused. One by default: on LCBench
    # all brackets trailed one (benchmarks/README.md).
    brackets: int | None = Field(default=1, ge=1)
    # "adaptive": each bracket's chance scaled by how well its first rung's ranking has
    # predicted the final one so far (Kendall's tau; Hyper-Tune's idea)
    bracket_weights: BracketWeights = "hyperband"
    # What a rung ranks: the value each trial's curve so far points to at max_resource (a
    # pow3 fit; a rung where a trial has fewer than 4 reports judges nothing if a later rung
    # will forecast, else ranks the value), or its value there. None: the default,
    # `default_rank_by`.
    rank_by: RankBy | None = None
    # "rungs": the trials most likely to be stopped run on the cheapest capacity (spot), and
    # those promoted past a rung go on on on-demand capacity, as a new attempt from the
    # checkpoint their pause saved.
    placement: RungPlacement = RungPlacement.SAME

    @model_validator(mode="after")
    def _ordered(self) -> HyperbandSpec:
        if self.min_resource >= self.max_resource:
            raise ValueError(
                f"min_resource must be below max_resource (got {self.min_resource}, "
                f"{self.max_resource})"
            )
        if self.placement is RungPlacement.RUNGS and self.type is not HyperbandType.PROMOTION:
            raise ValueError(
                "placement='rungs' moves a trial to on-demand capacity when it is promoted, a "
                "new attempt from its paused checkpoint: it needs type = 'promotion'"
            )
        available = self.bracket_count()
        if self.brackets is not None and self.brackets > available:
            raise ValueError(
                f"brackets={self.brackets}: min_resource={self.min_resource}, "
                f"max_resource={self.max_resource} and eta={self.eta} make {available}"
            )
        return self

    def bracket_count(self) -> int:
        """Hyperband's full set: one bracket per rung below max_resource, plus one."""
        count, resource = 1, self.min_resource * self.eta
        while resource <= self.max_resource:
            count, resource = count + 1, resource * self.eta
        return count


class PBTSpec(Frozen):
    """Population-based training (Jaderberg et al. 2017), asynchronous as in Ray Tune: each
    time a trial has gone `perturbation_interval` more steps of the objective, if it ranks in
    the bottom `quantile_fraction` of the trials running, it stops, and a new trial goes on
    from the newest checkpoint of one in the top fraction (exploit) with that one's settings
    perturbed (explore): each multiplied by one of `perturbation_factors` (a category moves
    to a neighbour), or drawn afresh with `resample_probability`. `synchronous`: the whole
    population is ranked at each multiple of the interval, once every member is there."""

    perturbation_interval: int = Field(ge=1)
    population: int | None = Field(default=None, ge=2, description="max_parallel_jobs if unset")
    quantile_fraction: float = Field(default=0.25, gt=0, le=0.5)
    resample_probability: float = Field(default=0.25, ge=0, le=1)
    perturbation_factors: tuple[float, float] = (1.2, 0.8)
    # Ray Tune's `synch`: rank the whole population at the same steps (the multiples of
    # perturbation_interval), each member waiting there for the others.
    synchronous: bool = False

    @model_validator(mode="after")
    def _positive_factors(self) -> PBTSpec:
        if min(self.perturbation_factors) <= 0:
            raise ValueError(
                f"perturbation_factors must be above 0 (got {list(self.perturbation_factors)})"
            )
        return self


class WarmStartType(StrEnum):
    IDENTICAL_DATA_AND_ALGORITHM = "IdenticalDataAndAlgorithm"
    TRANSFER_LEARNING = "TransferLearning"  # other data: parents' results are weaker hints


class WarmStartSpec(Frozen):
    """Earlier tuning jobs whose finished trials the searcher learns from before proposing."""

    parents: list[str] = Field(min_length=1, max_length=5)
    type: WarmStartType = WarmStartType.IDENTICAL_DATA_AND_ALGORITHM


class CompletionSpec(Frozen):
    """Rules that end a tuning job before max_jobs once more trials would add little, beside
    target_objective and max_jobs_without_improvement (SageMaker's completion criteria). Each
    judges what the next trials can be expected to add to the best (`tuning._completion`);
    the job ends when any of them says so, and records which."""

    convergence: bool = Field(
        default=False,
        description="end once as many trials again as have ended are expected to improve the "
        "best objective by 1 % of it or less (SageMaker's ConvergenceDetected)",
    )
    min_improvement_per_cost: float | None = Field(
        default=None,
        gt=0,
        description="end once the next trial is expected to improve the best objective by "
        "less than this much per billable worker-hour it costs",
    )


class AlgorithmChecks(Protocol):
    """What a tuning job's checks ask of its training job's algorithm (`algorithms.Algorithm`
    has it; named here so that this package imports no algorithm)."""

    def check(self, spec: TrainingJobSpec) -> None: ...

    def hyperparameter_names(self) -> frozenset[str] | None: ...

    def parse_hyperparameters(self, raw: Mapping[str, Any]) -> BaseModel: ...

    def reported_metrics(
        self, spec: TrainingJobSpec, hyperparameters: BaseModel
    ) -> frozenset[str] | None: ...


class TuningJobSpec(Frozen):
    name: str | None = None
    # The objective (with `objectives`: the first of them, which Hyperband judges at each
    # step, and which names the best trial).
    objective_metric: str
    objective_type: ObjectiveType = ObjectiveType.MAXIMIZE
    # Several objectives at once (a reported metric, billable_seconds, wall_seconds): the
    # search looks for their Pareto front.
    objectives: list[ObjectiveSpec] = Field(default_factory=list, max_length=4)
    # Final values a trial must meet to count: to be best, to be on the front, to be reached.
    constraints: list[ConstraintSpec] = Field(default_factory=list, max_length=8)
    strategy: Strategy = Strategy.BAYESIAN
    hyperband: HyperbandSpec | None = None
    pbt: PBTSpec | None = None
    early_stopping: EarlyStopping = EarlyStopping.OFF
    ranges: dict[str, ParameterRange] = Field(min_length=1)
    max_jobs: int = Field(ge=1, le=1_000_000)  # a simulated job of 100,000 trials is routine
    max_parallel_jobs: int = Field(default=1, ge=1)
    max_runtime_seconds: float | None = Field(
        default=None,
        gt=0,
        description="end the tuning job after this long: running trials are stopped, and its "
        "status is Stopped",
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    target_objective: float | None = None
    max_jobs_without_improvement: int | None = Field(default=None, ge=1)
    completion: CompletionSpec = Field(default_factory=CompletionSpec)
    max_failed_trials: int | None = Field(
        default=None,
        ge=1,
        description="the tuning job fails once this many trials have failed (after their "
        "retries): a broken script or bad data should not burn through max_jobs",
    )
    warm_start: WarmStartSpec | None = None
    # Tried before anything the searcher proposes, in order (Ray Tune's and Syne Tune's
    # points_to_evaluate); a range a table leaves out takes its middle, so [{}] is the middle
    # of every range. None by default: on LCBench a first trial at the middle did not help
    # (tuning_lcbench*.md, "ASHA middle first"). Grid walks every point and takes none.
    first_configurations: list[dict[str, CategoryValue]] = Field(default_factory=list)
    training: TrainingJobSpec
    # `[tracking]` for the tuning job and its trials; its keys override `[training.tracking]`'s,
    # and both hold the merged settings once validated (`_one_tracking`).
    tracking: TrackingSpec = Field(default_factory=TrackingSpec)

    @model_validator(mode="before")
    @classmethod
    def _one_tracking(cls, raw: Any) -> Any:
        if not isinstance(raw, Mapping):
            return raw
        training = raw.get("training")
        if isinstance(training, TrainingJobSpec):
            training = training.model_dump()
        if not isinstance(training, Mapping):
            return raw
        own, theirs = raw.get("tracking", {}), training.get("tracking", {})
        if isinstance(own, TrackingSpec):
            own = own.model_dump(exclude_unset=True)
        if isinstance(theirs, TrackingSpec):
            theirs = theirs.model_dump(exclude_unset=True)
        if not isinstance(own, Mapping) or not isinstance(theirs, Mapping):
            return raw  # validation names the bad value
        merged = {**theirs, **own}
        return {**raw, "tracking": merged, "training": {**training, "tracking": merged}}

    @model_validator(mode="before")
    @classmethod
    def _primary_from_objectives(cls, raw: Any) -> Any:
        """With `objectives` and no `objective_metric`, the first objective is the primary."""
        if not isinstance(raw, Mapping) or "objective_metric" in raw:
            return raw
        objectives = raw.get("objectives")
        if isinstance(objectives, list) and objectives and isinstance(objectives[0], Mapping):
            first = objectives[0]
            return {
                **raw,
                "objective_metric": first.get("metric"),
                "objective_type": first.get("type", ObjectiveType.MAXIMIZE.value),
            }
        return raw

    @property
    def all_objectives(self) -> list[ObjectiveSpec]:
        """Every objective, the primary first (one, unless `objectives` names more)."""
        return self.objectives or [
            ObjectiveSpec(metric=self.objective_metric, type=self.objective_type)
        ]

    @property
    def is_multi_objective(self) -> bool:
        return len(self.all_objectives) > 1

    @property
    def hyperband_searcher(self) -> HyperbandSearcher | None:
        """What proposes Hyperband's trials: the one named, else the default; None without
        Hyperband."""
        if self.hyperband is None:
            return None
        return self.hyperband.searcher or default_searcher(self.is_multi_objective)

    @property
    def hyperband_rank_by(self) -> RankBy | None:
        """What Hyperband's rungs rank: the one named, else the default; None without
        Hyperband."""
        if self.hyperband is None:
            return None
        return self.hyperband.rank_by or default_rank_by(self.is_multi_objective)

    @model_validator(mode="after")
    def _consistent(self) -> TuningJobSpec:
        self._check_objectives()
        if self.max_parallel_jobs > self.max_jobs:
            raise InvalidInputError(
                f"max_parallel_jobs={self.max_parallel_jobs} is more than max_jobs={self.max_jobs}"
            )
        if self.strategy is Strategy.HYPERBAND:
            if self.hyperband is None:
                raise InvalidInputError(
                    "strategy 'Hyperband' needs [hyperband] with max_resource (and min_resource)"
                )
            if self.early_stopping is not EarlyStopping.OFF:
                raise InvalidInputError(
                    f"early_stopping={self.early_stopping.value!r} with strategy 'Hyperband': "
                    "Hyperband stops poor jobs itself; set early_stopping = 'Off'"
                )
            if (
                self.hyperband.type is HyperbandType.PROMOTION
                and not self.training.checkpoint.enabled
            ):
                raise InvalidInputError(
                    "hyperband.type 'promotion' resumes paused trials from their checkpoints: "
                    "training.checkpoint.enabled must be true"
                )
            if self.hyperband.searcher in ONE_OBJECTIVE_SEARCHERS and self.is_multi_objective:
                raise InvalidInputError(
                    f"hyperband.searcher {self.hyperband.searcher!r} fits its model on one "
                    "objective; with several objectives use 'Random' or 'Bayesian' (MOTPE)"
                )
        elif self.hyperband is not None:
            raise InvalidInputError(
                f"[hyperband] is for strategy 'Hyperband', not {self.strategy.value!r}"
            )
        self._check_pbt()
        self._check_first_configurations()
        if self.strategy is Strategy.GRID:
            for name, parameter in self.ranges.items():
                if isinstance(parameter, ContinuousRange):
                    raise InvalidInputError(
                        f"ranges.{name}: Grid search needs Categorical or Integer ranges"
                    )
        if CLUSTER_SIZE in self.ranges:
            self._check_cluster_sizes(self.ranges[CLUSTER_SIZE])
        return self

    @property
    def population_size(self) -> int:
        """PBT's population: the trials that train side by side."""
        if self.pbt is None or self.pbt.population is None:
            return self.max_parallel_jobs
        return self.pbt.population

    def _check_pbt(self) -> None:
        if self.strategy is not Strategy.PBT:
            if self.pbt is not None:
                raise InvalidInputError(f"[pbt] is for strategy 'PBT', not {self.strategy.value!r}")
            return
        if self.pbt is None:
            raise InvalidInputError("strategy 'PBT' needs [pbt] with perturbation_interval")
        population = self.population_size
        if population < 2:
            raise InvalidInputError(
                f"strategy 'PBT' needs a population of 2 or more trials training at once "
                f"(max_parallel_jobs={self.max_parallel_jobs}): raise max_parallel_jobs"
            )
        if population > self.max_parallel_jobs:
            raise InvalidInputError(
                f"pbt.population={population} is more than max_parallel_jobs="
                f"{self.max_parallel_jobs}: every member trains at once, to be compared"
            )
        if population > self.max_jobs:
            raise InvalidInputError(
                f"pbt.population={population} is more than max_jobs={self.max_jobs}"
            )
        if not self.training.checkpoint.enabled:
            raise InvalidInputError(
                "strategy 'PBT' copies the better trials' checkpoints: "
                "training.checkpoint.enabled must be true"
            )
        if self.early_stopping is not EarlyStopping.OFF:
            raise InvalidInputError(
                f"early_stopping={self.early_stopping.value!r} with strategy 'PBT': PBT stops "
                "the poor trials itself; set early_stopping = 'Off'"
            )
        if self.is_multi_objective:
            raise InvalidInputError(
                "strategy 'PBT' ranks the population on one objective; it takes no "
                "`objectives` list"
            )

    @property
    def first_points(self) -> list[dict[str, object]]:
        """The configurations tried first, each complete (see `first_configurations`)."""
        return [
            {
                name: r.check(table[name]) if name in table else r.middle()
                for name, r in self.ranges.items()
            }
            for table in self.first_configurations
        ]

    def _check_first_configurations(self) -> None:
        tables = self.first_configurations
        if not tables:
            return
        if self.strategy is Strategy.GRID:
            raise InvalidInputError(
                "first_configurations: Grid walks every point of its ranges in order; it takes none"
            )
        if len(tables) > self.max_jobs:
            raise InvalidInputError(
                f"first_configurations: {len(tables)} of them is more than max_jobs={self.max_jobs}"
            )
        for index, table in enumerate(tables):
            for name, value in table.items():
                where = f"first_configurations[{index}].{name}"
                if name not in self.ranges:
                    raise InvalidInputError(
                        f"{where}: no such range (ranges: {', '.join(self.ranges)})"
                    )
                try:
                    self.ranges[name].check(value)
                except ValueError as exc:
                    raise InvalidInputError(f"{where}: {exc}") from None

    def check_against(self, algorithm: AlgorithmChecks) -> None:
        """What only the training job's algorithm knows: the names it takes, the values each
        range's ends give, the metrics it reports, the cluster sizes it runs on (the loader
        calls it once the model is built: this package does not import the algorithms)."""
        algorithm.check(self.training)
        known = algorithm.hyperparameter_names()
        base = dict(self.training.hyperparameters)
        for name, parameter in self.ranges.items():
            if name == CLUSTER_SIZE:
                self._check_cluster_sizes_run(parameter, algorithm)
                continue
            if known is not None and name not in known:
                raise InvalidInputError(
                    f"ranges.{name}: {self.training.algorithm} has no hyperparameter {name!r}"
                )
            for value in _extremes(parameter):
                try:
                    algorithm.parse_hyperparameters({**base, name: value})
                except InvalidInputError as exc:
                    raise InvalidInputError(
                        f"ranges.{name}: {value!r} is not allowed: {exc}"
                    ) from None
        reported = algorithm.reported_metrics(self.training, algorithm.parse_hyperparameters(base))
        if reported is None:
            return
        if self.objective_metric not in reported:
            raise InvalidInputError(
                f"objective_metric {self.objective_metric!r} is never reported by this job; "
                f"it reports {sorted(reported)}"
            )
        named = [("objectives", o.metric) for o in self.objectives]
        named += [("constraints", c.metric) for c in self.constraints]
        for where, metric in named:
            if metric not in reported and metric not in COST_METRICS:
                raise InvalidInputError(
                    f"{where}: {metric!r} is neither reported by this job (it reports "
                    f"{sorted(reported)}) nor one of {list(COST_METRICS)}"
                )

    def _check_objectives(self) -> None:
        if self.objective_metric in COST_METRICS:
            raise InvalidInputError(
                f"objective_metric {self.objective_metric!r}: the first objective must be a "
                "metric the job reports (it is judged at each step); put costs among "
                "`objectives` after it"
            )
        if not self.objectives:
            return
        first = self.objectives[0]
        if (first.metric, first.type) != (self.objective_metric, self.objective_type):
            raise InvalidInputError(
                f"objective_metric {self.objective_metric!r} ({self.objective_type.value}) "
                f"must be the first of objectives, which is {first.metric!r} "
                f"({first.type.value})"
            )
        seen: set[str] = set()
        for objective in self.objectives:
            if objective.metric in seen:
                raise InvalidInputError(f"objectives: {objective.metric!r} is named twice")
            seen.add(objective.metric)

    def _check_cluster_sizes(self, parameter: Range) -> None:
        if self.training.elastic:
            raise InvalidInputError(
                f"ranges.{CLUSTER_SIZE}: the training job is elastic (instance_count = "
                f"{{ min = {self.training.min_workers}, max = {self.training.instance_count} }}"
                "): its trials size themselves; tune the size or make it elastic, not both"
            )
        if isinstance(parameter, ContinuousRange):
            raise InvalidInputError(
                f"ranges.{CLUSTER_SIZE}: a cluster size needs an Integer or Categorical range"
            )
        for value in _cluster_sizes(parameter):
            try:
                self.trial_spec({CLUSTER_SIZE: value})
            except InvalidInputError as exc:
                raise InvalidInputError(
                    f"ranges.{CLUSTER_SIZE}: {value!r} is not allowed: {exc}"
                ) from None

    def _check_cluster_sizes_run(self, parameter: Range, algorithm: AlgorithmChecks) -> None:
        for value in _cluster_sizes(parameter):
            try:
                algorithm.check(self.trial_spec({CLUSTER_SIZE: value}))
            except InvalidInputError as exc:
                raise InvalidInputError(
                    f"ranges.{CLUSTER_SIZE}: {value!r} is not allowed: {exc}"
                ) from None

    def trial_spec(
        self, config: Mapping[str, object], start_from: StartFrom | None = None
    ) -> TrainingJobSpec:
        """The training job of one trial: its configuration over the base job, validated;
        `start_from`: another trial's checkpoint it goes on from (PBT)."""
        hyperparameters = {k: v for k, v in config.items() if k != CLUSTER_SIZE}
        raw = self.training.model_dump()
        raw["hyperparameters"] = {**raw["hyperparameters"], **hyperparameters}
        if CLUSTER_SIZE in config:
            raw["instance_count"] = config[CLUSTER_SIZE]
        if start_from is not None:
            raw["checkpoint"]["start_from"] = start_from.model_dump()
        if self.hyperband is not None and self.hyperband.placement is RungPlacement.RUNGS:
            raw["cluster"]["capacity"] = CapacityPlan.SPOT  # until it is promoted
        try:
            return TrainingJobSpec.model_validate(raw)
        except ValidationError as exc:
            raise InvalidInputError(describe_validation_error(exc)) from None

    @property
    def max_instance_count(self) -> int:
        """The most workers one trial can ask for."""
        sizes = self.ranges.get(CLUSTER_SIZE)
        if sizes is None:
            return self.training.instance_count
        return max(_cluster_sizes(sizes))

    @property
    def max_task_count(self) -> int:
        """The most processes one trial runs: its workers, and a parameter-server job's
        chief and servers (TensorFlow)."""
        return self.max_instance_count + self.training.task_count - self.training.instance_count


def _cluster_sizes(parameter: Range) -> list[int]:
    values = _extremes(parameter)
    sizes = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if len(sizes) != len(values):
        raise InvalidInputError(
            f"ranges.{CLUSTER_SIZE}: cluster sizes are whole numbers (got {values})"
        )
    return sizes


def _extremes(parameter: Range) -> list[object]:
    if isinstance(parameter, CategoricalRange):
        return list(parameter.values)
    return [parameter.min_value, parameter.max_value]
