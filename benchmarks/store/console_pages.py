"""How fast the console's pages paint over a large simulated tuning job (written as a user
writes one, nothing pinned but the sizes: `benchmarks/scale/_user_job.py`), measured in
headless Chromium through the Performance API (first contentful paint, and for the tuning
page also the moment every chart is drawn), the console started as `scaletune console`.

    python -m benchmarks.store.console_pages [--sizes 1000 10000] [--repeats 5]
        [--screenshots docs/console]

Goals (issue 17): on a 10,000-trial tuning job, the tuning page paints within 2 s and a
page of its trials table within 200 ms. Writes benchmarks/results/console_pages.{md,json};
with --screenshots, pictures of the main pages (at the smallest size) for the README."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.console.browser import CHROMIUM_ARGS, chromium_path, running_console

from benchmarks.scale._user_job import UserCurves, user_spec
from scaletune.simulation import simulate_tuning
from scaletune.store import Store

RESULTS = Path(__file__).resolve().parents[1] / "results"
GOALS = {"tuning page": 2.0, "trials page": 0.2}

_PAINT = """() => {
    const paint = performance.getEntriesByName('first-contentful-paint')[0];
    const nav = performance.getEntriesByType('navigation')[0];
    return {fcp: paint ? paint.startTime / 1000 : null, response: nav.responseEnd / 1000};
}"""
_CHARTS_DRAWN = """() => Array.from(document.querySelectorAll('[data-chart]'))
    .every(n => n.dataset.drawn === '1')"""


def measure(page: Any, url: str, repeats: int, charts: bool) -> dict[str, float | None]:
    paints, responses, drawn = [], [], []
    for _ in range(repeats):
        started = time.perf_counter()
        page.goto(url, wait_until="load")
        if charts:
            page.wait_for_function(_CHARTS_DRAWN, timeout=120_000)
            drawn.append(time.perf_counter() - started)
        page.wait_for_timeout(50)  # paint entries are queued after the first frame
        timing = page.evaluate(_PAINT)
        paints.append(timing["fcp"])
        responses.append(timing["response"])
    return {
        "first_paint_s": statistics.median(p for p in paints if p is not None),
        "server_response_s": statistics.median(responses),
        "charts_drawn_s": statistics.median(drawn) if drawn else None,
    }


def one_size(
    browser: Any, size: int, folder: Path, repeats: int, shots: Path | None
) -> dict[str, Any]:
    url = f"sqlite:///{folder / f'console-{size}.db'}"
    started = time.perf_counter()
    with Store(url) as store:
        record = simulate_tuning(user_spec(size), UserCurves(), store, start_time=1e9)
        trials = [job.id for job in store.list_training_jobs(tuning_job_id=record.id, limit=3)]
    simulated = time.perf_counter() - started
    middle_page = max(1, size // 50 // 2)
    pages = {
        "tuning page": (f"/tuning/{record.id}", True),
        "trials page": (
            f"/tuning/{record.id}/trials?sort=objective&desc=1&page={middle_page}",
            False,
        ),
        "jobs page": ("/", False),
        "job page": (f"/jobs/{trials[0]}", True),
    }
    results: dict[str, Any] = {"trials": size, "simulated_s": simulated}
    with running_console(url) as console:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        # the first load builds the charts' data and importance (cached after: the job ended)
        started = time.perf_counter()
        page.goto(console.base + pages["tuning page"][0])
        page.wait_for_function(_CHARTS_DRAWN, timeout=120_000)
        results["cold_charts_drawn_s"] = time.perf_counter() - started
        for name, (path, charts) in pages.items():
            results[name] = measure(page, console.base + path, repeats, charts)
            print(size, name, results[name], file=sys.stderr)
        if shots is not None:
            screenshots(page, console.base, record.id, trials, shots)
        context.close()
    return results


def screenshots(page: Any, base: str, tuning_id: str, trials: list[str], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, path in (
        ("jobs", "/"),
        ("tuning", f"/tuning/{tuning_id}"),
        ("job", f"/jobs/{trials[0]}"),
        ("compare", f"/compare?jobs={','.join(trials)}"),
    ):
        page.goto(base + path)
        page.wait_for_function(_CHARTS_DRAWN, timeout=120_000)
        page.wait_for_timeout(300)
        page.screenshot(path=str(folder / f"console-{name}.png"))


def table(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| trials | page | first contentful paint | server response | every chart drawn | goal |",
        "|---:|---|---:|---:|---:|---|",
    ]
    for result in results:
        for name in ("tuning page", "trials page", "jobs page", "job page"):
            row = result[name]
            goal = GOALS.get(name)
            verdict = ""
            if goal is not None:
                met = row["first_paint_s"] <= goal
                verdict = f"≤ {goal:g} s: {'met' if met else 'NOT met'}"
            drawn = "" if row["charts_drawn_s"] is None else f"{row['charts_drawn_s']:.3f} s"
            lines.append(
                f"| {result['trials']:,} | {name} | {row['first_paint_s']:.3f} s | "
                f"{row['server_response_s']:.3f} s | {drawn} | {verdict} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--screenshots", type=Path, default=None)
    parser.add_argument(
        "--name", default="console_pages", help="results/NAME.md (another run beside)"
    )
    args = parser.parse_args()
    path = chromium_path()
    if path is None:
        sys.exit("no Chromium here: scripts/install-chromium.sh")
    from playwright.sync_api import sync_playwright

    results = []
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        for i, size in enumerate(sorted(args.sizes)):
            shots = args.screenshots if i == 0 else None
            results.append(one_size(browser, size, Path(folder), args.repeats, shots))
        browser.close()
    command = "python -m benchmarks.store.console_pages " + " ".join(sys.argv[1:])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(
        json.dumps({"command": command.strip(), "results": results}, indent=2) + "\n"
    )
    text = [
        "# Console pages over a simulated tuning job, in headless Chromium",
        "",
        f"Command: `{command.strip()}` (medians of {args.repeats} loads after one warm-up; "
        "SQLite store; 2-core machine; Chromium and the console on the same machine).",
        "",
        *table(results),
        "",
        "The tuning page's first load after the console started, when its charts' data and "
        "the importance are built (then cached: these jobs have ended), drew every chart in "
        + ", ".join(f"{r['cold_charts_drawn_s']:.2f} s at {r['trials']:,} trials" for r in results)
        + " (Optuna's import warms in the background from the console's start; here the page "
        "was opened at once).",
        "",
        "First contentful paint is the browser's own mark (Performance API); the server "
        "response is when the page's HTML had arrived; 'every chart drawn' is when each "
        "chart's data had been fetched and drawn (the tuning page fetches them after it "
        "paints, so a large job never delays its first paint).",
        "",
    ]
    (RESULTS / f"{args.name}.md").write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
