"""With keys set, nothing readable is left around the codec: a run whose code, inputs,
arguments, output, tool results, stdout, a tool's error message and a large (offloaded)
result each hold a marker string leaves none of them in the raw history (`temporal workflow
show -o json`, every base64 field decoded), in describe (summaries, details, memo, search
attributes), in the current details (the metadata query), in the visibility list, nor in the
object store; yet `codemode history/result/status`, the codec server and `temporal
--codec-endpoint` show them."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.storage import BlobStore
from codemode.worker.codec_server import CodecServer
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest
from tests.cli.runner import base_env, codemode
from tests.workflows.test_approval import wait_for_state

from .conftest import K1, keys_env, markers_in, readable_texts, temporal_cli
from .secret_tools import BIG_MARKER, ERROR_MARKER, RESULT_MARKER

#: Markers the code spells only in pieces, so each one reaches the history by one path only.
CODE_MARKER, ARG_MARKER, STDOUT_MARKER, OUTPUT_MARKER = "MRKCODEa1b", "MRKARGc9d", "MRKSTDOUTe4f", "MRKOUTg2h"
INPUT_MARKER, APPROVAL_MARKER = "MRKINPUTh8j", "MRKAPPROVEk4m"
CODE = f"""# {CODE_MARKER}: the code itself
c = lookup_customer("MRK" + "ARGc9d")
print("MRK" + "STDOUTe4f")
try:
    charge_card("4242")
except ValueError as e:
    err = str(e)
