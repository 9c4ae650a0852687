"""The inbox's HTML: jinja2 templates (``templates/``), autoescaped, no script of our own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web
from jinja2 import Environment, FileSystemLoader, select_autoescape

_env = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters["json"] = lambda v, indent=None: json.dumps(v, indent=indent, default=str, ensure_ascii=False)
_env.filters["when"] = lambda d: d.strftime("%Y-%m-%d %H:%M UTC") if d else ""


def page(template: str, *, status: int = 200, **context: Any) -> web.Response:
    html = _env.get_template(template).render(**context)
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")


def message(
    title: str, text: str, *, status: int = 200, identity: str | None = None, back: str | None = "/"
) -> web.Response:
    return page("message.html", status=status, title=title, text=text, identity=identity, back=back)


def code_lines(code: str, line: int | None) -> list[tuple[int, str, bool]]:
    """(number, text, is the call's line) for every line of the code."""
    return [(i, text, i == line) for i, text in enumerate(code.splitlines(), start=1)]
