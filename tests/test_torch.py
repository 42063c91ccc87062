"""scaletune.torch's AdaScale wrapper: its gain from hand-computed norms in one process, the
optimiser's own rates left as they were, and a real 2-worker DDP script that uses it; and
`agreed` and `leave_group` (a stop agreed on, the end of a distributed script) on two real
ranks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as functional

from scaletune.algorithms.dnn import GradientNoiseScale
from scaletune.api import Session
from scaletune.gradient_noise import NormPool
from scaletune.spec import load_training_spec
from scaletune.store import JobStatus
from scaletune.torch import AdaScale, MicroBatchNorms, agreed, leave_group
from tests.cli.test_cli import EXAMPLES
from tests.jobs import run_job


def _gradient(model: torch.nn.Module, features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    model.zero_grad()
    functional.cross_entropy(model(features), labels).backward()  # type: ignore[no-untyped-call]
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


def test_adascale_steps_at_the_gain_of_its_micro_batches_and_keeps_the_rate() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    features, labels = torch.randn(8, 4), torch.randint(0, 3, (8,))
    halves = [slice(0, 4), slice(4, 8)]
    first, second = (_gradient(model, features[h], labels[h]) for h in halves)
    expected = GradientNoiseScale(1, 2)
    averaged = (first + second) / 2
    mean_sq = float(first.pow(2).sum() + second.pow(2).sum()) / 2
    expected.update(mean_sq, float(averaged.pow(2).sum()))
    assert expected.gain > 1.0

    before = torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])
    optimizer = AdaScale(torch.optim.SGD(model.parameters(), lr=0.1), model, accumulation_steps=2)
    assert optimizer.scale == 2 and optimizer.gain == 1.0
    optimizer.zero_grad()
    for rows in halves:  # each micro-batch's loss divided by the count, as usual
        loss = functional.cross_entropy(model(features[rows]), labels[rows]) / 2
        loss.backward()  # type: ignore[no-untyped-call]
    gain = optimizer.step()
    assert gain == pytest.approx(expected.gain, rel=1e-5)
    assert optimizer.progress == pytest.approx(gain)
    assert optimizer.optimizer.param_groups[0]["lr"] == 0.1  # the group's own rate is kept
    after = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    torch.testing.assert_close(after, before - 0.1 * gain * averaged, rtol=1e-5, atol=1e-7)
    restored = AdaScale(torch.optim.SGD(model.parameters(), lr=0.1), model, accumulation_steps=2)
    restored.load_state_dict(optimizer.state_dict())
    assert (restored.progress, restored.gain) == (optimizer.progress, optimizer.gain)
    optimizer.close()
    restored.close()


def test_one_process_without_accumulation_steps_at_its_own_rate() -> None:
    model = torch.nn.Linear(2, 1)
    optimizer = AdaScale(torch.optim.SGD(model.parameters(), lr=0.1), model)
    model(torch.ones(1, 2)).sum().backward()
    assert optimizer.step() == 1.0 and optimizer.progress == 1.0


def test_the_gain_is_estimated_every_few_steps_from_each_step_measured_and_held_between() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    optimizer = AdaScale(
        torch.optim.SGD(model.parameters(), lr=0.1), model, accumulation_steps=2, measure_every=3
    )
    watch = MicroBatchNorms(model, micro_batches=2)  # each step's own norms, beside it
    watch.active = True
    gains, measured = [], []
    for _ in range(8):
        optimizer.zero_grad()
        for _ in range(2):
            features, labels = torch.randn(4, 4), torch.randint(0, 3, (4,))
            (functional.cross_entropy(model(features), labels) / 2).backward()  # type: ignore[no-untyped-call]
        measured.append(watch.take())
        gains.append(optimizer.step())
    watch.close()
    assert gains[0] == gains[1] == gains[2] and gains[3] == gains[4] == gains[5]
    assert len({gains[0], gains[3], gains[6]}) == 3  # each estimate moved it
    # Estimated at steps 0, 3 and 6, each from every step since the last: 1, 3, 3 of them.
    expected = GradientNoiseScale(1, 2)
    for span in (measured[0:1], measured[1:4], measured[4:7]):
        expected.add(NormPool(sum(m[0] for m in span), sum(m[1] for m in span), len(span)))
    assert optimizer.gain == pytest.approx(expected.gain)
    # Step 7 is measured and waits in the pool, which the state keeps.
    state = optimizer.state_dict()
    assert state["pooled"] == pytest.approx((*measured[7], 1))
    resumed = AdaScale(
        torch.optim.SGD(model.parameters(), lr=0.1), model, accumulation_steps=2, measure_every=3
    )
    optimizer.close()
    resumed.load_state_dict(state)
    assert resumed.state_dict()["pooled"] == state["pooled"] and resumed.gain == optimizer.gain
    resumed.close()
    with pytest.raises(ValueError, match="measure_every=0 must be at least 1"):
        AdaScale(torch.optim.SGD(model.parameters(), lr=0.1), model, measure_every=0)


def test_a_ddp_script_with_adascale_runs_on_two_workers(session: Session) -> None:
    spec = load_training_spec(EXAMPLES / "script-ddp-adascale.toml", ["hyperparameters.epochs=3"])
    record = run_job(session, spec)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    steps = [p.step for p in session.store.metrics(record.id, "validation:accuracy")]
    assert steps == [1, 2, 3]  # one worker's epochs of progress
    gains = [p.value for p in session.store.metrics(record.id, "adascale:gain")]
    assert all(1.0 <= gain <= 2.0 for gain in gains) and max(gains) > 1.05
    assert record.final_metrics["validation:accuracy"] > 0.85
    assert (Path(record.artifact or "") / "model.pt").exists()


LEAVING = """
import sys
import torch.distributed as dist
from scaletune.torch import agreed, leave_group
rank = int(sys.argv[2])
dist.init_process_group("gloo", init_method=sys.argv[1], rank=rank, world_size=2)
# A stop one rank learnt of is every rank's; none learnt of is no rank's.
print(agreed(rank == 1), agreed(False), end=" ")
print("before", end="")  # no newline: flushed by leave_group, not by a line's end
leave_group()
print("after")
"""


def test_leave_group_ends_each_rank_at_once_with_its_output_flushed(tmp_path: Path) -> None:
    """Two real ranks: they agree on a stop only one was told of, each prints, leaves (exit 0,
    its output all there) and runs nothing past it. Without a process group it returns."""
    script = tmp_path / "leaving.py"
    script.write_text(LEAVING)
    init = f"file://{tmp_path / 'rendezvous'}"
    ranks = [
        subprocess.Popen(
            [sys.executable, str(script), init, str(rank)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    for rank in ranks:
        out, err = rank.communicate(timeout=120)
        assert (rank.returncode, out) == (0, "True False before"), err
    leave_group()  # this test's process has no group: it goes on
    assert agreed(True) and not agreed(False)  # nor does `agreed` need one
