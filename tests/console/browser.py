"""Headless Chromium (Debian's, driven by Playwright: nothing downloaded) and the console as
the command line starts it, for the browser tests and the console benchmark."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    return next(
        (found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))),
        None,
    )


@dataclass
class RunningConsole:
    process: subprocess.Popen[str]
    url: str  # as printed: with ?token=... when it has one

    @property
    def base(self) -> str:
        return self.url.split("?")[0].rstrip("/")


@contextlib.contextmanager
def running_console(store_url: str, *args: str) -> Iterator[RunningConsole]:
    """`scaletune console --port 0 ...` in a process of its own, until the block ends."""
    process = subprocess.Popen(
        [sys.executable, "-m", "scaletune", "console", "--store", store_url, "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"http://\S+", line)
        if found is None:
            process.kill()
            raise AssertionError(f"console did not start: {line!r} {process.communicate()[1]}")
        yield RunningConsole(process, found.group(0))
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class PageErrors:
    """Console errors and uncaught exceptions a page raised."""

    seen: list[str] = field(default_factory=list)

    def watch(self, page: Any) -> None:
        page.on(
            "console",
            lambda m: self.seen.append(f"{m.type}: {m.text}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: self.seen.append(f"exception: {e}"))
