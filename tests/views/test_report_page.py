"""The static report is rendered from the console's template set: one layout, one stylesheet,
every text escaped, nothing that needs a server."""

from __future__ import annotations

import re

from scaletune.experiment._report import Report
from scaletune.views import render, stylesheet
from scaletune.views._format import numeric_text


def _report() -> Report:
    return Report(
        title="Tuning job <script>alert(1)</script>",
        intro="What <b>tuning</b> bought",
        command="scaletune report t-1",
        tables=[
            (
                "Trials",
                [["trial", "AUC", "billable"], ["t-1-001 <i>", "0.7829", "1,234 s"]],
                "a note & <em>more</em>",
            )
        ],
        pictures=[("curves.png", "Learning curves", b"\x89PNG fake bytes")],
        configuration={"seed": 0, "name": "<x>"},
    )


def test_the_report_escapes_every_text_it_shows() -> None:
    page = _report().html()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;tuning&lt;/b&gt;" in page and "&lt;em&gt;more&lt;/em&gt;" in page
    assert "t-1-001 &lt;i&gt;" in page
    assert "&#34;&lt;x&gt;&#34;" in page  # the configuration, as JSON inside <pre>


def test_the_report_stands_alone_with_the_consoles_layout_and_stylesheet() -> None:
    page = _report().html()
    assert '<header class="top">' in page and "scaletune report" in page
    assert stylesheet() in page  # inlined: the file opens with no server
    assert not re.search(r'(?:src|href)="/', page)  # nothing fetched from a console
    assert "<script" not in page
    (image,) = re.findall(r'<img [^>]*src="data:image/png;base64,([^"]+)"', page)
    assert image and 'data-file="curves.png"' in page
    assert page.count('<td class="num">') == 2  # figures right-aligned, the trial id not


def test_a_console_page_and_the_report_share_the_layout() -> None:
    console_page = render(
        "error.html",
        title="Not found",
        message="no job 'x'",
        status_code=404,
        url_for=lambda *_, **__: "/static/x",
        csrf_token="t",
    )
    for page in (console_page, _report().html()):
        assert page.startswith("<!doctype html>") or "<!doctype html>" in page[:200]
        assert '<header class="top">' in page and "<main>" in page


def test_figures_are_told_from_names() -> None:
    for figure in ("0.7829", "-3", "1,234", "12 %", "4.5 s", "0.21\u00d7", "1e-05"):
        assert numeric_text(figure), figure
    for text in ("t-1-001", "Hyperband", "", "0.5 to 1", "–"):  # noqa: RUF001
        assert not numeric_text(text), text
