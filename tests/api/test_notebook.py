"""How jobs look in a notebook: the HTML of a training and a tuning job, the console link
when a console over the same store runs, and one display refreshed at most every
REFRESH_SECONDS while waiting."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from scaletune.api import TrainingJob
from scaletune.api._notebook import MOST_POINTS, REFRESH_SECONDS, LiveDisplay, Polyline
from scaletune.api._tuner import TuningJob
from scaletune.store import (
    JobOutcome,
    JobStatus,
    MetricPoint,
    NewTrainingJob,
    NewTuningJob,
    Store,
    resolve_store,
)


class _Text(HTMLParser):
    """The text a browser would show (styles left out), and the links."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.links: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_style = tag == "style"
        if tag == "a":
            self.links += [value or "" for name, value in attrs if name == "href"]

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False if tag == "style" else self._in_style

    def handle_data(self, data: str) -> None:
        if not self._in_style and data.strip():
            self.text.append(" ".join(data.split()))


def _read(html: str) -> _Text:
    parsed = _Text()
    parsed.feed(html)
    return parsed


def _ended_job(store: Store, job_id: str = "j-1", *, tuning: str | None = None) -> str:
    store.create_training_job(
        NewTrainingJob(
            job_id, None, "xgboost", {}, {"eta": 0.3}, 2, 100.0, "", tuning, trial_number=0
        ),
        [MetricPoint("validation:auc", step, 0.5 + step / 100, 100.0 + step) for step in (1, 2, 3)]
        + [MetricPoint("train:auc", step, 0.9, 100.0 + step) for step in (1, 2, 3)],
    )
    store.finish_training_job(
        job_id,
        JobOutcome(
            JobStatus.COMPLETED, 100.0, 104.0, 4.0, 8.0, {"validation:auc": 0.53, "train:auc": 0.9}
        ),
    )
    return job_id


def test_a_training_job_shows_status_progress_metrics_and_its_validation_curve(
    tmp_path: Path,
) -> None:
    location = resolve_store(tmp_path / "store.db")
    with Store(location.url) as store:
        job = TrainingJob(_ended_job(store), store, location=location, steps=3)
        shown = _read(job._repr_html_())
    text = " ".join(shown.text)
    assert "training job j-1 Completed" in text
    assert "step 3 of 3" in text
    assert "validation:auc 0.53" in text and "train:auc 0.9" in text
    assert "billable 8 worker-seconds" in text
    assert "validation:auc: 0.51 at step 1 to 0.53 at step 3" in text  # the curve's ends
    assert shown.links == []  # no console runs over this store


def test_the_curve_spans_its_box_lowest_value_at_the_bottom() -> None:
    line = Polyline.of([1, 2, 3], [0.2, 0.8, 0.5], "step")
    assert line is not None
    points = [tuple(map(float, p.split(","))) for p in line.points.split()]
    assert points[0][0] == 3.0 and points[-1][0] == line.width - 3  # from edge to edge
    assert points[0][1] == line.height - 3 and points[1][1] == 3.0  # low at the bottom
    assert Polyline.of([1], [0.5], "step") is None  # one point is no curve
    long = Polyline.of(list(range(1, 10_001)), [float(i) for i in range(10_000)], "step")
    assert long is not None and len(long.points.split()) == MOST_POINTS
    assert (long.first_x, long.last_x, long.last) == (1, 10_000, 9999.0)
    assert Polyline.of([1, 2], [float("nan"), 0.5], "step") is None


def test_a_tuning_job_shows_its_counts_best_and_best_so_far(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.create_tuning_job(
            NewTuningJob(
                "t",
                None,
                "Hyperband",
                {"max_jobs": 4, "objective_metric": "loss", "objective_type": "Minimize"},
                1.0,
            )
        )
        for number, (loss, end) in enumerate([(0.5, 10.0), (0.7, 11.0), (0.3, 12.0)]):
            job_id = f"t-{number:03d}"
            store.create_training_job(
                NewTrainingJob(job_id, None, "xgboost", {}, {}, 1, 1.0, "", "t", number)
            )
            store.finish_training_job(
                job_id, JobOutcome(JobStatus.COMPLETED, 1.0, end, 1.0, 1.0, {"loss": loss})
            )
            store.set_trial_result(job_id, loss, 10)
        html = TuningJob("t", store)._repr_html_()
    text = " ".join(_read(html).text)
    assert "trials 3 of 4; 3 Completed" in text
    # minimised: the best so far goes 0.5, 0.5, 0.3 over the three trials ended
    assert "best loss so far: 0.5 at trial 1 to 0.3 at trial 3" in text


def test_a_console_over_the_same_store_is_linked_while_it_runs(tmp_path: Path) -> None:
    location = resolve_store(tmp_path / "store.db")
    other = resolve_store(tmp_path / "other" / "store.db")
    with Store(location.url) as store:
        job = TrainingJob(_ended_job(store), store, location=location)
        with location.announce_console("http://127.0.0.1:8470/?token=abc"):
            assert _read(job._repr_html_()).links == ["http://127.0.0.1:8470/jobs/j-1?token=abc"]
            assert other.console_url() is None  # another store's job links to no console
        assert _read(job._repr_html_()).links == []  # the console ended: no link
        # a console killed without cleaning up: its pid is gone, so no link either
        dead = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            check=True,
        )
        (location.home / "console.json").write_text(
            f'{{"url": "http://127.0.0.1:1/", "pid": {dead.stdout.strip()}, '
            f'"store": "{location.url}"}}'
        )
        assert location.console_url() is None


def test_the_console_file_is_the_users_alone(tmp_path: Path) -> None:
    location = resolve_store(tmp_path / "store.db")
    with location.announce_console("http://127.0.0.1:8470/?token=secret"):
        mode = (location.home / "console.json").stat().st_mode & 0o777
        assert mode == 0o600
        assert location.console_url() == "http://127.0.0.1:8470/?token=secret"
    assert not (location.home / "console.json").exists()


def test_a_live_display_redraws_at_most_every_refresh_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from IPython import display

    shown: list[str] = []

    class Handle:
        def update(self, html: object) -> None:
            shown.append(str(getattr(html, "data", html)))

    monkeypatch.setattr(display, "display", lambda html, display_id: Handle())
    now = [0.0]
    frames = iter(range(100))
    live = LiveDisplay(lambda: f"frame {next(frames)}", clock=lambda: now[0])
    for moment in (0.1, 0.2, REFRESH_SECONDS + 0.01, REFRESH_SECONDS + 0.1):
        now[0] = moment
        live.refresh()
    live.refresh(force=True)
    assert shown == ["frame 1", "frame 2"]
