"""Pages and data over a simulated tuning job: every page answers, sorting and paging happen
in SQL with failed trials last, unknown ids are 404 pages, bad values 400."""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

from scaletune.store import JobOutcome, JobStatus, NoticeRecord, Store, TuningJobRecord
from tests.console.conftest import add_elastic_job, add_job, client


def test_every_page_answers(store: Store, tuning: TuningJobRecord, tmp_path: Path) -> None:
    job_id = add_job(store, tmp_path)
    trial = f"{tuning.id}-001"
    web = client(store)
    for url in (
        "/",
        "/jobs?status=Completed&algorithm=script",
        f"/?tuning_job={tuning.id}&page=2",
        "/tuning",
        f"/tuning/{tuning.id}",
        f"/jobs/{trial}",
        f"/jobs/{job_id}",
        f"/compare?jobs={trial},{tuning.id}-002",
        f"/compare?jobs={trial}&jobs={job_id}",
    ):
        response = web.get(url)
        assert response.status_code == 200, (url, response.text[-500:])
        assert "text/html" in response.headers["content-type"]


def test_unknown_ids_are_404_pages_and_bad_values_400(
    store: Store, tuning: TuningJobRecord
) -> None:
    web = client(store)
    for url in ("/jobs/no-such-job", "/tuning/no-such-tuning", "/api/jobs/nope/metrics"):
        response = web.get(url)
        assert response.status_code == 404
        assert "no-such" in response.text or "nope" in response.text
    for url, named in (
        ("/?status=Bogus", "Bogus"),
        ("/?page=0", "page"),
        (f"/tuning/{tuning.id}/trials?per_page=501", "per_page"),
        (f"/tuning/{tuning.id}/trials?sort=colour", "colour"),
        (f"/tuning/{tuning.id}/trials?show=some", "some"),
        ("/compare", "jobs"),
    ):
        response = web.get(url)
        assert response.status_code == 400 and named in response.text, url


def test_trials_sort_and_page_in_sql_with_failed_trials_last(
    store: Store, tuning: TuningJobRecord
) -> None:
    failed = f"{tuning.id}-003"
    store.finish_training_job(
        failed,
        JobOutcome(JobStatus.FAILED, 1.0, 2.0, 1.0, 1.0, {}, failure_reason="worker 1 died"),
    )
    store.set_trial_result(failed, None, None)
    web = client(store)
    best_first = _trial_numbers(web.get(f"/tuning/{tuning.id}/trials").text)
    rows = store.trials.rows(tuning.id)
    by_objective = sorted(
        (r for r in rows if r.objective is not None), key=lambda r: -(r.objective or 0)
    )
    assert best_first[:10] == [r.trial_number for r in by_objective[:10]]
    everything = []
    for page in (1, 2):
        url = f"/tuning/{tuning.id}/trials?sort=objective&desc=1&per_page=20&page={page}"
        text = web.get(url).text
        everything += _trial_numbers(text)
    assert sorted(everything) == list(range(30)) and everything[-1] == 3  # failed: last
    only_failed = _trial_numbers(web.get(f"/tuning/{tuning.id}/trials?show=failed").text)
    assert only_failed == [3]
    by_workers = web.get(f"/tuning/{tuning.id}/trials?sort=workers&desc=0").text
    assert "worker 1 died" not in by_workers.split("</tbody>")[0].split("<tr>")[1]


def test_the_trials_csv_has_the_analytics_columns(store: Store, tuning: TuningJobRecord) -> None:
    response = client(store).get(f"/tuning/{tuning.id}/trials.csv")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 30
    assert {"x", "instance_count", "FinalObjectiveValue", "RungsReached"} <= set(rows[0])


