"""The console in real headless Chromium: pages render with no console errors, the tuning
job's charts are drawn, live updates arrive within 3 s and survive a dropped connection, the
Stop button stops a real running job, and the rules of access hold in a browser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from scaletune.store import JobStatus, MetricPoint, Store, TuningJobRecord
from tests.conftest import allow_process_tree, wait_until
from tests.console.browser import CHROMIUM_ARGS, PageErrors, chromium_path, running_console
from tests.console.conftest import add_elastic_job, add_job
from tests.simulated import simulated_tuning

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LIVE_SECONDS = 3.0  # a report written to the store shows within this, without a reload


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        message = "no headless Chromium here: scripts/install-chromium.sh (.ci/run runs it)"
        if os.environ.get("SCALETUNE_REQUIRE_CHROMIUM"):
            pytest.fail(message)
        pytest.skip(message)
    sync_api = pytest.importorskip("playwright.sync_api")
    before = {child.pid for child in psutil.Process().children()}
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        # Playwright's driver, Chromium under it, and the renderers it starts for each page
        # belong to this module, not to the test that happened to open a page
        driver = {child.pid for child in psutil.Process().children()} - before
        with allow_process_tree(driver):
            yield chromium
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    opened = context.new_page()
    opened.set_default_timeout(20_000)
    yield opened
    context.close()


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[tuple[str, Store, TuningJobRecord]]:
    url = f"sqlite:///{tmp_path / 'console.db'}"
    with Store(url) as store:
        yield url, store, simulated_tuning(store, 30)


def _blank_charts(page: Any) -> list[str]:
    """The charts whose canvas has no drawn pixel (importance: no bar)."""
    blank: list[str] = page.evaluate(
        """() => Array.from(document.querySelectorAll('[data-chart]')).filter(node => {
            if (node.dataset.chart === 'importance') return !node.querySelector('.bar');
            const canvas = node.querySelector('canvas');
            if (!canvas) return true;
            const context = canvas.getContext('2d');
            const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
            let drawn = 0;
            for (let i = 3; i < data.length; i += 4) if (data[i] > 0) drawn++;
            return drawn < 200;
        }).map(node => node.dataset.chart)"""
    )
    return blank


def test_every_page_renders_without_errors_and_the_tuning_charts_are_drawn(
    page: Any, stored: tuple[str, Store, TuningJobRecord]
) -> None:
    url, _, tuning = stored
    errors = PageErrors()
    errors.watch(page)
    with running_console(url) as console:
        for path, heading in (
            ("/", "Training jobs"),
            ("/tuning", "Tuning jobs"),
            (f"/jobs/{tuning.id}-001", f"Training job {tuning.id}-001"),
            (f"/compare?jobs={tuning.id}-001,{tuning.id}-002", "Compare 2 job(s)"),
            (f"/tuning/{tuning.id}", f"Tuning job {tuning.id}"),
        ):
            page.goto(console.base + path)
            assert heading in page.inner_text("h1")
            page.wait_for_function(
                "() => Array.from(document.querySelectorAll('[data-chart]'))"
                ".every(n => n.dataset.drawn === '1')"
            )
        charts = page.eval_on_selector_all(
            "[data-chart]", "nodes => nodes.map(n => n.dataset.chart)"
        )
        assert {"curves", "stops", "best", "parallel", "importance", "cluster"} <= set(charts)
        assert _blank_charts(page) == []
        assert page.locator("#trials tbody tr").count() == 30
        page.click("#trials th >> text=Workers")  # sorted by the server, swapped in place
        page.wait_for_function("() => document.querySelector('#trials th a').textContent")
        assert "#trials" and page.url.endswith(f"/tuning/{tuning.id}")
        page.goto(console.base + "/no/such/page")
    assert [e for e in errors.seen if "404" not in e] == []


def test_an_elastic_jobs_workers_over_time_are_drawn(
    page: Any, stored: tuple[str, Store, TuningJobRecord]
) -> None:
    url, store, _ = stored
    job_id = add_elastic_job(store)
    errors = PageErrors()
    errors.watch(page)
    with running_console(url) as console:
        page.goto(f"{console.base}/jobs/{job_id}")
        page.wait_for_function("() => document.querySelector('[data-chart]').dataset.drawn === '1'")
        assert page.locator("[data-panel=workers] canvas").count() == 1
        assert "2 to 4 (elastic)" in page.inner_text("#job-summary")
        assert _blank_charts(page) == []
    assert errors.seen == []


@pytest.mark.serial(timing=True)  # measures a latency
def test_a_report_shows_within_3_s_and_the_page_survives_a_dropped_connection(
    page: Any, stored: tuple[str, Store, TuningJobRecord], tmp_path: Path
) -> None:
    url, store, _ = stored
    job_id = add_job(store, tmp_path, "live-job", log="starting\n")
    store.mark_in_progress(job_id, time.time(), pid=os.getpid(), host="here")
    store.append_metrics(job_id, [MetricPoint("loss", 1, 0.9, time.time())])
    with running_console(url) as console:
        page.goto(f"{console.base}/jobs/{job_id}")
        page.wait_for_selector("#live.on")
        page.wait_for_function(
            "() => document.querySelector('[data-chart]').dataset.points === '1'"
        )
        started = time.monotonic()
        store.append_metrics(job_id, [MetricPoint("loss", 2, 0.7, time.time())])
        page.wait_for_function(
            "() => document.querySelector('[data-chart]').dataset.points === '2'",
            timeout=LIVE_SECONDS * 1000,
        )
        assert time.monotonic() - started <= LIVE_SECONDS
        port = console.base.rsplit(":", 1)[1]
    # the server goes away: the page says so and keeps its content
    page.wait_for_selector("#live.off")
    assert "lost" in page.inner_text("#banner")
    assert page.locator("[data-chart] canvas").count() >= 1
    with running_console(url, "--port", port) as again:
        assert again.base.endswith(f":{port}")
        page.wait_for_selector("#live.on", timeout=15_000)  # reconnected by itself
        store.append_metrics(job_id, [MetricPoint("loss", 3, 0.6, time.time())])
        page.wait_for_function(
            "() => document.querySelector('[data-chart]').dataset.points === '3'",
            timeout=LIVE_SECONDS * 1000 + 2000,
        )
        assert page.is_hidden("#banner")


def _scaletune(command: str, example: str, store: str, *overrides: str) -> Any:
    """`scaletune train|tune EXAMPLE --json` on the store, in a process of its own."""
    settings = [part for override in overrides for part in ("--set", override)]
    job = [command, str(EXAMPLES / example), "--store", store, "--json", *settings]
    return subprocess.Popen(
        [sys.executable, "-m", "scaletune", *job],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_stop_button_stops_a_real_running_job(
    page: Any, stored: tuple[str, Store, TuningJobRecord]
) -> None:
    url, store, _ = stored
    train = _scaletune(
        "train",
        "script-print.toml",
        url,
        "instance_count=2",
        "hyperparameters.epochs=3000",
        "hyperparameters.seconds=0.05",
    )
    try:

        def running() -> bool:
            jobs = store.list_training_jobs(algorithm="script")
            return (
                bool(jobs)
                and jobs[0].status is JobStatus.IN_PROGRESS
                and bool(store.metrics(jobs[0].id))
            )

        wait_until(running, timeout=60)
        job_id = store.list_training_jobs(algorithm="script")[0].id
        with running_console(url) as console:
            page.goto(f"{console.base}/jobs/{job_id}")
            page.wait_for_selector("text=epoch=", timeout=10_000)  # rank 0's log, tailed
            page.once("dialog", lambda dialog: dialog.accept())
            page.click("form.stop button")
            page.wait_for_selector("text=Stop requested")
            wait_until(lambda: store.get_training_job(job_id).status.is_terminal, timeout=30)
            assert store.get_training_job(job_id).status is JobStatus.STOPPED
            page.wait_for_selector("#job-summary .big .status-stopped", timeout=LIVE_SECONDS * 1000)
            assert page.locator("form.stop").count() == 0  # an ended job has no button
        out, _ = train.communicate(timeout=30)
        assert train.returncode == 1  # `train` exits 1 for a job that did not complete
        assert json.loads(out)["status"] == "Stopped"
    finally:
        if train.poll() is None:
            train.kill()
            train.wait()


def test_the_stop_button_stops_a_real_running_tuning_job(
    page: Any, stored: tuple[str, Store, TuningJobRecord]
) -> None:
    url, store, simulated = stored
    # Trials far from done when Stop comes.
    tune = _scaletune("tune", "tuning-script-print.toml", url, "training.hyperparameters.seconds=2")
    try:

        def trials_report() -> bool:
            jobs = [job for job in store.list_tuning_jobs() if job.id != simulated.id]
            trials = store.list_training_jobs(tuning_job_id=jobs[0].id) if jobs else []
            return any(store.metrics(trial.id) for trial in trials)

        wait_until(trials_report, timeout=60)
        (tuning,) = [job for job in store.list_tuning_jobs() if job.id != simulated.id]
        with running_console(url) as console:
            page.goto(f"{console.base}/tuning/{tuning.id}")
            page.once("dialog", lambda dialog: dialog.accept())
            page.click("form.stop button")
            page.wait_for_selector("text=Stop requested")
            wait_until(lambda: store.get_tuning_job(tuning.id).status.is_terminal, timeout=60)
            assert store.get_tuning_job(tuning.id).status is JobStatus.STOPPED
            page.wait_for_selector(
                "#tuning-summary .big .status-stopped", timeout=LIVE_SECONDS * 1000
            )
            assert page.locator("form.stop").count() == 0
        out, _ = tune.communicate(timeout=30)
        assert json.loads(out)["status"] == "Stopped"
        trials = store.list_training_jobs(tuning_job_id=tuning.id)
        assert trials and all(trial.status.is_terminal for trial in trials)  # none left running
        assert all(trial.status is not JobStatus.COMPLETED for trial in trials)
    finally:
        if tune.poll() is None:
            tune.kill()
            tune.wait()


def test_read_only_and_a_token_hold_in_the_browser(
    page: Any, stored: tuple[str, Store, TuningJobRecord], tmp_path: Path
) -> None:
    url, store, tuning = stored
    job_id = add_job(store, tmp_path)  # its log holds <script>: shown as text, never run
    store.mark_in_progress(job_id, time.time(), pid=os.getpid(), host="here")
    dialogs: list[str] = []

    def refuse(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)
    with running_console(url, "--read-only") as console:
        page.goto(f"{console.base}/jobs/{job_id}")
        page.wait_for_selector("pre.log")
        assert '<script>alert("log")</script>' in page.inner_text("pre.log")
        assert page.locator("form.stop").count() == 0 and "read-only" in page.inner_text("header")
        status = page.evaluate(
            """async (url) => (await fetch(url, {method: 'POST', body: new URLSearchParams(
                {csrf_token: document.querySelector('meta[name=csrf-token]').content})})).status""",
            f"/jobs/{job_id}/stop",
        )
        assert status == 403
    assert dialogs == [] and not store.get_training_job(job_id).stop_requested
    with running_console(url, "--host", "0.0.0.0") as console:
        assert "?token=" in console.url
        local = console.base.replace("0.0.0.0", "127.0.0.1").replace("//127.0.0.1", "//127.0.0.1")
        response = page.goto(f"{local}/tuning/{tuning.id}")
        assert response.status == 401
        token = console.url.split("?token=")[1]
        response = page.goto(f"{local}/tuning/{tuning.id}?token={token}")
        assert response.status == 200 and "token" not in page.url  # it moved to a cookie
        assert page.goto(f"{local}/").status == 200
