"""``codemode dev`` leads a person to a waiting call (issue 46), as a new user meets it: ``dev``
with a webhook in its notify config and no ``inbox_url``, and ``codemode run examples/email.py``
in another terminal. The run's parked message names the call's page in dev's inbox; dev's console
says the call waits (with the page) and later how it was decided; the webhook's event carries
approve/deny links that work in dev's inbox and name the person dev signs in (``--user``); the
history says who started the run as its request does (never a process id and host)."""

from __future__ import annotations

import asyncio
import getpass
import json
import re
from pathlib import Path

import aiohttp

from codemode.worker.dev_server import free_port
from tests.approvals.receivers import Receiver
from tests.cli.runner import Background, approve_command, base_env, codemode

#: How long a line may take to reach dev's console (it looks every 2 s); a wait, never asserted on.
CONSOLE_WAIT = 60.0


async def said(dev: Background, text: str) -> str:
    """Dev's console once it says ``text``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CONSOLE_WAIT
    while text not in dev.output():
        assert loop.time() < deadline, f"dev never said {text!r}:\n{dev.output()}"
        await asyncio.sleep(0.2)
    return dev.output()


async def test_dev_leads_a_person_from_every_terminal_to_the_call(tmp_path: Path) -> None:
    receiver = Receiver(secret="whsec-for-dev-test-0123456789", port=free_port())
    await receiver.up()
    notify = tmp_path / "notify.json"
    notify.write_text(json.dumps({"webhooks": [{"url": receiver.url, "secret": receiver.secret}]}))
    port, ui_port, inbox_port = free_port(), free_port(), free_port()
    env = base_env(TEMPORAL_ADDRESS=f"localhost:{port}", CODEMODE_DATA_DIR=str(tmp_path / "data"))
    args = ["dev", "--tools", "examples.tools", "--port", str(port), "--ui-port", str(ui_port)]
    args += ["--inbox-port", str(inbox_port), "--user", "ana@example.com", "--notify-config", str(notify)]
    dev = await Background(*args, env=env, log=tmp_path / "dev.log").start("Worker ready", timeout=60)
    inbox = f"http://127.0.0.1:{inbox_port}"
    try:
        # (the token after "#": a browser never sends it; the page posts it)
        login = re.search(rf"Approvals inbox: {re.escape(inbox)}/login#token=(\S+)", dev.output())
        assert login, dev.output()
        assert "(that link signs you in as ana@example.com)" in dev.output()

        # The run's parked message: the call's page first, then the commands.
        run = await codemode("run", "examples/email.py", env=env)
        assert run.rc == 3, run
        execution_id, call_id = approve_command(run.err)
        page = f"{inbox}/calls/{execution_id}/{call_id}"
        assert f"decide in the inbox: {page}" in run.err, run.err
        # dev's console: the call waits, and where to decide it.
        await said(dev, f"waits for a person (call {call_id} of {execution_id})")
        assert f"  decide at {page}" in dev.output()

        # The webhook's event links to the page and carries approve/deny links naming ana.
        event = await receiver.wait_for("approval.requested")
        links = event["links"]
        assert links["inbox"] == page and links["approve"].startswith(f"{inbox}/link/"), links
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:  # (an IP's cookie)
            # The printed token signs in the chosen name (a link decides for its signed-in approver only).
            async with http.post(f"{inbox}/login", data={"token": login.group(1)}) as resp:
                assert "signed in as ana@example.com" in await resp.text()
            async with http.get(links["approve"]) as resp:
                assert resp.status == 200 and "Confirm: approve as ana@example.com" in await resp.text()
            async with http.post(links["approve"]) as resp:
                assert resp.status == 200 and "Approved call" in await resp.text()
        result = await codemode("result", execution_id, "--json", env=env)
        assert result.rc == 0 and json.loads(result.out)["output"] is True, result
        console = await said(dev, "approved by ana@example.com through a link in a message")
        assert "✓ send_email(to='ana@example.com', subject='Weather', body='Paris: 18C, cloudy'): approved" in console

        # Who started the run: the request's started_by (the OS user here), as everywhere.
        history = await codemode("history", execution_id, env=env)
        assert f"execution started (monty, 4 lines of code) by {getpass.getuser()}" in history.out, history.out
        assert not re.search(r"by \d+@", history.out), history.out
    finally:
        assert await dev.stop() == 0, dev.output()
        await receiver.down()
