"""Last-value proposals from an Optuna study rebuilt on each fit: the measured alternatives
to scaletune's TPE on arrays (the joint, multivariate TPE; `consider_endpoints`), which the
array model does not offer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scaletune.spec import ObjectiveType, Range, TuningJobSpec
from scaletune.tuning._lastvalue import LastValueSearcher


class OptunaLastValueSearcher(LastValueSearcher):
    def __init__(
        self,
        ranges: Mapping[str, Range],
        objective: ObjectiveType,
        seed: int,
        *,
        sampler_options: Mapping[str, Any],
        **settings: Any,
    ) -> None:
        super().__init__(ranges, objective, seed, **settings)
        self._sampler_options = dict(sampler_options)
        self._study: Any = None

    @classmethod
    def for_spec(
        cls, spec: TuningJobSpec, sampler_options: Mapping[str, Any], **settings: Any
    ) -> OptunaLastValueSearcher:
        """The tuning job's searcher in its place (its ranges, objective and seed)."""
        return cls(
            spec.ranges,
            spec.objective_type,
            spec.seed,
            sampler_options=sampler_options,
            **settings,
        )

    def _ask_model(self) -> dict[str, object]:
        import optuna
        from optuna.samplers import TPESampler
        from optuna.trial import TrialState

        if self._study is None or self._model_is_stale():
            sampler = TPESampler(
                seed=self._fitted(),
                n_startup_trials=0,
                n_ei_candidates=self._candidates,
                **{"multivariate": False, **self._sampler_options},
            )
            self._study = optuna.create_study(
                direction="maximize" if self._maximize else "minimize", sampler=sampler
            )
            self._study.add_trials(
                [
                    optuna.trial.create_trial(
                        params=self._samples(number),
                        distributions=self._distributions,
                        value=value,
                    )
                    for number, (_, value) in self._latest.items()
                ]
            )
        trial = self._study.ask(self._distributions)
        self._study.tell(trial, state=TrialState.FAIL)  # a proposal is not a result
        params: dict[str, object] = trial.params
        return params
