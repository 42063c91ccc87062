"""`scaletune console` at the command line: bad input is one line and exit code 2, before
anything listens; a store that cannot be read while it runs is an event pages show."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from scaletune.errors import StoreError
from scaletune.store import Store
from tests.console.conftest import client


def _console(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaletune", "console", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_store_that_cannot_be_opened_is_one_line_exit_2_or_3_when_unreachable(
    tmp_path: Path,
) -> None:
    (tmp_path / "not-a-folder").write_text("a file where a folder should be")
    for store, named, code, said in (
        (str(tmp_path / "not-a-folder" / "x.db"), "not-a-folder", 2, "error: cannot"),
        (  # no server there: a store that may come back, exit code 3
            "postgresql+psycopg://scaletune@127.0.0.1:1/nothing",
            "127.0.0.1:1",
            3,
            "error: store 'postgresql+psycopg://scaletune@127.0.0.1:1/nothing' is unreachable",
        ),
    ):
        done = _console("--store", store, "--port", "0")
        assert done.returncode == code, done.stderr
        assert done.stderr.startswith(said) and named in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_port_in_use_is_named_with_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _console("--store", str(tmp_path / "s.db"), "--port", str(port))
    assert done.returncode == 2
    assert f"--port {port}: is in use" in done.stderr and "Traceback" not in done.stderr
    bad = _console("--store", str(tmp_path / "s.db"), "--port", "70000")
    assert bad.returncode == 2 and "--port 70000" in bad.stderr


def test_a_store_that_fails_while_pages_are_open_is_an_event_they_show(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_: object) -> None:
        raise StoreError("cannot reach the database server at db.example:5432")

    # On the class: a live page asks through a store of its own that does not wait.
    monkeypatch.setattr(type(store.browse), "change_mark", broken)
    with client(store).stream("GET", "/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        assert next(lines) == "retry: 2000"
        seen = [next(lines) for _ in range(3)]
    assert "event: store-error" in seen
    assert "data: cannot reach the database server at db.example:5432" in seen
    monkeypatch.undo()
    page = client(store).get("/", headers={"accept": "text/html"})
    assert page.status_code == 200