def test_chart_data_of_a_tuning_job(store: Store, tuning: TuningJobRecord) -> None:
    charts = client(store).get(f"/api/tuning/{tuning.id}/charts").json()
    assert charts["trials"] == 30
    assert charts["curves"]["rungs"] == [1, 3]
    assert 0 < len(charts["curves"]["series"]) <= 30
    assert charts["curves"]["steps"] == list(range(1, 10))
    assert len(charts["stops"]["points"]) == 30
    best = charts["best"]["best"]
    assert best == sorted(best)  # best-so-far of a maximised objective never falls
    assert len(charts["best"]["billable_seconds"]) == 30
    names = [axis["name"] for axis in charts["parallel"]["axes"]]
    assert names == ["x", "instance_count", "accuracy"]
    assert {p["x"] for p in charts["cluster"]["points"]} == {1, 2, 3}


def test_importance_finds_the_hyperparameter_that_matters(
    store: Store, tuning: TuningJobRecord
) -> None:
    found = client(store).get(f"/api/tuning/{tuning.id}/importance").json()
    # accuracy = x * (1 - e^-step): x is everything, the cluster size nothing
    assert found["trials"] >= 10
    assert found["importances"]["x"] > 0.8 > found["importances"]["instance_count"]


def test_job_metrics_and_comparison(store: Store, tuning: TuningJobRecord) -> None:
    web = client(store)
    trial = f"{tuning.id}-001"
    data = web.get(f"/api/jobs/{trial}/metrics").json()
    metrics = data["metrics"]
    assert data["sizes"] is None  # a fixed size: nothing to draw over time
    points = store.metrics(trial, "accuracy")
    assert metrics["accuracy"]["steps"] == [p.step for p in points]
    compared = web.get(f"/api/compare?jobs={trial},{tuning.id}-002").json()
    assert compared["jobs"] == [trial, f"{tuning.id}-002"]
    assert [s["label"] for s in compared["metrics"]["accuracy"]["series"]] == compared["jobs"]


def test_an_elastic_jobs_page_shows_its_range_and_its_size_over_time(store: Store) -> None:
    job_id = add_elastic_job(store)
    web = client(store)
    data = web.get(f"/api/jobs/{job_id}/metrics").json()
    # Each attempt's size from its start, held to the end of the last.
    assert data["sizes"] == {"seconds": [0.0, 11.0, 26.0, 40.0], "workers": [4.0, 3.0, 4.0, 4.0]}
    page = web.get(f"/jobs/{job_id}").text
    assert "2 to 4 (elastic), 4 in the latest attempt" in page
    assert "resized to 4 workers: room for more" in page and ">resized<" in page


def _trial_numbers(html: str) -> list[int]:
    body = html.split("<tbody>")[1].split("</tbody>")[0]
    numbers = []
    for row in body.split("<tr>")[1:]:
        cell = row.split('<td class="num"><a href="/jobs/')[1]
        numbers.append(int(cell.split(">")[1].split("<")[0]))
    return numbers


def test_the_job_page_says_where_each_attempts_workers_ran(store: Store, tmp_path: Path) -> None:
    job_id = add_job(store, tmp_path)
    store.attempts.start(job_id, 1, 10.0)
    store.attempts.set_workers(job_id, 1, ["10.0.0.7 node 1a2b3c4d", "10.0.0.8 node 9f8e7d6c"])
    store.attempts.end(job_id, 1, status=JobStatus.FAILED, end_time=11.0, reason="node lost")
    store.attempts.start(job_id, 2, 12.0, resumed_from_step=40, steps_redone=3)
    store.attempts.set_workers(job_id, 2, ["10.0.0.8 node 9f8e7d6c", "10.0.0.8 node 9f8e7d6c"])
    page = client(store).get(f"/jobs/{job_id}").text
    # The first attempt on two machines, the retry on the one left (the latest one's ranks).
    assert "1 on 10.0.0.7 node 1a2b3c4d, 1 on 10.0.0.8 node 9f8e7d6c" in page
    assert page.count("2 on 10.0.0.8 node 9f8e7d6c") == 2  # the cluster card and attempt 2
    assert '<ol start="0" class="small"><li>10.0.0.8 node 9f8e7d6c</li>' in page


