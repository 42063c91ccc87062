"""AdaScale for your own PyTorch scripts: wrap the optimiser of a DDP (or single-process,
gradient-accumulating) training loop, and settings found on one worker keep their quality on
N, as the built-in classifier's `lr_scaling = "adascale"` does.

    from scaletune.torch import AdaScale
    model = DistributedDataParallel(net)
    optimizer = AdaScale(torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9), net)
    while optimizer.progress < epochs * one_worker_updates_per_epoch:
        loss = functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # at lr x gain; progress grows by the gain

Each step takes the learning rate the optimiser's groups hold (set them from `progress`, one
worker's updates, to schedule in one worker's terms) times AdaScale's gain r in [1, S], S
the gradients of one worker's batch averaged per step (workers x accumulated micro-batches).
The gain comes from each micro-batch's own gradient (a hook on each parameter, before DDP
averages it) and the averaged one (`.grad`), measured on every step, plus one all-reduce of
one number on every `measure_every`-th step, which estimates the gain from the steps since
the last (every step by default; with a larger one the steps between take the last gain). With
accumulation, divide each micro-batch's loss by `accumulation_steps`, as usual.

`MicroBatchNorms` is that measurement, which the built-in classifier uses too where a worker
accumulates micro-batches; with one micro-batch a worker under DDP it uses `FoldedNorms`, which
needs no collective of its own. `agreed` is how a DDP script's ranks agree on a stop
(`scaletune.StopRequest`) before they act on it, and `leave_group` how they end."""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.hooks import RemovableHandle

from scaletune.gradient_noise import ADASCALE_ESTIMATE_EVERY, GradientNoiseScale, NormPool


class MicroBatchNorms:
    """The squared norms the gradient noise estimates need, measured beside training.

    A hook on each parameter sees the gradient of one backward pass before it is accumulated into
    `.grad` (and, under DDP, before it is all-reduced): the gradient of one micro-batch on this
    worker. The averaged gradient is `.grad` after the last micro-batch's backward, the same on
    every rank. So a measurement costs one squared norm per micro-batch and one of `.grad`, plus,
    with several workers, one all-reduce of a single number; DDP's overlap of communication with
    the backward pass is kept.
    """

    def __init__(self, model: nn.Module, micro_batches: int) -> None:
        # Each micro-batch's loss is divided by their count, so that their gradients sum to
        # the mean: its own gradient is m times what the hook sees.
        self._scale = float(micro_batches) ** 2
        self._sum = torch.zeros((), dtype=torch.float64)
        self._parameters = [p for p in model.parameters() if p.requires_grad]
        self.pool = NormPool()
        # The hooks are on the parameters only while measuring: a backward pass that is not
        # measured calls none (a hook that returns at once still costs a call per tensor).
        self._handles: list[RemovableHandle] = []

    @property
    def active(self) -> bool:
        """Whether the coming backward passes are measured."""
        return bool(self._handles)

    @active.setter
    def active(self, measuring: bool) -> None:
        if measuring and not self._handles:
            self._handles = [
                p.register_hook(self._add)  # type: ignore[no-untyped-call]  # untyped in torch
                for p in self._parameters
            ]
        elif not measuring:
            self.close()

    def _add(self, grad: torch.Tensor) -> None:
        self._sum += _squared_norm(grad)

    def take(self) -> tuple[float, float]:
        """This worker's micro-batch gradients' squared norms summed, and the averaged
        gradient's squared norm; the sum starts again from zero."""
        local = float(self._sum) * self._scale
        self._sum.zero_()
        averaged = sum(_squared_norm(p.grad) for p in self._parameters if p.grad is not None)
        return local, averaged

    def end_update(self, estimate: bool, world_size: int = 1) -> NormPool | None:
        """After an update's backward passes: a measured update goes into the pool; where
        the gain is estimated, the pool is taken, its `local` summed over the `world_size`
        workers (one all-reduce, which every worker joins at the same update)."""
        if self.active:
            self.pool.add(*self.take())
        if not estimate:
            return None
        pooled = self.pool.take()
        if world_size > 1:
            summed = torch.tensor([pooled.local], dtype=torch.float64)
            dist.all_reduce(summed)
            pooled.local = float(summed[0])
        return pooled

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


