"""Debian's chromium, as the web-UI tests drive it through playwright (playwright's own
browser download cannot reach its servers from here)."""

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (None: they can): CI installs both, so there a
    missing browser fails them instead (``skip_without_a_browser``)."""
    import shutil

    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "PyPI playwright is not installed"
    return None if shutil.which(CHROMIUM) else f"{CHROMIUM} not found"


def skip_without_a_browser():  # noqa: ANN201
    import os

    import pytest

    missing = browser_missing()
    return pytest.mark.skipif(missing is not None and not os.environ.get("CI"), reason=missing or "")
