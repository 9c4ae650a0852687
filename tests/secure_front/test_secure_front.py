"""Every door through a secured front (``rig.py``: nginx with mTLS on one port and an API key on
the other, TLS on both, credentials valid for namespace ``codemode-prod`` only), configured as
Temporal configures clients: a profile of a config file, or plain ``TEMPORAL_*`` variables.

A worker per front (``codemode worker``), then through each front and each way of configuring:
``codemode run`` completes a run with tool calls, a run parks for approval, ``codemode list
--status awaiting_approval`` finds it, ``codemode approve`` decides it, ``result`` and
``history`` read it. The MCP front and ``DurableCodeMode`` run code through it too. And the
refusals: each one line naming the address, the namespace and the credential, at once (every
command runs under a 30 s subprocess timeout; a hang or a retry loop fails it)."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from codemode.worker.dev_server import free_port
from tests.cli.runner import REPO, Background, Result, base_env, codemode
from tests.secure_front.rig import NAMESPACE, SecureFront

EMAIL = "send_email(to='ana@example.com', subject='Weather', body='Paris: 18C')"
#: How each front is reached: through the config file's profile, or plain variables.
MODES: dict[str, Callable[[SecureFront], dict[str, str]]] = {
    "mtls-profile": lambda f: f.env_profile("mtls"),
    "mtls-env": lambda f: f.env_mtls(),
    "apikey-profile": lambda f: f.env_profile("apikey"),
    "apikey-env": lambda f: f.env_apikey(),
}
#: A refused command must end well within this (a structural bound: no hang, no retry loop).
REFUSED_WITHIN = 30


@pytest.fixture(scope="module")
def queues() -> dict[str, str]:
    return {name: f"secure-{name}-{uuid.uuid4().hex[:6]}" for name in ("mtls", "apikey")}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The object store the workers and the commands share."""
    return str(tmp_path_factory.mktemp("secure-data"))


def env_for(front: SecureFront, mode: str, queues: dict[str, str], data: str, **extra: str) -> dict[str, str]:
    return base_env(
        **MODES[mode](front), CODEMODE_TASK_QUEUE=queues[mode.split("-")[0]], CODEMODE_DATA_DIR=data, **extra
    )


@pytest.fixture(scope="module")
async def workers(
    front: SecureFront, queues: dict[str, str], data: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, Background]]:
    """``codemode worker`` on each front: the mTLS one from the profile, the API-key one from
    plain variables."""
    logs = tmp_path_factory.mktemp("secure-workers")
    started = {}
    for front_name, mode in (("mtls", "mtls-profile"), ("apikey", "apikey-env")):
        env = env_for(front, mode, queues, data)
        started[front_name] = await Background("worker", "--tools", "examples.tools", env=env, log=logs / f"{front_name}.log").start(
            "Worker ready"
        )
    yield started
    for worker in started.values():
        await worker.stop()


@pytest.mark.parametrize("mode", list(MODES))
async def test_run_park_list_approve_result_history(
    front: SecureFront, workers: dict[str, Background], queues: dict[str, str], data: str, mode: str
) -> None:
    env = env_for(front, mode, queues, data)
    ran = await codemode("run", "examples/trip.py", "--json", env=env)
    assert ran.rc == 0, ran
    outcome = json.loads(ran.out)
    assert outcome["success"] and outcome["output"]["best"] == "Tokyo"
    assert len(outcome["tool_calls"]) >= 4

    parked = await codemode("run", "-", "--json", env=env, stdin=EMAIL)
    assert parked.rc == 3, parked
    waiting = json.loads(parked.out)
    execution_id, call_id = waiting["execution_id"], waiting["pending_approvals"][0]["call_id"]
    for _ in range(50):  # the visibility index follows the workflow's upsert
        listed = await codemode("list", "--status", "awaiting_approval", "--json", env=env)
        assert listed.rc == 0, listed
        if execution_id in [e["execution_id"] for e in json.loads(listed.out)["executions"]]:
            break
    else:
        raise AssertionError(f"{execution_id} not listed as awaiting approval:\n{listed}")

    decided = await codemode("approve", execution_id, call_id, "--by", "ana", env=env)
    assert decided.rc == 0, decided
    result = await codemode("result", execution_id, "--json", env=env)
    assert result.rc == 0, result
    assert json.loads(result.out)["output"]["to"] == "ana@example.com"
    history = await codemode("history", execution_id, "--json", env=env)
    assert history.rc == 0, history
    assert "ana" in history.out and "send_email" in history.out

    # Through the front, not around it: nginx saw this namespace on the front's port, and the
    # mTLS port saw the rig's client certificate.
    port = (front.mtls_address if mode.startswith("mtls") else front.apikey_address).rpartition(":")[2]
    log = front.access_log()
    assert re.search(rf"^{port} .* 200 grpc=- ns=\"{NAMESPACE}\"", log, re.M), log[-2000:]
    if mode.startswith("mtls"):
        assert 'dn="CN=codemode-worker" verify=SUCCESS' in log


