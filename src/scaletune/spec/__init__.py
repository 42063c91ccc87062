"""Typed, validated, immutable descriptions of jobs, and the loader that builds them."""

from scaletune.spec._loader import (
    apply_override,
    describe_validation_error,
    load_training_spec,
    parse_value,
    training_spec_from_dict,
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

__all__ = [
    "AlgorithmName",
    "BuiltinDataset",
    "ChannelName",
    "ChannelSpec",
    "DistributionSpec",
    "DistributionStrategy",
    "HyperparameterValue",
    "ShardingMode",
    "SyncMode",
    "TrainingJobSpec",
    "apply_override",
    "describe_validation_error",
    "load_training_spec",
    "parse_value",
    "training_spec_from_dict",
]
