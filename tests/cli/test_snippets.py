"""`codemode save` and `codemode snippets list|show|remove|grant|revoke` (issue 48) against a real
dev server and a `codemode worker`: a run saved, called by name from another run, listed, shown,
granted, revoked and removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.runner import codemode

pytestmark = pytest.mark.usefixtures("cli_worker")

CODE = "# The sky over a city, shouted.\nw = get_weather(city)\nw['sky'].upper()\n"


async def test_save_list_show_call_and_remove(cli_env: dict[str, str], tmp_path: Path) -> None:
    code = tmp_path / "sky.py"
    code.write_text(CODE)
    run = await codemode("run", str(code), "--input", 'city="Paris"', "--json", env=cli_env)
    assert run.rc == 0, run
    execution_id = json.loads(run.out)["execution_id"]

    saved = await codemode("save", execution_id, "--name", "loud_sky", "--by", "ana", env=cli_env)
    assert saved.rc == 0, saved
    assert "✓ saved loud_sky@" in saved.out and "call it: snippets.loud_sky(city=...)" in saved.out
    version = saved.out.split("loud_sky@", 1)[1].split()[0]

    listed = await codemode("snippets", "list", env=cli_env)
    assert listed.rc == 0, listed
    assert listed.out.startswith(f"loud_sky@{version}\tana\t") and "The sky over a city, shouted." in listed.out

    shown = await codemode("snippets", "show", "loud_sky", env=cli_env)
    assert shown.rc == 0, shown
    assert "promoted by ana at" in shown.out and execution_id in shown.out
    assert "def loud_sky(city: str) -> Any:" in shown.out and "  get_weather  " in shown.out
    as_json = json.loads((await codemode("snippets", "show", f"loud_sky@{version}", "--json", env=cli_env)).out)
    assert as_json["snippet"]["parameters"]["properties"] == {"city": {"type": "string"}}
    assert as_json["grants"] == []

    caller = tmp_path / "caller.py"
    caller.write_text("snippets.loud_sky(city='Tokyo')\n")
    called = await codemode("run", str(caller), "--json", env=cli_env)
    assert called.rc == 0, called
    outcome = json.loads(called.out)
    assert outcome["output"] == "CLEAR" and outcome["snippets"][0]["version"].startswith(version)

    again = await codemode("save", execution_id, "--name", "loud_sky", "--by", "bob", env=cli_env)
    assert again.rc == 0 and "already saved as loud_sky@" in again.out

    removed = await codemode("snippets", "remove", "loud_sky", env=cli_env)
    assert removed.rc == 0 and "removed loud_sky: 1 version(s)" in removed.out, removed
    assert "No saved snippets." in (await codemode("snippets", "list", env=cli_env)).err
    missing = await codemode("snippets", "show", "loud_sky", env=cli_env)
    assert missing.rc == 2 and "no saved snippet named 'loud_sky'" in missing.err
    gone = await codemode("run", str(caller), "--json", env=cli_env)
    assert gone.rc == 1 and json.loads(gone.out)["error"]["type"] == "SnippetError"


async def test_grant_and_revoke_are_signed(cli_env: dict[str, str], tmp_path: Path) -> None:
    env = {**cli_env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    code = tmp_path / "mail.py"
    code.write_text("send_email(to, 'hi', 'hello')\n")
    execution_id = f"mail-{tmp_path.name}"
    run = await codemode("run", str(code), "--input", 'to="ana@example.com"', "--id", execution_id, "--no-wait", env=env)
    assert run.rc == 0, run
    approved = await codemode("approve", execution_id, "--all", "--by", "ana", env=env)
    assert approved.rc == 0, approved
    assert (await codemode("result", execution_id, env=env)).rc == 0
    assert (await codemode("save", execution_id, "--name", "mail_ana", "--by", "ana", env=env)).rc == 0

    unsigned = await codemode("snippets", "grant", "mail_ana", "--by", "ana", env=env)
    assert unsigned.rc == 2 and "a grant is signed: ana has no key" in unsigned.err
    assert (await codemode("keygen", "--approver", "ana", env=env)).rc == 0
    granted = await codemode("snippets", "grant", "mail_ana", "--by", "ana", "--expires", "30d", "--note", "ok", env=env)
    assert granted.rc == 0, granted
    assert "ana pre-approves send_email in mail_ana@" in granted.out
    grant_id = granted.out.split("grant ", 1)[1].split(":", 1)[0]
    shown = await codemode("snippets", "show", "mail_ana", env=env)
    assert f"{grant_id}  by ana  tools send_email  until" in shown.out and "(ok)" in shown.out
    assert (await codemode("snippets", "revoke", "mail_ana", grant_id, env=env)).rc == 0
    assert "grants: none" in (await codemode("snippets", "show", "mail_ana", env=env)).out
    assert (await codemode("snippets", "remove", "mail_ana", env=env)).rc == 0