async def test_the_connection_flags_over_the_profile(
    front: SecureFront, workers: dict[str, Background], queues: dict[str, str], data: str
) -> None:
    """The `temporal` CLI's flags, nothing in the environment but the store and the queue."""
    env = base_env(CODEMODE_TASK_QUEUE=queues["mtls"], CODEMODE_DATA_DIR=data)
    flags = [
        "--address", front.mtls_address, "--namespace", NAMESPACE, "--tls-ca-path", front.cert("ca.pem"),
        "--tls-cert-path", front.cert("client.pem"), "--tls-key-path", front.cert("client.key"),
    ]  # fmt: skip
    parked = await codemode("run", "-", "--json", *flags, env=env, stdin=EMAIL)
    assert parked.rc == 3, parked
    waiting = json.loads(parked.out)
    # The printed commands carry the flags (so they work when copied), never an API key.
    assert f"--address {front.mtls_address} --namespace {NAMESPACE}" in waiting["approve"][0]
    denied = await codemode("deny", waiting["execution_id"], "--all", *flags, env=env)
    assert denied.rc == 0, denied
    # --config-file and --profile, with a flag over the profile's namespace
    listed = await codemode("list", "--config-file", front.config_file, "--profile", "apikey", "-n", NAMESPACE, env=env)
    assert listed.rc == 0, listed


async def test_the_mcp_front_runs_code_through_the_profile(front: SecureFront, data: str) -> None:
    """`codemode mcp` with no worker on its queue runs one in its own process, through the front."""
    from mcp import StdioServerParameters

    from tests.integrations.mcp_server.clients import McpSession

    env = base_env(**front.env_profile("apikey"), CODEMODE_TASK_QUEUE=f"secure-mcp-{uuid.uuid4().hex[:6]}", CODEMODE_DATA_DIR=data)
    server = StdioServerParameters(
        command=__import__("sys").executable, args=["-m", "codemode", "mcp", "--tools", "examples.tools"], env=env, cwd=str(REPO)
    )
    async with McpSession(server) as session:
        res = await session.call_tool("execute", {"code": "get_weather('Paris')['temp_c']"})
    assert not res.is_error and res.structured_content["status"] == "completed", res
    assert res.structured_content["output"] == 18


