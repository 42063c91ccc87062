"""A PostgreSQL server of one test's own, on loopback, that the test may stop, start again on
the same port, and cut connections of: the store's outages, for real."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from scaletune.cluster import free_port


def _pg_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if found:
        return found[-1].parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


class PostgresServer:
    def __init__(self, folder: Path) -> None:
        binaries = _pg_bin()
        if binaries is None:
            if os.environ.get("SCALETUNE_REQUIRE_POSTGRES"):
                pytest.fail("SCALETUNE_REQUIRE_POSTGRES is set but no PostgreSQL is installed")
            pytest.skip("no PostgreSQL installed (scripts/test-postgres.sh installs it)")
        self._bin = binaries
        self._folder = folder
        self._data = folder / "data"
        # Below the ephemeral range, which outgoing connections take their source ports
        # from: the port stays free through initdb and between a restart's stop and start.
        self.port = free_port()
        if os.getuid() == 0:  # the server refuses to run as root
            shutil.chown(folder, "postgres")
        self._run("initdb", "-D", str(self._data), "-U", "scaletune", "--auth=trust", "-E", "UTF8")
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "scaletune", "test")
        self.url = f"postgresql://scaletune@127.0.0.1:{self.port}/test"

    def start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self._folder} -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self._data), "-l", str(self._folder / "log"), "-w", "-o", options,
            "start",
        )  # fmt: skip

    def stop(self) -> None:
        """As an operator restarting it would: open connections are closed."""
        self._run("pg_ctl", "-D", str(self._data), "-m", "fast", "-w", "stop")

    def terminate_connections(self, where: str = "true") -> int:
        """`pg_terminate_backend` on the store's connections matching `where` (a condition
        on pg_stat_activity); how many."""
        engine = create_engine(self.url.replace("postgresql://", "postgresql+psycopg://"))
        try:
            with engine.connect() as conn:
                return int(
                    conn.execute(
                        text(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            f"WHERE datname = 'test' AND pid <> pg_backend_pid() AND {where}"
                        )
                    ).scalar_one()
                )
        finally:
            engine.dispose()

    def close(self) -> None:
        self._run("pg_ctl", "-D", str(self._data), "-m", "immediate", "stop", check=False)

    def _run(self, tool: str, *args: str, check: bool = True) -> None:
        command = [str(self._bin / tool), *args]
        if os.getuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True)
        if check and done.returncode:
            raise AssertionError(f"{tool} failed ({done.returncode}): {done.stderr.strip()}")


@pytest.fixture
def postgres_server() -> Iterator[PostgresServer]:
    # Under /tmp itself: the server's user cannot enter pytest's folders (0700, of root).
    folder = Path(tempfile.mkdtemp(prefix="scaletune-pg-", dir="/tmp"))
    server = None
    try:
        server = PostgresServer(folder)
        yield server
    finally:
        if server is not None:
            server.close()
        shutil.rmtree(folder, ignore_errors=True)
