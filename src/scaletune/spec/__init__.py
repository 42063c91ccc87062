"""Typed, validated, immutable descriptions of jobs, and the loader that builds them."""

from scaletune.spec._loader import (
    apply_override,
    describe_validation_error,
    load_training_spec,
    load_tuning_spec,
    parse_value,
    training_spec_from_dict,
    tuning_spec_from_dict,
)
from scaletune.spec._ranges import (
    CategoricalRange,
    ContinuousRange,
    IntegerRange,
    ObjectiveType,
    ParameterRange,
    Range,
    Scaling,
)
from scaletune.spec._training import (
    AlgorithmName,
    BuiltinDataset,
    ChannelName,
    ChannelSpec,
    DistributionSpec,
    DistributionStrategy,
    HyperparameterValue,
    ShardingMode,
    SyncMode,
    TrainingJobSpec,
)
from scaletune.spec._tuning import EarlyStopping, HyperbandSpec, Strategy, TuningJobSpec

__all__ = [
    "AlgorithmName",
    "BuiltinDataset",
    "CategoricalRange",
    "ChannelName",
    "ChannelSpec",
    "ContinuousRange",
    "DistributionSpec",
    "DistributionStrategy",
    "EarlyStopping",
    "HyperbandSpec",
    "HyperparameterValue",
    "IntegerRange",
    "ObjectiveType",
    "ParameterRange",
    "Range",
    "Scaling",
    "ShardingMode",
    "Strategy",
    "SyncMode",
    "TrainingJobSpec",
    "TuningJobSpec",
    "apply_override",
    "describe_validation_error",
    "load_training_spec",
    "load_tuning_spec",
    "parse_value",
    "training_spec_from_dict",
    "tuning_spec_from_dict",
]
