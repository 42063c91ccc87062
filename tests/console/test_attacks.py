"""A small attack suite against a real `scaletune console` process on loopback: raw requests
(no client to tidy them up) for path traversal, oversized and malformed requests, slow
clients and too many live pages; the security headers on every answer; the token kept out
of logs and URLs; every route that changes something refused without its CSRF token."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaletune.console import Access, create_app
from scaletune.store import Store
from tests.conftest import wait_until
from tests.console.browser import RunningConsole, running_console
from tests.console.conftest import add_job, client

TOKEN = "attack-suite-token-0123456789"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[RunningConsole, Store, str]]:
    url = f"sqlite:///{tmp_path / 'console.db'}"
    with Store(url) as store:
        job_id = add_job(store, tmp_path)
        store.mark_in_progress(job_id, time.time(), pid=os.getpid(), host="here")
        (tmp_path / "secret.txt").write_text("root:x:0:0: the secret\n")
        with running_console(url, "--token", TOKEN, "--max-live-pages", "2") as console:
            yield console, store, job_id


def _port(console: RunningConsole) -> int:
    return int(console.base.rsplit(":", 1)[1])


def _raw(port: int, request: bytes, *, read_all: bool = True) -> bytes:
    """Send `request` as given and return what comes back (up to the connection's end)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        received = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return received
            received += chunk
            if not read_all and b"\r\n\r\n" in received:
                return received


def _get(path: str, *, token: bool = True, extra: str = "") -> bytes:
    cookie = f"Cookie: scaletune_console_token={TOKEN}\r\n" if token else ""
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{cookie}{extra}Connection: close\r\n\r\n"
    ).encode()


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def _headers(response: bytes) -> dict[str, str]:
    head = response.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    return {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in head)}


def test_every_answer_carries_the_security_headers(
    served: tuple[RunningConsole, Store, str],
) -> None:
    console, _store, job_id = served
    port = _port(console)
    answers = [
        _raw(port, _get("/")),
        _raw(port, _get("/", token=False)),  # 401
        _raw(port, _get("/no/such/page")),  # 404
        _raw(port, _get(f"/jobs/{job_id}/stop")),  # 405
        _raw(port, _get("/static/console.js")),
        _raw(port, _get(f"/?token={TOKEN}", token=False)),  # 303 to a URL without it
    ]
    assert [_status(a) for a in answers] == [200, 401, 404, 405, 200, 303]
    for answer in answers:
        headers = _headers(answer)
        policy = headers["content-security-policy"]
        script_src = re.search(r"script-src ([^;]*)", policy)
        assert script_src is not None and "unsafe" not in script_src.group(1)
        assert "frame-ancestors 'none'" in policy
        assert headers["x-frame-options"] == "DENY"
        assert headers["referrer-policy"] == "same-origin"
        assert headers["x-content-type-options"] == "nosniff"
        assert "server" not in headers


@pytest.mark.parametrize(
    "path",
    [
        "/static/../../../../../../etc/passwd",
        "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/static/..%2f..%2f..%2f..%2fetc%2fpasswd",
        "/static/%2e%2e%2f%2e%2e%2fsecret.txt",
        "/jobs/..%2f..%2f..%2fsecret.txt/logs/0",
        "/jobs/hand-made/logs/..%2f..%2fsecret.txt",
        "/jobs/hand-made/logs/-1",
        "/jobs/%2e%2e/logs/0",
    ],
)
def test_path_traversal_on_static_and_log_routes_is_refused(
    served: tuple[RunningConsole, Store, str], path: str
) -> None:
    console, _store, _job = served
    answer = _raw(_port(console), _get(path))
    assert _status(answer) in (400, 404)
    assert b"root:" not in answer and b"the secret" not in answer


