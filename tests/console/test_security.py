"""Who may read and who may change: tokens, CSRF, origins, read-only, Host, escaping."""

from __future__ import annotations

import os
import time
from pathlib import Path

from scaletune.console import Access
from scaletune.console._security import TOKEN_COOKIE
from scaletune.store import JobOutcome, JobStatus, NewTuningJob, Store, TuningJobRecord
from tests.console.conftest import add_job, client


def test_a_non_loopback_bind_always_asks_for_a_token_and_loopback_does_not() -> None:
    assert Access.for_bind("127.0.0.1", None, False).token is None
    assert Access.for_bind("::1", None, False).token is None
    remote = Access.for_bind("0.0.0.0", None, False)
    assert remote.token is not None and len(remote.token) >= 32
    assert Access.for_bind("10.1.2.3", "given", False).token == "given"


def test_the_token_is_asked_for_then_kept_in_a_cookie(store: Store) -> None:
    web = client(store, Access(token="s3cret"))
    refused = web.get("/")
    assert refused.status_code == 401 and "token" in refused.text
    assert web.get("/", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert web.get("/?token=s3cre").status_code == 401  # a prefix is not the token
    given = web.get("/tuning?token=s3cret&page=1")
    assert given.status_code == 303 and given.headers["location"] == "/tuning?page=1"
    cookie = given.headers["set-cookie"]
    assert f"{TOKEN_COOKIE}=s3cret" in cookie and "HttpOnly" in cookie
    assert "samesite=strict" in cookie.lower()
    assert web.get("/tuning?page=1").status_code == 200  # the client kept the cookie
    assert (
        client(store, Access(token="s3cret"))
        .get("/", headers={"authorization": "Bearer s3cret"})
        .status_code
        == 200
    )


def test_stop_needs_post_csrf_and_its_own_origin(store: Store, tmp_path: Path) -> None:
    job_id = add_job(store, tmp_path)
    store.mark_in_progress(job_id, 1.0, pid=os.getpid(), host="here")
    access = Access(token=None)
    web = client(store, access)
    url = f"/jobs/{job_id}/stop"
    assert web.get(url).status_code == 405
    assert web.post(url).status_code == 403  # no CSRF token
    assert web.post(url, data={"csrf_token": "forged"}).status_code == 403
    good = {"csrf_token": access.csrf_token}
    forged_origin = web.post(url, data=good, headers={"origin": "http://evil.example"})
    assert forged_origin.status_code == 403
    cross_site = web.post(url, data=good, headers={"sec-fetch-site": "cross-site"})
    assert cross_site.status_code == 403
    assert not store.get_training_job(job_id).stop_requested  # nothing was let through
    done = web.post(
        url, data=good, headers={"origin": "http://127.0.0.1", "sec-fetch-site": "same-origin"}
    )
    assert done.status_code == 303 and done.headers["location"].startswith(f"/jobs/{job_id}")
    assert store.get_training_job(job_id).stop_requested


def test_a_paused_trial_stopped_from_the_console_ends_at_once(store: Store, tmp_path: Path) -> None:
    job_id = add_job(store, tmp_path)
    store.mark_in_progress(job_id, 1.0, pid=1, host="here")
    store.finish_training_job(job_id, _paused_outcome())
    access = Access(token=None)
    response = client(store, access).post(
        f"/jobs/{job_id}/stop", data={"csrf_token": access.csrf_token}
    )
    assert response.status_code == 303
    record = store.get_training_job(job_id)
    assert record.status is JobStatus.STOPPED
    assert "(console)" in (record.failure_reason or "")


def test_read_only_shows_no_button_and_refuses_writes(store: Store, tmp_path: Path) -> None:
    job_id = add_job(store, tmp_path)
    store.mark_in_progress(job_id, 1.0, pid=os.getpid(), host="here")
    writable = client(store, Access(token=None)).get(f"/jobs/{job_id}")
    assert 'action="/jobs/hand-made/stop"' in writable.text
    access = Access(token=None, read_only=True)
    web = client(store, access)
    page = web.get(f"/jobs/{job_id}")
    assert page.status_code == 200 and "/stop" not in page.text and "read-only" in page.text
    refused = web.post(f"/jobs/{job_id}/stop", data={"csrf_token": access.csrf_token})
    assert refused.status_code == 403
    assert not store.get_training_job(job_id).stop_requested


def test_an_unknown_host_header_is_refused(store: Store) -> None:
    # DNS rebinding: a page on evil.example resolving to 127.0.0.1 reads nothing
    assert client(store, host="evil.example").get("/").status_code == 400


def test_log_and_reason_text_is_escaped_and_pages_carry_a_strict_policy(
    store: Store, tmp_path: Path
) -> None:
    job_id = add_job(store, tmp_path)
    web = client(store)
    log = web.get(f"/jobs/{job_id}/logs/0")
    assert "&lt;script&gt;alert(&#34;log&#34;)&lt;/script&gt;" in log.text
    assert "<script>alert" not in log.text and "<b>" not in log.text
    policy = web.get("/").headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert web.get("/").headers["x-frame-options"] == "DENY"


def _paused_outcome() -> JobOutcome:
    return JobOutcome(
        status=JobStatus.PAUSED,
        start_time=1.0,
        end_time=2.0,
        wall_seconds=1.0,
        billable_seconds=2.0,
        final_metrics={},
    )


def test_a_running_tuning_job_is_stopped_from_its_page(
    store: Store, tuning: TuningJobRecord
) -> None:
    running = NewTuningJob("running-tuning", None, "Hyperband", dict(tuning.spec), time.time())
    store.create_tuning_job(running)
    store.mark_tuning_in_progress(running.id, time.time(), pid=os.getpid(), host="here")
    access = Access(token=None)
    web = client(store, access)
    page = web.get(f"/tuning/{running.id}")
    assert f'action="/tuning/{running.id}/stop"' in page.text
    assert web.post(f"/tuning/{running.id}/stop").status_code == 403
    done = web.post(f"/tuning/{running.id}/stop", data={"csrf_token": access.csrf_token})
    assert done.status_code == 303 and store.is_tuning_stop_requested(running.id)
    ended = web.get(f"/tuning/{tuning.id}")  # a tuning job that ended has no button
    assert f"/tuning/{tuning.id}/stop" not in ended.text
