"""FoldedNorms: the noise measurement carried in DDP's own all-reduce, checked against
gradients computed by hand, on two real DDP processes (gloo)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as functional

from scaletune.cluster import free_port

WORLD = 2


def _model() -> torch.nn.Module:
    """Wide enough (1.4 MB of parameters) that DDP's buckets, once it rebuilds them after the
    first pass, are several: the sum must take every one."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 40_000))


def _batch(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(rank)
    return torch.randn(5, 6, generator=generator), torch.randint(0, 3, (5,), generator=generator)


def _gradient(model: torch.nn.Module, rank: int) -> torch.Tensor:
    features, labels = _batch(rank)
    model.zero_grad()
    functional.cross_entropy(model(features), labels).backward()  # type: ignore[no-untyped-call]
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


# (measured, estimated) of each pass: the last estimate pools the two passes before it.
PASSES = [(True, True), (False, False), (True, False), (True, True)]


def rank_main(rank: int, port: int, out: Path) -> None:
    """One DDP worker (run as its own interpreter): four passes, measured or not, saved to
    `out`; the first has one bucket, the later ones several."""
    from scaletune.torch import FoldedNorms

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=WORLD,
        timeout=timedelta(seconds=30),
    )
    try:
        net = _model()
        # Buckets of a few hundred bytes: a bucket a parameter once DDP rebuilds them.
        ddp = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.0002)
        norms = FoldedNorms()
        norms.register(ddp)
        passes = []
        for measuring, estimating in PASSES:
            norms.measuring, norms.estimating = measuring, estimating
            averaged = _gradient(ddp, rank)
            pooled = norms.end_update()
            passes.append((measuring, averaged, None if pooled is None else pooled.state))
        torch.save(passes, out)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_each_workers_squared_norm_is_summed_in_ddps_last_bucket_and_grads_are_untouched(
    tmp_path: Path,
) -> None:
    port = free_port()
    code = "import sys; from tests.test_torch_folded import rank_main as m; "
    code += "from pathlib import Path; m(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))"
    outs = [tmp_path / f"rank-{rank}.pt" for rank in range(WORLD)]
    scratch = tmp_path / "scratch"  # torch keeps caches in its processes' TMPDIR
    scratch.mkdir()
    environment = {**os.environ, "TMPDIR": str(scratch)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(rank), str(port), str(outs[rank])], env=environment
        )
        for rank in range(WORLD)
    ]
    assert [worker.wait(timeout=120) for worker in workers] == [0] * WORLD
    own = [_gradient(_model(), rank) for rank in range(WORLD)]
    mean = torch.stack(own).mean(dim=0)
    expected_summed = float(sum(g.dot(g) for g in own))
    for out in outs:
        passes = torch.load(out, weights_only=True)
        assert [measuring for measuring, _, _ in passes] == [m for m, _ in PASSES]
        for averaged, _ in zip([p[1] for p in passes], PASSES, strict=True):
            # DDP's average, as without the hook, measured or not, estimated or not.
            torch.testing.assert_close(averaged, mean)
        # Every pass has the same gradients (no step between): the estimates hold one
        # pass's squared norms, then the two measured since, summed.
        assert [pooled is None for _, _, pooled in passes] == [False, True, True, False]
        for (_, _, pooled), count in zip([passes[0], passes[3]], [1, 2], strict=True):
            summed, averaged_sq, updates = pooled
            assert updates == count
            assert summed == pytest.approx(count * expected_summed, rel=1e-5)
            assert averaged_sq == pytest.approx(count * float(mean.dot(mean)), rel=1e-5)


def test_an_estimate_without_an_estimating_pass_is_an_error() -> None:
    from scaletune.torch import FoldedNorms

    norms = FoldedNorms()
    norms.estimating = True
    with pytest.raises(RuntimeError, match="no estimating backward pass"):
        norms.end_update()
