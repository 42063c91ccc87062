"""The one place where users' text (TOML files, --set overrides, Python dicts) becomes specs."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from scaletune.algorithms import get_algorithm
from scaletune.errors import InvalidInputError
from scaletune.spec._errors import describe_validation_error
from scaletune.spec._training import TrainingJobSpec, is_url
from scaletune.spec._tuning import TuningJobSpec

_PATH_KEYS = ("path", "dataset_file")


def load_training_spec(file: Path | str, overrides: Iterable[str] = ()) -> TrainingJobSpec:
    """Read a TOML job file; relative paths in it are relative to the file's folder."""
    raw = _read_toml(Path(file))
    _expand_channel_shorthand(raw)  # so that --set channels.train.distribution=... works
    for override in overrides:
        apply_override(raw, override)
    return training_spec_from_dict(raw, base_dir=Path(file).resolve().parent)


def load_tuning_spec(file: Path | str, overrides: Iterable[str] = ()) -> TuningJobSpec:
    """Read a TOML tuning file: its [training] table is a training job as in a job file."""
    raw = _read_toml(Path(file))
    if isinstance(raw.get("training"), dict):
        _expand_channel_shorthand(raw["training"])
    for override in overrides:
        apply_override(raw, override)
    return tuning_spec_from_dict(raw, base_dir=Path(file).resolve().parent)


def tuning_spec_from_dict(raw: Mapping[str, Any], base_dir: Path | None = None) -> TuningJobSpec:
    data = dict(raw)
    if isinstance(data.get("training"), dict):
        data["training"] = _resolve_paths(dict(data["training"]), base_dir or Path.cwd())
    _resolve_tracking(data, base_dir or Path.cwd())
    try:
        spec = TuningJobSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidInputError(describe_validation_error(exc)) from None
    spec.check_against(get_algorithm(spec.training.algorithm))
    return spec


def _read_toml(file: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"job file {str(file)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"job file {str(file)!r} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(f"job file {str(file)!r} is not valid TOML: {exc}") from None


def training_spec_from_dict(
    raw: Mapping[str, Any], base_dir: Path | None = None
) -> TrainingJobSpec:
    data = _resolve_paths(dict(raw), base_dir or Path.cwd())
    try:
        spec = TrainingJobSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidInputError(describe_validation_error(exc)) from None
    get_algorithm(spec.algorithm).check(spec)  # what only the algorithm knows, once built
    return spec


def apply_override(raw: dict[str, Any], override: str) -> None:
    """Apply one `dotted.key=value`; the value is read as a TOML literal, else kept as text."""
    key, sep, text = override.partition("=")
    if not sep or not key.strip():
        raise InvalidInputError(f"override {override!r} is not of the form key=value")
    parts = [part.strip() for part in key.split(".")]
    if any(not part for part in parts):
        raise InvalidInputError(f"override key {key!r} has an empty part")
    target = raw
    for part in parts[:-1]:
        child = target.setdefault(part, {})
        if not isinstance(child, dict):
            raise InvalidInputError(f"override key {key!r}: {part!r} is not a table")
        target = child
    target[parts[-1]] = parse_value(text.strip())


def parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _expand_channel_shorthand(raw: dict[str, Any]) -> None:
    """`train = "data/train.csv"` is short for `[channels.train] path = "data/train.csv"`."""
    channels = raw.get("channels")
    if isinstance(channels, dict):
        raw["channels"] = {
            name: {"path": channel} if isinstance(channel, str) else channel
            for name, channel in channels.items()
        }


def _resolve_paths(raw: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    _expand_channel_shorthand(raw)
    channels = raw.get("channels")
    if isinstance(channels, dict):
        resolved = {}
        for name, channel in channels.items():
            if isinstance(channel, dict):
                channel = dict(channel)
                for key in _PATH_KEYS:
                    if isinstance(channel.get(key), str) and not is_url(channel[key]):
                        channel[key] = _absolute(channel[key], base_dir)
            resolved[name] = channel
        raw["channels"] = resolved
    if isinstance(raw.get("output_path"), str):
        raw["output_path"] = _absolute(raw["output_path"], base_dir)
    cluster = raw.get("cluster")
    staging = cluster.get("staging") if isinstance(cluster, dict) else None
    if isinstance(cluster, dict) and isinstance(staging, str) and not is_url(staging):
        raw["cluster"] = {**cluster, "staging": _absolute(staging, base_dir)}
    checkpoint = raw.get("checkpoint")
    target = checkpoint.get("path") if isinstance(checkpoint, dict) else None
    if isinstance(checkpoint, dict) and isinstance(target, str) and not is_url(target):
        raw["checkpoint"] = {**checkpoint, "path": _absolute(target, base_dir)}
    script = raw.get("script")
    if isinstance(script, dict):
        script = dict(script)
        source_dir = script.get("source_dir")
        if source_dir is None:  # the job file's folder, like every other relative path
            script["source_dir"] = base_dir
        elif isinstance(source_dir, str):
            script["source_dir"] = _absolute(source_dir, base_dir)
        raw["script"] = script
    _resolve_tracking(raw, base_dir)
    return raw


def _resolve_tracking(raw: dict[str, Any], base_dir: Path) -> None:
    """A TensorBoard folder is relative to the job file, like every other path."""
    tracking = raw.get("tracking")
    folder = tracking.get("tensorboard") if isinstance(tracking, dict) else None
    if isinstance(tracking, dict) and isinstance(folder, str):
        raw["tracking"] = {**tracking, "tensorboard": _absolute(folder, base_dir)}


def _absolute(value: str, base_dir: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else (base_dir / path).resolve()
