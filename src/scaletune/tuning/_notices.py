"""What a tuning job's settings will do that its user may not expect: one line each, printed
before it runs, never a refusal (the settings are legal, and may be meant)."""

from __future__ import annotations

from scaletune.spec import TuningJobSpec


def notices(spec: TuningJobSpec) -> list[str]:
    """Lines worth reading before the job runs (what its algorithm knows to warn of)."""
    from scaletune.algorithms import get_algorithm

    return get_algorithm(spec.training.algorithm).tuning_notices(spec)
