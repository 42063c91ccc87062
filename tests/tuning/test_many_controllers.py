"""Several tuning controllers on one PostgreSQL store at once, with readers beside them: each
tuning job completes with each of its trials once and each report once, no deadlock."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from scaletune.analysis import summarize
from scaletune.simulation import simulate_tuning
from scaletune.store import COMMAND_PATIENCE, JobStatus, Store, TuningJobRecord
from tests.postgres import PostgresServer, postgres_server  # noqa: F401  (a fixture)
from tests.simulated import RisingCurves
from tests.tuning.test_lease import MAX_JOBS, _spec

pytestmark = pytest.mark.postgres
CONTROLLERS = 3


def test_three_controllers_and_a_reader_share_one_store(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    url = postgres_server.url
    Store(url).close()  # the schema, once
    done = threading.Event()
    records: list[TuningJobRecord] = []
    errors: list[BaseException] = []
    reads = Counter[str]()

    def control(seed: int) -> None:
        try:
            with Store(url) as store:  # a controller's own connections, as in a process
                spec = _spec().model_copy(update={"seed": seed})
                records.append(simulate_tuning(spec, RisingCurves(), store, start_time=1e9))
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        with Store(url, COMMAND_PATIENCE) as store:
            while not done.is_set():
                for tuning in store.list_tuning_jobs():
                    summarize(store, tuning.id, trade_offs=False)
                    reads["summaries"] += 1
                store.list_training_jobs(limit=50)

    reader = threading.Thread(target=read)
    reader.start()
    controllers = [threading.Thread(target=control, args=(seed,)) for seed in range(CONTROLLERS)]
    for thread in controllers:
        thread.start()
    for thread in controllers:
        thread.join(300)
    done.set()
    reader.join(60)
    assert errors == []
    assert reads["summaries"] > 0
    assert [r.status for r in records] == [JobStatus.COMPLETED] * CONTROLLERS
    with Store(url) as store:
        for record in records:
            trials = store.training_jobs_of(record.id)
            assert sorted(t.trial_number or 0 for t in trials) == list(range(MAX_JOBS))
            for trial in trials:
                steps = Counter(p.step for p in store.metrics(trial.id, "accuracy"))
                assert set(steps.values()) == {1}  # each report once
                assert sorted(steps) == list(range(1, max(steps) + 1))  # none lost
