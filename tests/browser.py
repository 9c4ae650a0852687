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
