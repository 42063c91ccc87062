from __future__ import annotations

from pathlib import Path

import pytest

from scaletune.errors import InvalidInputError
from scaletune.spec import (
    AlgorithmName,
    BuiltinDataset,
    ChannelName,
    ShardingMode,
    load_training_spec,
    training_spec_from_dict,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _write(tmp_path: Path, text: str) -> Path:
    file = tmp_path / "job.toml"
    file.write_text(text)
    return file


def _csv_job(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "train.csv").write_text("1,0.5\n0,0.1\n")
    return _write(
        tmp_path, f'algorithm = "xgboost"\n{extra}\n[channels.train]\npath = "train.csv"\n'
    )


def test_reference_example_loads_with_typed_values(bank_marketing_file: Path) -> None:
    spec = load_training_spec(EXAMPLES / "xgboost-bank-marketing.toml")
    assert spec.algorithm == AlgorithmName.XGBOOST
    assert spec.instance_count == 3
    assert spec.hyperparameters["num_round"] == 150
    train = spec.channels[ChannelName.TRAIN]
    assert train.dataset is BuiltinDataset.BANK_MARKETING
    assert train.dataset_file == bank_marketing_file.resolve()
    assert spec.sharding(ChannelName.TRAIN) is ShardingMode.SHARDED
    assert spec.sharding(ChannelName.VALIDATION) is ShardingMode.REPLICATED


def test_overrides_take_toml_values_and_dotted_keys(tmp_path: Path) -> None:
    spec = load_training_spec(
        _csv_job(tmp_path),
        [
            "instance_count=2",
            "hyperparameters.eta=0.1",
            "hyperparameters.eval_metric=['auc']",
            "distribution.strategy=allreduce",
            "name=my-job",
        ],
    )
    assert spec.instance_count == 2
    assert spec.hyperparameters == {"eta": 0.1, "eval_metric": ["auc"]}
    assert spec.name == "my-job"


def test_relative_paths_are_relative_to_the_job_file(tmp_path: Path) -> None:
    spec = load_training_spec(_csv_job(tmp_path))
    assert spec.channels[ChannelName.TRAIN].path == (tmp_path / "train.csv").resolve()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["colour=blue"], "unknown key 'colour'"),
        (["hyperparameters.etta=0.1"], "unknown key 'hyperparameters.etta'"),
        (["instance_count='three'"], "instance_count: Input should be a valid integer"),
        (
            ["instance_count=0"],
            "instance_count: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            ["algorithm=catboost"],
            "algorithm 'catboost': not a built-in (xgboost, dnn, lightgbm, script) nor one an "
            "installed package adds through the 'scaletune.algorithms' entry points",
        ),
        (["hyperparameters.eta=2"], "hyperparameters.eta: Input should be less than or equal to 1"),
        (
            ["hyperparameters.tree_method=exact", "instance_count=3"],
            "tree_method='exact' does not support distributed training (instance_count=3)",
        ),
        (["hyperparameters.objective='multi:softmax'"], "needs hyperparameters.num_class"),
        (["hyperparameters.eval_metric=bogus"], "unknown evaluation metric 'bogus'"),
        (["distribution.strategy=parameter_server"], "xgboost trains with 'allreduce'"),
        (["max_runtime_seconds=-1"], "max_runtime_seconds: Input should be greater than 0"),
        (["name='bad name!'"], "name: use 1-48 letters"),
        (["channels.train.path=nowhere.csv"], "does not exist or cannot be read"),
        (["channels.train.dataset=breast-cancer"], "give exactly one of 'path' or 'dataset'"),
        (["instance_count={min=3, max=2}"], "instance_count: min=3 is more than max=2"),
        (["instance_count={min=0, max=2}"], "instance_count.min=0: from 1 to 256 workers"),
        (["instance_count={min=2}"], "instance_count.max=None: give a whole number of workers"),
        (["instance_count={min=1, max=2, most=4}"], "a range has 'min' and 'max', not ['most']"),
        (
            ["instance_count={min=1, max=2}", "checkpoint.enabled=false"],
            "an elastic job resizes from a checkpoint, so checkpoint.enabled must be true",
        ),
        (["cluster.capacity=preemptible"], "cluster.capacity: Input should be 'on-demand'"),
        (["cluster.capacity=mixed"], "cluster.capacity='mixed' puts an elastic job's min"),
        (
            ["cluster.prices={on_demand=1, spot=-0.3}"],
            "cluster.prices.spot: Input should be greater than or equal to 0 (got -0.3)",
        ),
        (["cluster.prices={spot=0.3}"], "cluster.prices.on_demand"),
        (["cluster.notice_seconds=0"], "cluster.notice_seconds: Input should be greater than 0"),
    ],
)
def test_bad_values_are_refused_on_one_line_naming_them(
    tmp_path: Path, overrides: list[str], expected: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_training_spec(_csv_job(tmp_path), overrides)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message


def test_an_elastic_size_is_a_range_kept_as_its_most_and_fewest(tmp_path: Path) -> None:
    spec = load_training_spec(_csv_job(tmp_path, "instance_count = { min = 2, max = 4 }"))
    assert (spec.instance_count, spec.min_instance_count, spec.min_workers) == (4, 2, 2)
    assert spec.elastic
    stored = spec.model_dump(mode="json")
    assert training_spec_from_dict(stored) == spec  # read back from the store as written
    fixed = load_training_spec(_csv_job(tmp_path, "instance_count = { min = 3, max = 3 }"))
    assert not fixed.elastic and fixed.min_workers == 3


def test_missing_train_channel(tmp_path: Path) -> None:
    file = _write(
        tmp_path, 'algorithm = "xgboost"\n[channels.validation]\ndataset = "breast-cancer"\n'
    )
    with pytest.raises(InvalidInputError, match="missing channel 'train'"):
        load_training_spec(file)


def test_missing_algorithm_and_channels(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="missing key 'algorithm'"):
        load_training_spec(_write(tmp_path, "instance_count = 1\n"))
    # Built-in algorithms need training data; a user's script may read its own.
    with pytest.raises(InvalidInputError, match="channels: missing channel 'train'"):
        load_training_spec(_write(tmp_path, 'algorithm = "xgboost"\n'))
    with pytest.raises(InvalidInputError, match="needs a \\[script\\] table"):
        load_training_spec(_write(tmp_path, 'algorithm = "script"\n'))


def test_unreadable_job_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_training_spec(tmp_path / "absent.toml")
    with pytest.raises(InvalidInputError, match="is not valid TOML"):
        load_training_spec(_write(tmp_path, "algorithm = \n"))


@pytest.mark.parametrize("override", ["noequals", "=1", "a..b=1"])
def test_malformed_overrides(tmp_path: Path, override: str) -> None:
    with pytest.raises(InvalidInputError, match="override"):
        load_training_spec(_csv_job(tmp_path), [override])


def test_override_through_a_non_table(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="'algorithm' is not a table"):
        load_training_spec(_csv_job(tmp_path), ["algorithm.x=1"])


def test_channel_shorthand_is_a_path(tmp_path: Path) -> None:
    (tmp_path / "train.csv").write_text("1,0.5\n0,0.1\n")
    spec = load_training_spec(
        _write(tmp_path, 'algorithm = "xgboost"\n[channels]\ntrain = "train.csv"\n')
    )
    assert spec.channels[ChannelName.TRAIN].path == (tmp_path / "train.csv").resolve()
    replicated = load_training_spec(
        tmp_path / "job.toml", ["channels.train.distribution=replicated"]
    )
    assert replicated.sharding(ChannelName.TRAIN) is ShardingMode.REPLICATED


def test_specs_are_immutable() -> None:
    spec = training_spec_from_dict(
        {"algorithm": "xgboost", "channels": {"train": {"dataset": "breast-cancer"}}}
    )
    with pytest.raises(Exception, match="frozen"):
        spec.instance_count = 4  # type: ignore[misc]
