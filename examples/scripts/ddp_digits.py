"""A plain PyTorch DDP training script: it runs alone (one process) or as a scaletune job.

scaletune starts it once per worker with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set,
as torchrun would, and hyperparameters as --name value arguments. Metrics go through
scaletune.report(), which does nothing when the script runs alone.

Resuming: each epoch, rank 0 writes its state into $SCALETUNE_CHECKPOINT_DIR and every rank
calls scaletune.checkpoint(epoch) (rank 0's call saves the folder). When a worker dies, the
job is retried, and every rank finds that state back in its folder and goes on from there.

Stopping: scaletune asks a script to end with SIGTERM (a stop, a tuner's verdict, a worker's
machine given a preemption notice). `scaletune.StopRequest` turns it into a flag; the ranks
agree on it at each epoch's end, after its checkpoint, and leave together: a job that goes
on (a notice, a resize) does so from that epoch, nothing done twice.
"""

from __future__ import annotations

import argparse
import os
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as functional
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import scaletune
from scaletune.torch import agreed, leave_group


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", "--batch_size", type=int, default=32)
    args = parser.parse_args()

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:
        # env:// (MASTER_ADDR, MASTER_PORT from scaletune); a peer stuck this long fails the
        # collective, and scaletune retries the attempt from its checkpoint.
        timeout = float(os.environ.get("SCALETUNE_COLLECTIVE_TIMEOUT_SECONDS", 300))
        dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    torch.manual_seed(0)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))

    digits = load_digits()
    features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    labels = torch.tensor(digits.target)
    order = np.random.default_rng(0).permutation(len(labels))
    train, valid = order[:1400], order[1400:]
    shard = train[rank::world]  # this worker's rows

    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    folder = os.environ.get("SCALETUNE_CHECKPOINT_DIR")  # unset when run alone
    state_file = Path(folder, "state.pt") if folder else None
    first_epoch = 1
    if state_file is not None and state_file.exists():  # a retry: go on where it left off
        state = torch.load(state_file)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first_epoch = state["epoch"] + 1
    # An elastic job starts the script again at each resize: WORLD_SIZE is the new size.
    print(f"rank {rank} of {world}, from epoch {first_epoch}", flush=True)
    wrapped = DistributedDataParallel(model) if world > 1 else model
    stop = scaletune.StopRequest()  # scaletune's SIGTERM, read at each epoch's end
    for epoch in range(first_epoch, args.epochs + 1):
        shuffled = np.random.default_rng(epoch).permutation(shard)
        for start in range(0, len(shuffled), args.batch_size):
            rows = torch.from_numpy(shuffled[start : start + args.batch_size])
            loss = functional.cross_entropy(wrapped(features[rows]), labels[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            with torch.no_grad():
                accuracy = (model(features[valid]).argmax(1) == labels[valid]).float().mean()
            print(f"epoch {epoch}: validation accuracy {float(accuracy):.4f}", flush=True)
            scaletune.report(epoch, **{"validation:accuracy": float(accuracy)})
        if state_file is not None and rank == 0:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
            torch.save({**state, "epoch": epoch}, state_file)
        scaletune.checkpoint(epoch)  # rank 0 saves the folder; the others return at once
        if agreed(stop.requested):  # asked to end: this epoch is saved, every rank leaves
            break
    if rank == 0:
        out = Path(os.environ.get("SCALETUNE_MODEL_DIR", "."))
        torch.save(model.state_dict(), out / "model.pt")
    # Every rank reaches the end before the group goes, and the process leaves without
    # Python's shutdown, which Gloo's threads can abort (see leave_group).
    leave_group()


if __name__ == "__main__":
    main()