class FoldedNorms:
    """The same measurement where each worker's update is one micro-batch, under DDP, with no
    collective of its own: a communication hook takes each bucket's squared norm before its
    all-reduce (the bucket holds this worker's own gradient then), and the last bucket of the
    backward pass carries their sum in one more element, summed over the workers with it.

    `register(ddp)` once; before each update's backward pass set `measuring` (take its
    squared norms) and `estimating` (its last bucket carries the pool's, summed over the
    workers); after it, `end_update()`."""

    def __init__(self) -> None:
        self.measuring = False
        self.estimating = False
        self.pool = NormPool()
        self._local = 0.0  # this backward pass's buckets so far
        self._summed: float | None = None
        # Its buckets: after the pass each holds its share of the averaged gradient, whose
        # squared norm is then a dot product a bucket (not one a parameter).
        self._buckets: list[torch.Tensor] = []

    def register(self, ddp: nn.parallel.DistributedDataParallel) -> None:
        # DDP reads the hook's annotations as objects, which this module's are not (postponed
        # annotations): it gets a hook without any, its arguments named as DDP wants.
        ddp.register_comm_hook(None, lambda state, bucket: self._hook(bucket))

    def _hook(self, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        buffer = bucket.buffer()
        if self.measuring:
            self._local += _squared_norm(buffer)  # before DDP's own hook divides it in place
            self._buckets.append(buffer)  # averaged in place by the all-reduce
        if not (self.estimating and bucket.is_last()):
            averaged: torch.futures.Future[torch.Tensor] = allreduce_hook(None, bucket)  # type: ignore[arg-type]  # None: the default group
            return averaged
        world_size = dist.get_world_size()
        pooled = self.pool.local + self._local
        extended = torch.cat([buffer / world_size, buffer.new_tensor([pooled])])

        def split(future: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
            reduced = future.value()[0]
            self._summed = float(reduced[-1])
            buffer.copy_(reduced[:-1])
            return buffer

        reduced: torch.futures.Future[torch.Tensor] = (
            dist.all_reduce(extended, async_op=True).get_future().then(split)
        )
        return reduced

    def end_update(self) -> NormPool | None:
        """After an update's backward pass: a measured update goes into the pool; an
        estimating one takes the pool, its `local` summed over the workers."""
        if self.measuring:
            averaged = sum(_squared_norm(buffer) for buffer in self._buckets)
            self.pool.add(self._local, averaged)
            self._local, self._buckets = 0.0, []
        if not self.estimating:
            return None
        summed, self._summed = self._summed, None
        if summed is None:
            raise RuntimeError("no estimating backward pass since the last end_update()")
        pooled = self.pool.take()
        pooled.local = summed
        return pooled


def _squared_norm(tensor: torch.Tensor) -> float:
    """A dot product in float32 at least (half-precision gradients are widened), summed by the
    caller in float64: as exact as float64 squares, at a fraction of their cost."""
    flat = tensor.detach().reshape(-1)
    if flat.dtype in (torch.float16, torch.bfloat16):
        flat = flat.float()
    return float(torch.dot(flat, flat))


class AdaScale:
    """An optimiser's steps at AdaScale's gain; `progress` counts one worker's updates."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        model: nn.Module,
        *,
        accumulation_steps: int = 1,
        world_size: int | None = None,
        measure_every: int = ADASCALE_ESTIMATE_EVERY,
    ) -> None:
        """`model`: the network whose parameters `optimizer` steps (the DDP module or the
        one it wraps); `world_size`: the process group's, by default; `measure_every`: the
        steps between estimates of the gain (1: every step). Every step is measured; the
        steps since the last estimate are pooled, and the steps between take the last gain."""
        if accumulation_steps < 1:
            raise ValueError(f"accumulation_steps={accumulation_steps} must be at least 1")
        if measure_every < 1:
            raise ValueError(f"measure_every={measure_every} must be at least 1")
        if world_size is None:
            world_size = dist.get_world_size() if dist.is_initialized() else 1
        self.optimizer = optimizer
        self._world_size = world_size
        self._scale = world_size * accumulation_steps
        # The gain depends on the batch sizes' ratio alone: one micro-batch is the unit.
        self._noise = GradientNoiseScale(1, self._scale) if self._scale > 1 else None
        self._norms = MicroBatchNorms(model, accumulation_steps) if self._noise else None
        self._every = measure_every
        self._steps = 0
        if self._norms is not None:
            self._norms.active = True  # every step is measured
        self.progress = 0.0  # one worker's updates made: the sum of the gains

    @property
    def scale(self) -> int:
        """S: one worker's gradients averaged per step."""
        return self._scale

    @property
    def gain(self) -> float:
        """AdaScale's r from the latest estimates (1 before the first step, or with S = 1)."""
        return 1.0 if self._noise is None else self._noise.gain

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> float:
        """Measures this step's gradients and, on every `measure_every`-th step (the first
        included), estimates the gain from the steps measured since the last; steps at
        lr x gain (the groups' own rates are left as they were) and returns the gain. Every
        rank estimates at the same steps: each takes part in the estimate's all-reduce."""
        if self._noise is not None and self._norms is not None:
            estimate = self._steps % self._every == 0
            pooled = self._norms.end_update(estimate, self._world_size)
            if pooled is not None:
                self._noise.add(pooled)
        gain = self.gain
        rates = [group["lr"] for group in self.optimizer.param_groups]
        for group in self.optimizer.param_groups:
            group["lr"] = group["lr"] * gain
        try:
            self.optimizer.step()
        finally:
            for group, rate in zip(self.optimizer.param_groups, rates, strict=True):
                group["lr"] = rate
        self.progress += gain
        self._steps += 1
        return gain

    def state_dict(self) -> dict[str, Any]:
        """This rank's state. With `measure_every` above 1 it holds this rank's own
        measurements since the last estimate: save and load each rank's to resume exactly."""
        noise = self._noise
        return {
            "optimizer": self.optimizer.state_dict(),
            "progress": self.progress,
            "estimates": None if noise is None else noise.estimates,
            "steps": self._steps,  # where the estimating schedule is
            "pooled": None if self._norms is None else self._norms.pool.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.progress = float(state["progress"])
        if self._noise is not None:
            self._noise.restore(state.get("estimates"))
        self._steps = int(state.get("steps", 0))  # a state from before sampling: 0
        if self._norms is not None:
            self._norms.pool.restore(state.get("pooled"))

    def close(self) -> None:
        """Removes the hooks from the model's parameters."""
        if self._norms is not None:
            self._norms.close()


def agreed(flag: bool) -> bool:
    """Whether any rank's `flag` is set (one all-reduce of one number over the default
    process group; the flag itself without one). Ranks learn of a stop at different moments
    (each gets its own SIGTERM): agreeing first, they all save and leave at the same step,
    and none waits alone in the next collective. Call it on every rank at the same step."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    backend = dist.get_backend()
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else None
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item() > 0)


def leave_group() -> None:
    """The end of a distributed PyTorch script, on every rank: once all have reached it, the
    process group ends and the process exits at once (code 0, stdout and stderr flushed),
    without Python's shutdown. Gloo's threads may still be releasing the last collective's
    tensors, which takes the GIL; a thread that asks for it while Python shuts down aborts
    the process ("terminate called without an active exception", pytorch/pytorch#179291).
    Without a process group (one process) it returns."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    dist.barrier()  # every rank is done with the group before any tears it down
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
