"""Terminal tables at 80 columns and when piped: whole words and values, never cut short."""

from __future__ import annotations

import io

from rich.console import Console

from scaletune.cli._render import print_table


def _render(width: int, header: list[str], rows: list[list[str]], **options: object) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None)
    print_table(console, header, rows, **options)  # type: ignore[arg-type]
    return buffer.getvalue()


HEADER = ["id", "status", "workers", "wall s", "worker-s", "validation"]
ROW = ["tuning-20261130-164418-eebf-011", "Completed", "3", "0.3", "0.8", "auc=0.9938"]


def test_a_table_that_fits_stays_a_table() -> None:
    text = _render(120, HEADER, [ROW, ROW], right=("workers",))
    lines = [line.rstrip() for line in text.splitlines()]
    assert " ".join(lines[0].split()) == " ".join(HEADER)  # headers whole, on one line
    assert lines[1].split() == ROW
    assert "…" not in text


def test_a_table_too_wide_becomes_one_block_per_record_with_nothing_cut() -> None:
    wide = [*HEADER, "hyperparameters"]
    row = [*ROW, "eta=0.3, max_depth=6, min_child_weight=1.5, subsample=0.9"]
    text = _render(80, wide, [row, row], title="Training jobs")
    assert "…" not in text
    assert all(len(line) <= 80 for line in text.splitlines())
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    assert lines[0] == "Training jobs"
    for name, value in zip(wide, row, strict=True):
        assert f"{name}  " in lines[1 + wide.index(name)]
        assert lines[1 + wide.index(name)].endswith(value)
    assert len(lines) == 1 + 2 * len(wide)


def test_a_measure_and_value_table_wraps_the_measure_at_words_and_keeps_values_whole() -> None:
    rows = [
        ["best training job", "scale-1000-20010909-014640-e683-940"],
        ["billable worker-seconds had no trial been stopped (estimated)", "31000.0"],
    ]
    text = _render(80, ["measure", "value"], rows)
    assert "scale-1000-20010909-014640-e683-940" in text
    assert "…" not in text
    words = " ".join(line.strip().split("  ")[0] for line in text.splitlines()[2:4])
    assert words == "billable worker-seconds had no trial been stopped (estimated)"
