"""A PyTorch DDP script whose optimiser is wrapped in scaletune's AdaScale: the settings it
was tuned with on one worker (lr 0.05, batch 32) keep their quality on N workers.

Epochs are one worker's: the loop ends once AdaScale's progress (the sum of its gains, in one
worker's updates) reaches `epochs` x one worker's updates per epoch, and reports each time it
crosses one. It runs alone (one process) or as a scaletune job (scaletune sets RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT, as torchrun would, and stages each worker's rows of the
`train` and `validation` channels; run alone, it takes scikit-learn's digits).
"""

from __future__ import annotations

import argparse
import math
import os
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as functional
from ddp_digits import channel, evaluate  # the example beside this one: its rows, its score
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import scaletune
from scaletune.torch import AdaScale, leave_group


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", "--batch_size", type=int, default=32)
    args = parser.parse_args()

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:
        timeout = float(os.environ.get("SCALETUNE_COLLECTIVE_TIMEOUT_SECONDS", 300))
        dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    torch.manual_seed(0)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))

    features, labels = channel("train")  # this worker's rows
    valid_features, valid_labels = channel("validation")
    # The whole channel's rows: scaletune says how many; alone, this worker has them all.
    total_rows = int(os.environ.get("SCALETUNE_CHANNEL_TRAIN_TOTAL_ROWS", len(labels)))
    one_worker_updates_per_epoch = math.ceil(total_rows / args.batch_size)

    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = AdaScale(torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9), model)
    wrapped = DistributedDataParallel(model) if world > 1 else model
    target = args.epochs * one_worker_updates_per_epoch
    reported, updates, passes = 0, 0, 0
    while optimizer.progress < target:
        passes += 1
        shuffled = torch.from_numpy(np.random.default_rng(passes).permutation(len(labels)))
        # Every rank takes the same number of steps: the smallest shard's.
        steps = total_rows // world // args.batch_size
        for step in range(steps):
            rows = shuffled[step * args.batch_size : (step + 1) * args.batch_size]
            loss = functional.cross_entropy(wrapped(features[rows]), labels[rows])
            optimizer.zero_grad()
            loss.backward()
            gain = optimizer.step()
            updates += 1
            epoch = min(int(optimizer.progress // one_worker_updates_per_epoch), args.epochs)
            if epoch > reported:  # at the same update on every rank: their gains agree
                reported = epoch
                accuracy = evaluate(model, valid_features, valid_labels)
                if rank == 0:
                    print(f"epoch {epoch}: accuracy {accuracy:.4f}, gain {gain:.2f}", flush=True)
                    scaletune.report(
                        epoch,
                        **{
                            "validation:accuracy": accuracy,
                            "adascale:gain": gain,
                            "train:updates": float(updates),
                        },
                    )
            if optimizer.progress >= target:
                break
    if rank == 0:
        out = Path(os.environ.get("SCALETUNE_MODEL_DIR", "."))
        torch.save(model.state_dict(), out / "model.pt")
    optimizer.close()
    # Every rank reaches the end before the group goes, and the process leaves without
    # Python's shutdown, which Gloo's threads can abort (see leave_group).
    leave_group()


if __name__ == "__main__":
    main()