r = big_report(300)
[c["note"], err, len(r), r[:13], "MRK" + "OUTg2h", inp]
"""
PARK = 'wire_money("MRK" + "APPROVEk4m", 1.0)'
MARKERS = {CODE_MARKER, ARG_MARKER, STDOUT_MARKER, OUTPUT_MARKER, INPUT_MARKER, RESULT_MARKER, ERROR_MARKER, BIG_MARKER}


async def raw_views(execution_id: str, address: str) -> dict[str, list[str]]:
    """What anyone with access to the namespace (and no key) can read about an execution."""
    views = {}
    for name, args in {
        "show": ("workflow", "show", "-w", execution_id, "-o", "json"),
        "describe": ("workflow", "describe", "-w", execution_id, "-o", "json"),
        "list": ("workflow", "list", "-q", f"WorkflowId='{execution_id}'", "-o", "json"),
    }.items():
        views[name] = list(readable_texts(json.loads(await temporal_cli(*args, address=address))))
    return views


async def stored_texts(store: BlobStore, execution_id: str) -> tuple[list[str], list[bytes]]:
    keys = [k for k in await store.list_keys(bucket=store.bucket, prefix="") if f"/wi/{execution_id}/" in k]
    blobs = [await store.get_object(bucket=store.bucket, key=k) for k in keys]
    return keys, blobs


async def test_nothing_readable_leaks_and_key_holders_see_everything(
    keyed_client, temporal_address, task_queue, store, data_dir: Path
) -> None:
    client = await keyed_client(K1)
    registry = ToolRegistry.from_module("tests.crypto.secret_tools")
    async with CodeModeWorker(client, registry, task_queue=task_queue).running():
        runs = {}
        for runtime in ("monty", "python"):
            handle = await start_execution(
                client,
                CodeExecutionRequest(code=CODE, runtime=runtime, inputs={"inp": INPUT_MARKER}),
                task_queue=task_queue,
            )
            outcome = await handle.result()
            assert outcome.success, outcome.error
            assert outcome.output == [
                RESULT_MARKER,
                f"card declined: {ERROR_MARKER}",
                307188,
                BIG_MARKER,
                OUTPUT_MARKER,
                INPUT_MARKER,
            ]
            assert outcome.stdout == STDOUT_MARKER + "\n"
            runs[runtime] = handle.id
        # A run parked for approval: its current details name the pending call and its arguments.
        parked = await start_execution(client, CodeExecutionRequest(code=PARK), task_queue=task_queue)
        await wait_for_state(parked, "awaiting_approval")
        metadata = await temporal_cli("workflow", "metadata", "-w", parked.id, "-o", "json", address=temporal_address)
        assert "encryption-key-id" in metadata
        assert not markers_in(readable_texts(json.loads(metadata)), {APPROVAL_MARKER})
        # While it waits, the memo lists the pending call: encrypted like any payload.
        described = json.loads(
            await temporal_cli("workflow", "describe", "-w", parked.id, "-o", "json", address=temporal_address)
        )
        pending_memo = described["workflowExecutionInfo"]["memo"]["fields"]["pending_approvals"]
        assert pending_memo["metadata"]["encryption-key-id"]
        for name, texts in (await raw_views(parked.id, temporal_address)).items():
            assert not markers_in(texts, {APPROVAL_MARKER}), f"{name} of the parked run shows its arguments"

        # Key holders read it all: the CLI (subprocesses with the key in their environment).
        env = base_env(TEMPORAL_ADDRESS=temporal_address, CODEMODE_DATA_DIR=str(data_dir), **keys_env(K1))
        status = await codemode("status", parked.id, env=env)
        assert f"wire_money(to='{APPROVAL_MARKER}', amount=1.0)" in status.out, status
        approved = await codemode("approve", parked.id, "--all", "--by", "ana", env=env)
        assert approved.rc == 0, approved
        result = await codemode("result", parked.id, "--json", env=env)
        assert result.rc == 0 and APPROVAL_MARKER in result.out, result
        for execution_id in runs.values():
            history = await codemode("history", execution_id, "--json", env=env)
            assert history.rc == 0, history
            audit = json.loads(history.out)
            calls = {c["tool"]: c for c in audit["calls"]}
            assert calls["lookup_customer"]["args"] == [ARG_MARKER]
            assert calls["lookup_customer"]["result"]["note"] == RESULT_MARKER
            # The tool's error message, which the history keeps only as an encrypted attribute.
            assert ERROR_MARKER in calls["charge_card"]["error"]["message"], calls["charge_card"]
            assert audit["stdout"] == STDOUT_MARKER + "\n" and OUTPUT_MARKER in audit["output"]
            assert CODE_MARKER in audit["code"]
            result = await codemode("result", execution_id, "--json", env=env)
            assert markers_in([result.out], MARKERS) >= {RESULT_MARKER, ERROR_MARKER, OUTPUT_MARKER, INPUT_MARKER}
        status = await codemode("status", runs["python"], env=env)
        assert status.rc == 0 and ERROR_MARKER in status.out and STDOUT_MARKER in status.out, status

    # Without the key the CLI still lists them, and says why it cannot show more.
    no_keys = base_env(TEMPORAL_ADDRESS=temporal_address, CODEMODE_DATA_DIR=str(data_dir))
    listed = await codemode("list", "--limit", "200", env=no_keys)
    assert listed.rc == 0, listed
    assert any(runs["monty"] in ln and "(encrypted under key 'k1')" in ln for ln in listed.out.splitlines()), listed
    unreadable = await codemode("result", runs["monty"], env=no_keys)
    assert unreadable.rc == 1 and "payloads are encrypted: set CODEMODE_ENCRYPTION_KEYS" in unreadable.err, unreadable

    # Nobody else reads any of it: history, describe (summaries, details, memo, search
    # attributes), the visibility list, and the object store.
    for execution_id in [*runs.values(), parked.id]:
        views = await raw_views(execution_id, temporal_address)
        for name, texts in views.items():
            leaked = markers_in(texts, MARKERS | {APPROVAL_MARKER})
            assert not leaked, f"{name} of {execution_id} shows {leaked}"
        keys, blobs = await stored_texts(store, execution_id)
        leaked = markers_in((b.decode("latin-1") for b in blobs), MARKERS | {APPROVAL_MARKER})
        assert not leaked, f"the object store holds {leaked} in the clear: {keys}"
    show = json.loads(
        await temporal_cli("workflow", "show", "-w", runs["monty"], "-o", "json", address=temporal_address)
    )
    events = show["events"]
    assert events[0]["userMetadata"]["summary"]["metadata"]["encryption-key-id"]  # the summary is encrypted too
    failed = [e for e in events if "activityTaskFailedEventAttributes" in e]
    assert failed and all(
        e["activityTaskFailedEventAttributes"]["failure"]["message"] == "Encoded failure" for e in failed
    )
    # The large result went to the object store: encrypted there, a plaintext reference in the history.
    keys, blobs = await stored_texts(store, runs["monty"])
    payload_blobs = [b for k, b in zip(keys, blobs, strict=True) if "/d/sha256/" in k]
    assert payload_blobs
    for blob in payload_blobs:
        stored = Payload.FromString(blob)
        assert stored.metadata["encoding"] == b"binary/encrypted" and stored.metadata["encryption-key-id"] == b"k1"
    assert all(b.startswith(b"CMCK1\x02k1") for k, b in zip(keys, blobs, strict=True) if "/cp/" in k)

    # The codec server decodes payloads taken from that raw history (HTTP, as the UI and CLI call it).
    started = events[0]["workflowExecutionStartedEventAttributes"]["input"]
    references = [
        p
        for e in events
        for p in e.get("activityTaskCompletedEventAttributes", {}).get("result", {}).get("payloads", [])
        if p.get("externalPayloads")
    ]
    assert references, "the large tool result was not offloaded"
    async with CodecServer(client.data_converter, port=0) as codec, aiohttp.ClientSession() as http:
        headers = {"Content-Type": "application/json", "X-Namespace": "default"}
        async with http.post(f"{codec.url}/decode", data=json.dumps(started), headers=headers) as resp:
            assert resp.status == 200, await resp.text()
            (decoded,) = json_format.Parse(await resp.text(), Payloads()).payloads
        assert CODE_MARKER in decoded.data.decode() and INPUT_MARKER in decoded.data.decode()
        body = json.dumps({"payloads": references[:1]})
        async with http.post(f"{codec.url}/decode?preserveStorageRefs=true", data=body, headers=headers) as resp:
            (kept,) = json_format.Parse(await resp.text(), Payloads()).payloads
        assert kept.metadata["messageType"] == b"temporal.api.sdk.v1.ExternalStorageReference"
        async with http.post(f"{codec.url}/download", data=body, headers=headers) as resp:
            assert resp.status == 200, await resp.text()
            (downloaded,) = json_format.Parse(await resp.text(), Payloads()).payloads
        assert BIG_MARKER in downloaded.data.decode()
        # And the temporal CLI through it.
        decoded_show = await temporal_cli(
            "--codec-endpoint",
            codec.url,
            "workflow",
            "show",
            "-w",
            runs["monty"],
            "-o",
            "json",
            address=temporal_address,
        )
        assert markers_in(readable_texts(json.loads(decoded_show)), MARKERS) >= {
            CODE_MARKER,
            ERROR_MARKER,
            OUTPUT_MARKER,
        }
