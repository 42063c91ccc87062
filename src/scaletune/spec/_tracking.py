"""Where a job is recorded besides the store: an MLflow tracking server, TensorBoard files."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import Field, StrictBool

from scaletune.spec._frozen import Frozen

MLFLOW_URI_VARIABLE = "SCALETUNE_MLFLOW_TRACKING_URI"
DEFAULT_MLFLOW_EXPERIMENT = "scaletune"


class TrackingSpec(Frozen):
    """`[tracking]`: a training job's, or a tuning job's (then its trials' too)."""

    mlflow: str | None = Field(
        default=None,
        min_length=1,
        description="an MLflow tracking URI (http://host:port, a folder, sqlite:///file.db); "
        f"unset: ${MLFLOW_URI_VARIABLE}, else none",
    )
    mlflow_experiment: str = Field(default=DEFAULT_MLFLOW_EXPERIMENT, min_length=1, max_length=500)
    # true: event files in the job's own folder (when TensorBoard is installed); a folder:
    # there, one sub-folder a job (a tuning job's trials under its own); false: none.
    tensorboard: Annotated[StrictBool | Path, Field(union_mode="left_to_right")] = True

    def mlflow_uri(self, environ: Mapping[str, str] = os.environ) -> str | None:
        """The tracking URI: the spec's, else the environment's (an empty value: none)."""
        return self.mlflow or environ.get(MLFLOW_URI_VARIABLE) or None
