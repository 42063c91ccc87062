"""A script that knows nothing of scaletune: it only prints its metrics, one line per epoch.
The job file's metric_definitions read them from rank 0's output (the reference's way)."""

from __future__ import annotations

import argparse
import math
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--rate", type=float, default=0.3)  # how fast the loss falls
    parser.add_argument("--seconds", type=float, default=0.0)  # per epoch, to look busy
    args = parser.parse_args()
    rank = os.environ.get("RANK", "0")
    for epoch in range(1, args.epochs + 1):
        time.sleep(args.seconds)
        loss = math.exp(-args.rate * epoch) + 0.05
        print(f"[rank {rank}] epoch={epoch} loss={loss:.5f} score={1 - loss:.5f}", flush=True)


if __name__ == "__main__":
    main()
