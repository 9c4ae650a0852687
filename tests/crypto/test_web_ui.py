"""The web UI shows decrypted payloads: `codemode dev` with keys starts a codec server and points
the UI at it; a real headless Chromium (Debian's, driven by playwright) opens the execution's
page and must show the code's input and its result in plaintext, fetched through the codec
server. The screenshot is kept at $CODEMODE_UI_SCREENSHOT when set (for people to look at)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from playwright.async_api import async_playwright, expect

from codemode.worker.dev_server import free_port
from tests.browser import CHROMIUM, CHROMIUM_FLAGS
from tests.cli.runner import Background, base_env, codemode

from .conftest import K1, keys_env

INPUT_MARKER, OUTPUT_MARKER = "MRKUIINPUTr2d", "MRKUIOUTPUTs6f"
CODE = 'w = get_weather(city)\n[w["sky"], secret.lower(), "MRK" + "UIOUTPUTs6f"]'


async def test_the_web_ui_shows_decrypted_input_and_result(tmp_path: Path) -> None:
    assert shutil.which(CHROMIUM), "Debian's chromium is missing: apt-get install -y chromium (.ci/run does)"
    port, ui_port, codec_port = free_port(), free_port(), free_port()
    env = base_env(TEMPORAL_ADDRESS=f"localhost:{port}", CODEMODE_DATA_DIR=str(tmp_path / "data"), **keys_env(K1))
    args = (
        "dev",
        "--tools",
        "examples.tools",
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
        "--codec-port",
        str(codec_port),
    )
    dev = await Background(*args, env=env, log=tmp_path / "dev.log").start("Worker ready")
    try:
        assert f"Codec server:    http://localhost:{codec_port}" in dev.output()
        res = await codemode(
            "run",
            "-",
            "--json",
            "--id",
            "ui-check",
            "--input",
            'city="Paris"',
            "--input",
            f'secret="{INPUT_MARKER}"',
            env=env,
            stdin=CODE,
        )
        assert res.rc == 0, res
        assert json.loads(res.out)["output"] == ["cloudy", INPUT_MARKER.lower(), OUTPUT_MARKER]

        codec_calls: list[str] = []
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            try:
                page = await browser.new_page(viewport={"width": 1400, "height": 1100})
                page.on("requestfinished", lambda r: codec_calls.append(r.url) if f":{codec_port}/" in r.url else None)
                await page.goto(f"http://localhost:{ui_port}/namespaces/default/workflows/ui-check", wait_until="load")
                # Both strings only exist in plaintext after the codec server decrypted them.
                for marker in (INPUT_MARKER, OUTPUT_MARKER):
                    await expect(page.locator("body")).to_contain_text(marker, timeout=60_000)
                shot = Path(os.environ.get("CODEMODE_UI_SCREENSHOT") or tmp_path / "ui.png")
                await page.screenshot(path=str(shot))
            finally:
                await browser.close()
        assert any("/decode" in url for url in codec_calls), codec_calls
    finally:
        assert await dev.stop() == 0, dev.output()
