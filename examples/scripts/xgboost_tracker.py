"""Distributed XGBoost by hand: the script joins the tracker scaletune started (DMLC_*
variables) and trains on its own shard of the channel scaletune prepared.

Resuming: every 5 rounds rank 0 saves the booster into $SCALETUNE_CHECKPOINT_DIR and calls
scaletune.checkpoint(round); a retried job finds it there and trains only the rounds left."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import xgboost as xgb
from xgboost import collective

import scaletune


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_round", type=int, default=20)
    parser.add_argument("--eta", type=float, default=0.3)
    parser.add_argument("--max_depth", type=int, default=4)
    args = parser.parse_args()
    world = int(os.environ.get("WORLD_SIZE", 1))
    tracker = (
        {
            "dmlc_tracker_uri": os.environ["DMLC_TRACKER_URI"],
            "dmlc_tracker_port": int(os.environ["DMLC_TRACKER_PORT"]),
            "dmlc_task_id": os.environ["DMLC_TASK_ID"],
            # A collective stuck this long on a peer fails; scaletune retries the attempt.
            "dmlc_timeout": int(float(os.environ.get("SCALETUNE_COLLECTIVE_TIMEOUT_SECONDS", 300))),
        }
        if world > 1
        else None
    )

    def matrix(channel: str) -> xgb.DMatrix:
        folder = Path(os.environ[f"SCALETUNE_CHANNEL_{channel.upper()}"])
        return xgb.DMatrix(np.load(folder / "features.npy"), label=np.load(folder / "labels.npy"))

    rank = int(os.environ.get("RANK", 0))
    folder = os.environ.get("SCALETUNE_CHECKPOINT_DIR")  # unset when run alone
    saved = Path(folder, "booster.ubj") if folder else None
    resumed = xgb.Booster(model_file=str(saved)) if saved is not None and saved.exists() else None
    done = resumed.num_boosted_rounds() if resumed is not None else 0

    class Report(xgb.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):  # type: ignore[no-untyped-def]
            rounds = model.num_boosted_rounds()  # counts the resumed rounds too
            scaletune.report(rounds, **{"validation:auc": evals_log["validation"]["auc"][-1]})
            if saved is not None and rounds % 5 == 0:
                if rank == 0:
                    model.save_model(saved)
                scaletune.checkpoint(rounds)
            return False

    params = {
        "objective": "binary:logistic",
        "eval_metric": "auc",
        "eta": args.eta,
        "max_depth": args.max_depth,
        "tree_method": "hist",
        "nthread": 1,
    }
    context = collective.CommunicatorContext(**tracker) if tracker else None
    if context is not None:
        context.__enter__()
    try:
        train, valid = matrix("train"), matrix("validation")
        booster = xgb.train(
            params,
            train,
            args.num_round - done,
            evals=[(valid, "validation")],
            xgb_model=resumed,
            verbose_eval=False,
            callbacks=[Report()],
        )
    finally:
        if context is not None:
            context.__exit__(None, None, None)
    if rank == 0:
        booster.save_model(Path(os.environ.get("SCALETUNE_MODEL_DIR", ".")) / "model.json")


if __name__ == "__main__":
    main()