def test_workers_of_one_machine_are_counted_by_machine_not_by_process() -> None:
    from scaletune.store import AttemptRecord

    attempt = AttemptRecord(1, 0.0, None, JobStatus.IN_PROGRESS, None, False, None, None, None)
    assert attempt.placement is None  # not placed yet
    placed = dataclasses.replace(attempt, workers=("box pid 11", "box pid 12", "other pid 13"))
    assert placed.placement == "2 on box, 1 on other"


def test_the_tuning_page_shows_the_pareto_front_and_the_target(store: Store) -> None:
    from tests.analysis.test_tradeoffs import _grid, _run

    tuning_id = _run(store, _grid(target_objective=0.7, constraints=["wall_seconds <= 6"]))
    page = client(store).get(f"/tuning/{tuning_id}").text
    front = page.split('id="pareto-front"')[1].split("</table>")[0]
    assert "2 completed trial(s) no other beats on every objective" in front
    assert "meet 1 constraint(s)" in front
    assert front.count("<tr>") == 3  # the header, then 2 workers and 3 workers at x = 0.8
    assert f'href="/jobs/{tuning_id}-007"' in front and f'href="/jobs/{tuning_id}-008"' in front
    target = page.split('id="target"')[1].split("</div>")[0]
    assert "reached by 2 trial(s)" in target  # x = 0.8 on 2 or 3 workers (1 is infeasible)
    assert "cheapest" in target and "fastest" in target
    rows = list(
        csv.DictReader(io.StringIO(client(store).get(f"/tuning/{tuning_id}/trials.csv").text))
    )
    assert sorted(r["TrainingJobName"][-3:] for r in rows if r["ParetoFront"] == "True") == [
        "007",
        "008",
    ]


def test_the_tuning_page_says_why_a_completed_job_ended(store: Store) -> None:
    from tests.simulated import simulated_tuning

    record = simulated_tuning(store, 200, completion={"convergence": True})
    page = client(store).get(f"/tuning/{record.id}").text
    reason = page.split('id="completion-reason">')[1].split("</p>")[0]
    assert record.completion_reason is not None
    assert reason == f"ended: {record.completion_reason}"


def test_a_pbt_trials_page_links_the_checkpoint_it_started_from(store: Store) -> None:
    from tests.tuning.test_pbt import _pbt_job, _simulate

    tuning_id = _simulate(store, _pbt_job())
    child = next(
        t for t in store.training_jobs_of(tuning_id) if t.spec["checkpoint"].get("start_from")
    )
    start = child.spec["checkpoint"]["start_from"]
    page = client(store).get(f"/jobs/{child.id}").text
    assert (
        f'<dt>started from</dt><dd><a href="/jobs/{start["job"]}">{start["job"]}</a>\'s '
        f"checkpoint at step {start['step']}</dd>"
    ) in page


def test_the_job_page_shows_billing_per_capacity_class_its_cost_and_its_notices(
    store: Store, tmp_path: Path
) -> None:
    job_id = add_job(store, tmp_path)
    store.attempts.start(job_id, 1, 10.0)
    store.notices.give(job_id, NoticeRecord(1, 1, 30.0, "SIGTERM", 12.0))
    billed = {"on-demand": 20.0, "spot": 40.0}
    outcome = JobOutcome(JobStatus.COMPLETED, 10.0, 40.0, 30.0, 60.0, {}, billable_by_class=billed)
    store.finish_training_job(job_id, outcome)
    page = client(store).get(f"/jobs/{job_id}").text
    assert "<dt>on spot</dt><dd>40 worker-seconds</dd>" in page
    assert "<dt>cost</dt>" not in page  # no prices: worker-seconds alone
    assert "Preemption notices" in page and "<td>SIGTERM</td>" in page
    store.set_prices({"on-demand": 1.0, "spot": 0.25})  # as `scaletune prices` sets them
    page = client(store).get(f"/jobs/{job_id}").text
    assert "<dt>cost</dt><dd>30 (on-demand 20, spot 10)</dd>" in page