def test_oversized_and_malformed_requests_are_refused_and_the_console_serves_on(
    served: tuple[RunningConsole, Store, str],
) -> None:
    console, store, job_id = served
    port = _port(console)
    stop = f"/jobs/{job_id}/stop"
    cookie = f"Cookie: scaletune_console_token={TOKEN}\r\n"
    huge = (
        f"POST {stop} HTTP/1.1\r\nHost: 127.0.0.1\r\n{cookie}"
        "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 50000000\r\n\r\n"
    ).encode()
    assert _status(_raw(port, huge, read_all=False)) == 413  # refused before it is sent
    chunked = (
        f"POST {stop} HTTP/1.1\r\nHost: 127.0.0.1\r\n{cookie}Transfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    ).encode()
    assert _status(_raw(port, chunked)) == 411
    assert _status(_raw(port, b"NONSENSE\r\n\r\n")) == 400
    try:  # a header past h11's bound: answered 400 or cut off while it is still sent
        oversized_header = _status(_raw(port, _get("/", extra=f"X-Big: {'a' * 200_000}\r\n")))
    except (ConnectionResetError, BrokenPipeError):
        oversized_header = 400
    assert oversized_header in (400, 431)
    assert _status(_raw(port, _get("/jobs/%zz%00"))) in (400, 404)
    assert _status(_raw(port, _get("/tuning?page=-1&sort=%27;drop"))) in (200, 400)
    assert not store.get_training_job(job_id).stop_requested
    assert _status(_raw(port, _get("/"))) == 200  # it serves on
    assert console.process.poll() is None


def test_the_token_is_never_logged_and_never_left_in_a_url(
    served: tuple[RunningConsole, Store, str],
) -> None:
    console, _store, job_id = served
    port = _port(console)
    given = _raw(port, _get(f"/jobs/{job_id}?token={TOKEN}&x=1", token=False))
    assert _status(given) == 303
    assert TOKEN not in _headers(given)["location"]
    for request in (
        _get(f"/?token={TOKEN}-wrong", token=False),
        _get("/", token=False, extra=f"Authorization: Bearer {TOKEN}\r\n"),
        _get(f"/jobs/{job_id}/logs/0"),
        _get("/no/such/page"),
        b"NONSENSE\r\n\r\n",
    ):
        _raw(port, request)
    page = _raw(port, _get(f"/jobs/{job_id}"))
    assert TOKEN.encode() not in page  # no link or script on a page carries it
    console.process.terminate()
    out, err = console.process.communicate(timeout=10)
    assert TOKEN in console.url  # told once, on the line it printed at start-up
    assert TOKEN not in out + err  # and never again


def test_every_route_that_changes_something_needs_its_csrf_token_and_origin(
    store: Store, tmp_path: Path
) -> None:
    job_id = add_job(store, tmp_path)
    store.mark_in_progress(job_id, 1.0, pid=os.getpid(), host="here")
    access = Access(token=None)
    app = create_app(store, access, allowed_hosts=["127.0.0.1"])
    changing = [
        route.path  # type: ignore[attr-defined]
        for route in app.routes
        if "POST" in (getattr(route, "methods", None) or ())
    ]
    assert len(changing) >= 2  # jobs and tuning jobs are stopped here
    web = client(store, access)
    for template in changing:
        path = re.sub(r"\{[^}]+\}", job_id, template)
        assert web.post(path).status_code == 403, path
        foreign = web.post(
            path, data={"csrf_token": access.csrf_token}, headers={"origin": "http://evil.test"}
        )
        assert foreign.status_code == 403, path
    assert not store.get_training_job(job_id).stop_requested


def _open_stream(port: int) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn.sendall(_get("/events").replace(b"Connection: close\r\n", b""))
    return conn


def _first_events(conn: socket.socket) -> bytes:
    """Up to the stream's first `retry:` line: 2000 ms served, 15000 ms turned away."""
    received = b""
    while re.search(rb"retry: \d+\n\n", received) is None:
        chunk = conn.recv(65536)
        if not chunk:
            break
        received += chunk
    return received


def test_live_pages_past_the_bound_are_told_to_wait_and_a_closed_one_frees_its_slot(
    served: tuple[RunningConsole, Store, str],
) -> None:
    console, store, job_id = served
    port = _port(console)
    first, second = _open_stream(port), _open_stream(port)
    try:
        for conn in (first, second):
            assert b"retry: 2000" in _first_events(conn)
        turned_away = _raw(port, _get("/events"))
        assert _status(turned_away) == 200
        assert b"event: busy" in turned_away and b"at most 2 live pages" in turned_away
        assert b"retry: 15000" in turned_away
        # Pages and the Stop button are served all the while.
        page = _raw(port, _get(f"/jobs/{job_id}"))
        assert _status(page) == 200
        found = re.search(rb'name="csrf_token" value="([^"]+)"', page)
        assert found is not None
        form = b"csrf_token=" + found.group(1)
        stop = (
            f"POST /jobs/{job_id}/stop HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Cookie: scaletune_console_token={TOKEN}\r\nOrigin: http://127.0.0.1:{port}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(form)}\r\nConnection: close\r\n\r\n"
        ).encode()
        assert _status(_raw(port, stop + form)) == 303
        assert store.get_training_job(job_id).stop_requested
    finally:
        first.close()

    def a_slot_is_free() -> bool:
        with _open_stream(port) as conn:
            return b"retry: 2000" in _first_events(conn)

    wait_until(a_slot_is_free, timeout=20)
    second.close()


@pytest.mark.serial(timing=True)  # measures a latency
def test_slow_clients_do_not_hold_up_the_others(
    served: tuple[RunningConsole, Store, str],
) -> None:
    console, _store, _job = served
    port = _port(console)
    stalled = []
    try:
        for _ in range(20):  # each sends half a request, then nothing
            conn = socket.create_connection(("127.0.0.1", port), timeout=10)
            conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            stalled.append(conn)
        began = time.monotonic()
        assert _status(_raw(port, _get("/"))) == 200
        assert time.monotonic() - began < 5
    finally:
        for conn in stalled:
            conn.close()
