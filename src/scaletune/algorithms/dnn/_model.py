"""The networks, and the saved form of a trained one (weights plus what rebuilds it)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from ._hyperparameters import Architecture, DNNHyperparameters

WEIGHTS_FILE = "model.pt"
CONFIG_FILE = "model-config.json"


@dataclass(frozen=True)
class ModelConfig:
    architecture: Architecture
    n_features: int
    num_classes: int
    hidden_units: int

    @classmethod
    def for_job(cls, hyperparameters: DNNHyperparameters, n_features: int) -> ModelConfig:
        assert hyperparameters.num_classes is not None  # filled in from the data
        return cls(
            hyperparameters.model,
            n_features,
            hyperparameters.num_classes,
            hyperparameters.hidden_units,
        )

    @property
    def image_side(self) -> int:
        """The CNN reads each row as a square single-channel image."""
        return math.isqrt(self.n_features)


def image_side_of(n_features: int) -> int | None:
    side = math.isqrt(n_features)
    return side if side * side == n_features else None


def build_model(config: ModelConfig, seed: int) -> nn.Module:
    """The same seed gives the same initial weights in every process."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        if config.architecture is Architecture.MLP:
            return nn.Sequential(
                nn.Linear(config.n_features, config.hidden_units),
                nn.ReLU(),
                nn.Linear(config.hidden_units, config.num_classes),
            )
        side = config.image_side
        pooled = side // 2 // 2
        return nn.Sequential(
            nn.Unflatten(1, (1, side, side)),
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * pooled * pooled, config.num_classes),
        )
    finally:
        torch.random.set_rng_state(generator_state)


def save_model(model: nn.Module, config: ModelConfig, folder: Path) -> None:
    torch.save(model.state_dict(), folder / WEIGHTS_FILE)
    (folder / CONFIG_FILE).write_text(json.dumps(asdict(config), indent=2))


def load_model(folder: Path) -> nn.Module:
    """Rebuild a trained classifier from a job's model folder (its artifact)."""
    raw = json.loads((folder / CONFIG_FILE).read_text())
    config = ModelConfig(
        Architecture(raw["architecture"]),
        raw["n_features"],
        raw["num_classes"],
        raw["hidden_units"],
    )
    model = build_model(config, seed=0)
    model.load_state_dict(torch.load(folder / WEIGHTS_FILE, weights_only=True))
    model.eval()
    return model
