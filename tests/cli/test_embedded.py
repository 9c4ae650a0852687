"""The embedded server: `codemode run` on a machine with no server, `codemode server`, `codemode dev`.

Each test uses a free port and a temporary data directory, never the user's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode.worker.connection import server_answers
from codemode.worker.dev_server import EmbeddedServer, ServerStartError, free_port, port_is_free
from tests.cli.runner import Background, approve_command, base_env, codemode


@pytest.fixture
def fresh(tmp_path: Path) -> dict[str, str]:
    """An address where nothing listens, with its own data directory."""
    return base_env(TEMPORAL_ADDRESS=f"localhost:{free_port()}", CODEMODE_DATA_DIR=str(tmp_path / "data"))


async def test_run_starts_the_embedded_server_and_a_worker(fresh: dict[str, str], tmp_path: Path) -> None:
    port = int(fresh["TEMPORAL_ADDRESS"].rpartition(":")[2])
    res = await codemode("run", "-", "--tools", "examples.tools", "--json", env=fresh, stdin='get_weather("London")')
    assert res.rc == 0, res
    assert json.loads(res.out)["output"] == {"city": "London", "temp_c": 14, "sky": "rain"}
    assert "started the embedded one" in res.err
    assert (tmp_path / "data" / "temporal.db").is_file()
    # stopped with the command: nothing listens any more, the port is free again
    assert not server_answers(fresh["TEMPORAL_ADDRESS"])
    assert port_is_free(port)


async def test_artifacts_after_an_embedded_run_start_the_embedded_server_again(
    fresh: dict[str, str], tmp_path: Path
) -> None:
    """The README's order: `codemode run` (its embedded server stops with it), then
    `codemode artifacts ID NAME -o FILE` reads the execution from the same database."""
    code = 'save_artifact("note.txt", "kept")\n"ok"'
    res = await codemode("run", "-", "--tools", "examples.tools", "--json", env=fresh, stdin=code)
    assert res.rc == 0, res
    execution_id = json.loads(res.out)["execution_id"]
    assert not server_answers(fresh["TEMPORAL_ADDRESS"])
    target = tmp_path / "note.txt"
    fetched = await codemode("artifacts", execution_id, "note.txt", "-o", str(target), env=fresh)
    assert fetched.rc == 0, fetched
    assert target.read_text() == "kept" and "started the embedded one to read the execution" in fetched.err
    assert not server_answers(fresh["TEMPORAL_ADDRESS"])  # and stopped it again


async def test_run_without_a_server_needs_tools(fresh: dict[str, str]) -> None:
    res = await codemode("run", "examples/trip.py", env=fresh)
    assert res.rc == 2, res
    assert "pass --tools MODULE" in res.err
    res = await codemode("status", "some-id", env=fresh)
    assert res.rc == 2 and "no Temporal server answers" in res.err, res


async def test_server_command_starts_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "custom.db"
    env = base_env(CODEMODE_DATA_DIR=str(tmp_path / "unused"))
    server = await Background(
        "server", "--port", str(port), "--db", str(db), env=env, log=tmp_path / "server.log"
    ).start("Ready.")
    try:
        assert f"Temporal server: localhost:{port}" in server.output()
        assert "Web UI:          http://localhost:" in server.output()
        res = await codemode("history", "nothing-here", env={**env, "TEMPORAL_ADDRESS": f"localhost:{port}"})
        assert res.rc == 2 and "no execution 'nothing-here'" in res.err, res
    finally:
        assert await server.stop() == 0, server.output()
    assert db.is_file()
    assert port_is_free(port)
    assert not (tmp_path / "unused").exists()


async def test_dev_keeps_a_parked_run_across_restarts(tmp_path: Path) -> None:
    """`codemode dev` (server + worker in one process) on a SQLite file: a run parked for
    approval survives a restart of both, and is approved and finished by the next one."""
    port = free_port()
    env = base_env(TEMPORAL_ADDRESS=f"localhost:{port}", CODEMODE_DATA_DIR=str(tmp_path / "data"))
    args = ("dev", "--tools", "examples.tools", "--port", str(port))
    dev = await Background(*args, env=env, log=tmp_path / "dev1.log").start("Worker ready")
    try:
        res = await codemode("run", "examples/email.py", env=env)
        assert res.rc == 3, res
        assert "started the embedded one" not in res.err  # it used the dev server
        execution_id, call_id = approve_command(res.err)
    finally:
        assert await dev.stop() == 0, dev.output()
    assert port_is_free(port)

    dev = await Background(*args, env=env, log=tmp_path / "dev2.log").start("Worker ready")
    try:
        # dev serves the approvals inbox too, and prints its sign-in page and a token for whoever
        # started it (posted there: a token in an address would stay in histories, issue 45).
        import re

        import aiohttp

        login = re.search(r"Approvals inbox: (http://127\.0\.0\.1:\d+/login)#token=", dev.output())
        token = re.search(r"Sign in with the token (\S+)", dev.output())
        assert login and token, dev.output()
        jar = aiohttp.CookieJar(unsafe=True)  # (aiohttp keeps no cookie of an IP address otherwise)
        async with (
            aiohttp.ClientSession(cookie_jar=jar) as http,
            http.post(login.group(1), data={"token": token.group(1)}) as resp,
        ):
            page = await resp.text()
            assert resp.status == 200 and f"/calls/{execution_id}/{call_id}" in page, page
        res = await codemode("approve", execution_id, call_id, "--by", "dana", env=env)
        assert res.rc == 0, res
        res = await codemode("result", execution_id, "--json", env=env)
        assert res.rc == 0, res
        assert json.loads(res.out)["output"] is True
        res = await codemode("history", execution_id, env=env)
        assert "approved by dana" in res.out, res
    finally:
        assert await dev.stop() == 0, dev.output()


async def test_embedded_server_reports_a_busy_port(tmp_path: Path) -> None:
    async with EmbeddedServer(port=free_port(), db=tmp_path / "a.db", ui=False) as first:
        assert server_answers(first.address)
        with pytest.raises(ServerStartError, match="already in use"):
            await EmbeddedServer(port=first.port, db=tmp_path / "b.db", ui=False).start()
    assert not server_answers(first.address)
