"""Where a job is recorded besides the store: an MLflow tracking server, TensorBoard files."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated

from pydantic import Field, StrictBool, field_validator

from scaletune.spec._frozen import Frozen

MLFLOW_URI_VARIABLE = "SCALETUNE_MLFLOW_TRACKING_URI"
DEFAULT_MLFLOW_EXPERIMENT = "scaletune"
# The schemes MLflow's own tracking stores take ("" and file: a folder); a database's may name
# its driver (postgresql+psycopg2). Plugins add theirs through an entry-point group.
MLFLOW_SCHEMES = {"", "file", "http", "https", "databricks", "databricks-uc", "uc"}
MLFLOW_DATABASES = {"sqlite", "postgresql", "mysql", "mssql"}
MLFLOW_PLUGIN_GROUP = "mlflow.tracking_store"


def mlflow_uri_problem(uri: str) -> str | None:
    """Why MLflow could not track to `uri`, or None: its scheme is one MLflow has a store
    for. Found without importing MLflow, so a job file is checked as it is read."""
    scheme = urllib.parse.urlparse(uri).scheme.lower()
    if scheme.split("+")[0] in MLFLOW_DATABASES or scheme in MLFLOW_SCHEMES:
        return None
    if scheme in {entry.name for entry in entry_points(group=MLFLOW_PLUGIN_GROUP)}:
        return None
    known = sorted(MLFLOW_SCHEMES - {""} | MLFLOW_DATABASES)
    return (
        f"MLflow has no tracking store for {scheme}:// URIs; give a folder, or a URI of "
        f"{', '.join(f'{name}://' for name in known)}"
    )


class TrackingSpec(Frozen):
    """`[tracking]`: a training job's, or a tuning job's (then its trials' too)."""

    mlflow: str | None = Field(
        default=None,
        min_length=1,
        description="an MLflow tracking URI (http://host:port, sqlite:///file.db; a folder "
        "where MLFLOW_ALLOW_FILE_STORE=true lets MLflow 3 keep one); "
        f"unset: ${MLFLOW_URI_VARIABLE}, else none",
    )
    mlflow_experiment: str = Field(default=DEFAULT_MLFLOW_EXPERIMENT, min_length=1, max_length=500)
    # true: event files in the job's own folder (when TensorBoard is installed); a folder:
    # there, one sub-folder a job (a tuning job's trials under its own); false: none.
    tensorboard: Annotated[StrictBool | Path, Field(union_mode="left_to_right")] = True

    @field_validator("mlflow")
    @classmethod
    def _a_uri_mlflow_takes(cls, uri: str | None) -> str | None:
        problem = None if uri is None else mlflow_uri_problem(uri)
        if problem is not None:
            raise ValueError(problem)
        return uri

    def mlflow_uri(self, environ: Mapping[str, str] = os.environ) -> str | None:
        """The tracking URI: the spec's, else the environment's (an empty value: none)."""
        return self.mlflow or environ.get(MLFLOW_URI_VARIABLE) or None
