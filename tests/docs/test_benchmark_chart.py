"""The benchmarks page's chart (docs/assets/benchmarks.svg) is what bench/chart.py draws from
its figures, and each figure it draws is stated on the docs pages."""

from __future__ import annotations

from bench.chart import FIGURES, OUT, draw
from tests.cli.test_readme import PAGES


def test_the_committed_chart_is_current() -> None:
    assert OUT.read_text() == draw(), "run python bench/chart.py"


def test_the_page_shows_the_chart() -> None:
    assert "](assets/benchmarks.svg)" in PAGES["docs/benchmarks.md"]


def test_each_figure_is_stated_in_the_docs() -> None:
    text = "\n".join(v for k, v in PAGES.items() if k.startswith("docs/"))
    for figure in FIGURES:
        for value in {figure.low, figure.high}:
            assert f"{value:.2f}".rstrip("0").rstrip(".") in text or f"{value}" in text, (figure.label, value)
