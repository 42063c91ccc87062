"""A plain PyTorch DDP training script: it runs alone (one process) or as a scaletune job.

scaletune starts it once per worker with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set,
as torchrun would, and hyperparameters as --name value arguments. Each worker reads its own
rows of the job's `train` and `validation` channels from the folders scaletune staged them in
(SCALETUNE_CHANNEL_TRAIN, ...); run alone, it takes scikit-learn's digits. Metrics go through
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
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import scaletune
from scaletune.torch import agreed, leave_group


def channel(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """This worker's rows of a channel (features, labels): its shard as scaletune staged it,
    or, run alone, scikit-learn's digits (train: the first 1,400 images; validation: the rest)."""
    folder = os.environ.get(f"SCALETUNE_CHANNEL_{name.upper()}")
    if folder is not None:
        features, labels = (np.load(Path(folder, f"{part}.npy")) for part in ("features", "labels"))
    else:
        from sklearn.datasets import load_digits  # a second's import: only when run alone

        digits = load_digits()
        rows = slice(None, 1400) if name == "train" else slice(1400, None)
        features, labels = digits.data[rows] / 16.0, digits.target[rows]
    return torch.tensor(features, dtype=torch.float32), torch.tensor(labels, dtype=torch.long)


def evaluate(model: nn.Module, features: torch.Tensor, labels: torch.Tensor) -> float:
    """Accuracy over every worker's validation rows (each rank scores its own, then the counts
    are summed): call it on every rank at the same point."""
    with torch.no_grad():
        correct = (model(features).argmax(1) == labels).sum()
    counts = torch.tensor([float(correct), float(len(labels))])
    if dist.is_initialized():
        dist.all_reduce(counts)
    return float(counts[0] / counts[1])


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

    features, labels = channel("train")  # this worker's rows
    valid_features, valid_labels = channel("validation")
    # Every rank takes the same number of steps an epoch, the fewest any rank has: an extra
    # one on one rank alone would wait forever in DDP's all-reduce.
    batches = torch.tensor([len(labels) // args.batch_size])
    if world > 1:
        dist.all_reduce(batches, op=dist.ReduceOp.MIN)

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
        shuffled = torch.from_numpy(np.random.default_rng(epoch).permutation(len(labels)))
        for batch in range(int(batches)):
            rows = shuffled[batch * args.batch_size : (batch + 1) * args.batch_size]
            loss = functional.cross_entropy(wrapped(features[rows]), labels[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        accuracy = evaluate(model, valid_features, valid_labels)
        if rank == 0:
            print(f"epoch {epoch}: validation accuracy {accuracy:.4f}", flush=True)
            scaletune.report(epoch, **{"validation:accuracy": accuracy})
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