async def test_durable_code_mode_connects_from_the_environment(
    front: SecureFront, workers: dict[str, Background], queues: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DurableCodeMode`` with no client makes one with ``codemode.connect()``: Temporal's
    variables configure it (here the mTLS front, as plain variables)."""
    from pydantic_ai import Agent

    from codemode.integrations.pydantic_ai import DurableCodeMode
    from tests.integrations.agent_model import scripted

    for name, value in front.env_mtls().items():
        monkeypatch.setenv(name, value)
    capability = DurableCodeMode("examples.tools", task_queue=queues["mtls"])
    agent = Agent(scripted("get_weather('Tokyo')['temp_c'] + 1"), capabilities=[capability])
    result = await agent.run("how warm is Tokyo, plus one")
    answer = json.loads(result.output.removeprefix("ANSWER: "))
    assert answer["success"] and answer["output"] == 25
    client = await capability.get_client()
    assert client.namespace == NAMESPACE and client.service_client.config.target_host == front.mtls_address


# -- refusals ---------------------------------------------------------------------------------


def refusal_envs(front: SecureFront) -> dict[str, tuple[dict[str, str], str, str]]:
    """(environment, the credential the line must name, what the server said) per refusal."""
    mtls, apikey = front.env_mtls(), front.env_apikey()
    no_cert = {k: v for k, v in mtls.items() if not k.startswith("TEMPORAL_TLS_CLIENT")}
    rogue = {
        **mtls,
        "TEMPORAL_TLS_CLIENT_CERT_PATH": front.cert("rogue-client.pem"),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": front.cert("rogue-client.key"),
    }
    return {
        "wrong api key": ({**apikey, "TEMPORAL_API_KEY": "not-the-key"}, "api key", "missing or invalid API key"),
        "no client cert": (no_cert, "no credential", "client certificate required"),
        "cert of another CA": (rogue, "client cert " + front.cert("rogue-client.pem"), "client certificate not trusted"),
        "plaintext to a TLS port": (
            {"TEMPORAL_ADDRESS": front.mtls_address, "TEMPORAL_NAMESPACE": NAMESPACE},
            "no credential",
            "expects TLS",
        ),
        "TLS without the CA": (
            {k: v for k, v in apikey.items() if k != "TEMPORAL_TLS_SERVER_CA_CERT_PATH"},
            "api key",
            "certificate is not trusted",
        ),
        "another namespace (mTLS)": ({**mtls, "TEMPORAL_NAMESPACE": "default"}, "client cert", "not valid for namespace default"),
        "another namespace (API key)": (
            {**front.env_profile("apikey"), "TEMPORAL_NAMESPACE": "payments"},
            "api key",
            "not valid for namespace payments",
        ),
    }


def assert_one_line_refusal(res: Result, address: str, namespace: str, credential: str, said: str, secret: str) -> None:
    assert res.rc not in (0, 3), res
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res
    line = lines[0]
    assert address in line and f"namespace {namespace}" in line and credential in line and said in line, line
    assert "Traceback" not in res.err and secret not in res.err + res.out


@pytest.mark.parametrize(
    "case",
    [
        "wrong api key",
        "no client cert",
        "cert of another CA",
        "plaintext to a TLS port",
        "TLS without the CA",
        "another namespace (mTLS)",
        "another namespace (API key)",
    ],
)
async def test_a_refusal_is_one_line_at_once(front: SecureFront, data: str, tmp_path: Path, case: str) -> None:
    env, credential, said = refusal_envs(front)[case]
    full = base_env(**env, CODEMODE_DATA_DIR=data, CODEMODE_TASK_QUEUE="secure-refused")
    if "TEMPORAL_PROFILE" in env:
        address, namespace = front.apikey_address, full["TEMPORAL_NAMESPACE"]
    else:
        address, namespace = env["TEMPORAL_ADDRESS"], env["TEMPORAL_NAMESPACE"]
    for args in (("list",), ("status", "exec-x"), ("run", "examples/trip.py", "--tools", "examples.tools")):
        res = await codemode(*args, env=full, timeout=REFUSED_WITHIN)
        assert_one_line_refusal(res, address, namespace, credential, said, front.api_key)
        assert "embedded" not in res.err
    if case == "wrong api key":  # a worker refused at start exits too (it does not retry forever)
        worker = await codemode("worker", "--tools", "examples.tools", env=full, timeout=REFUSED_WITHIN)
        assert_one_line_refusal(worker, address, namespace, credential, said, front.api_key)


async def test_a_configured_target_that_does_not_answer_never_becomes_an_embedded_server(
    front: SecureFront, tmp_path: Path
) -> None:
    address = f"localhost:{free_port()}"
    for extra in (
        {"TEMPORAL_API_KEY": "k"},
        {"TEMPORAL_TLS": "true"},
        {"TEMPORAL_CONFIG_FILE": front.config_file, "TEMPORAL_PROFILE": "apikey"},
    ):
        env = base_env(TEMPORAL_ADDRESS=address, CODEMODE_DATA_DIR=str(tmp_path), **extra)
        res = await codemode("run", "-", "--tools", "examples.tools", env=env, stdin="1", timeout=REFUSED_WITHIN)
        assert res.rc == 2 and "no Temporal server answers at " + address in res.err, res
        assert "no embedded server is started" in res.err and "started the embedded one" not in res.err
        assert len(res.err.strip().splitlines()) == 1, res


async def test_a_profile_that_is_not_there_is_a_usage_error(front: SecureFront, tmp_path: Path) -> None:
    env = base_env(TEMPORAL_CONFIG_FILE=front.config_file, CODEMODE_DATA_DIR=str(tmp_path))
    res = await codemode("list", "--profile", "nope", env=env, timeout=REFUSED_WITHIN)
    assert res.rc == 2 and "Profile 'nope' not found" in res.err and front.config_file in res.err, res


async def test_a_namespace_without_our_search_attributes(front: SecureFront, data: str, tmp_path: Path) -> None:
    """As on a Cloud namespace nobody prepared: the worker may not create CodeModeStatus and
    CodeModeRuntime, says which to create and how, and runs; listing by state still works."""
    from tests.secure_front.rig import BARE_NAMESPACE

    env = base_env(**front.env_profile("bare"), CODEMODE_TASK_QUEUE=f"secure-bare-{uuid.uuid4().hex[:6]}", CODEMODE_DATA_DIR=data)
    worker = await Background("worker", "--tools", "examples.tools", env=env, log=tmp_path / "worker.log").start("Worker ready")
    try:
        said = worker.output()
        assert f"search attributes CodeModeStatus, CodeModeRuntime (Keyword) are missing on namespace {BARE_NAMESPACE}" in said
        assert f"temporal operator search-attribute create --namespace {BARE_NAMESPACE}" in said
        assert f'tcld namespace search-attributes add -n {BARE_NAMESPACE} --sa "CodeModeStatus=Keyword"' in said
        ran = await codemode("run", "examples/trip.py", "--json", env=env)
        assert ran.rc == 0 and json.loads(ran.out)["success"], ran
        parked = await codemode("run", "-", "--json", env=env, stdin=EMAIL)
        assert parked.rc == 3, parked
        execution_id = json.loads(parked.out)["execution_id"]
        listed = await codemode("list", "--status", "awaiting_approval", "--json", env=env)
        assert listed.rc == 0, listed
        assert [e["execution_id"] for e in json.loads(listed.out)["executions"]] == [execution_id]
        running = await codemode("list", "--status", "running", "--json", env=env)
        assert execution_id not in running.out
        completed = await codemode("list", "--status", "completed", "--json", env=env)
        assert json.loads(ran.out)["execution_id"] in completed.out
        assert (await codemode("cancel", execution_id, env=env)).rc == 0
    finally:
        assert await worker.stop() == 0, worker.output()


async def test_a_worker_that_loses_its_key_keeps_polling_and_loses_no_run(
    front: SecureFront, data: str, tmp_path: Path
) -> None:
    """The key a running worker holds stops being accepted (a rotation): the worker logs the
    refusals and keeps polling; a run started meanwhile waits on the server, and completes once
    the worker's key is accepted again."""
    import secrets

    queue = f"secure-rotate-{uuid.uuid4().hex[:6]}"
    env = base_env(**front.env_apikey(), CODEMODE_TASK_QUEUE=queue, CODEMODE_DATA_DIR=data)
    worker = await Background("worker", "--tools", "examples.tools", env=env, log=tmp_path / "worker.log").start("Worker ready")
    new_key = secrets.token_hex(24)
    try:
        front.rotate(new_key)
        with_new_key = {**env, "TEMPORAL_API_KEY": new_key}
        started = await codemode("run", "examples/trip.py", "--no-wait", env=with_new_key)
        assert started.rc == 0, started
        execution_id = started.out.strip()
        for _ in range(300):  # until the worker said it is refused (it checks every 10 s)
            if "invalid API key" in worker.output():
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"the worker never met the refusal:\n{worker.output()}")
        said = worker.output()
        assert f"cannot reach Temporal at {front.apikey_address} (namespace {NAMESPACE}, TLS, api key)" in said
        assert "keeps polling" in said and front.api_key not in said
        assert worker.proc is not None and worker.proc.returncode is None, said  # still running
        front.rotate(front.api_key, new_key)  # the worker's key is accepted again
        result = await codemode("result", execution_id, "--json", env=with_new_key, timeout=120)
        assert result.rc == 0 and json.loads(result.out)["success"], result
    finally:
        front.rotate(front.api_key)
        assert await worker.stop() == 0, worker.output()
