"""Namespaced functions (``memory.read_graph()``, an MCP server's tools) on every runtime in
``RUNTIME_FACTORIES``: reached through their namespace, reported by their identity (the
canonical id), read before being called, refused when unknown, named in the stubs."""

from __future__ import annotations

import pytest

from codemode.runtimes import (
    CodeRuntimeError,
    ToolSignature,
    normalize_functions,
    render_stubs,
    signature_from_json_schema,
)

from .test_contract import drive, guarded

SIGS = {
    s.name: s
    for s in (
        signature_from_json_schema(
            "mcp:memory/read_graph",
            {"type": "object", "properties": {"depth": {"type": "integer"}}},
            path="memory.read_graph",
        ),
        signature_from_json_schema(
            "mcp:memory/create-entities",
            {
                "type": "object",
                "properties": {"names": {"type": "array", "items": {"type": "string"}}},
                "required": ["names"],
            },
            path="memory.create_entities",
        ),
        signature_from_json_schema("plain", {"type": "object", "properties": {}}),
    )
}

CODE = """
a = memory.create_entities(["x", "y"])
read = memory.read_graph
b = read(depth=2)
c = plain()
[a, b, c, type(memory).__name__]
"""


async def test_namespaced_calls_on_every_runtime(runtime_factory) -> None:
    seen = []

    def answer(call):
        seen.append((call.function_name, call.args, call.kwargs))
        return len(seen)

    async with runtime_factory() as rt:
        result = await drive(await guarded(rt.execute(CODE, functions=SIGS)), answer)
    assert result.output == [1, 2, 3, "MemoryTools"]
    assert seen == [
        ("mcp:memory/create-entities", [["x", "y"]], {}),
        ("mcp:memory/read_graph", [], {"depth": 2}),
        ("plain", [], {}),
    ]


async def test_unknown_namespace_function_raises_attribute_error(runtime_factory) -> None:
    from codemode.runtimes import CodeTypeError

    code = "try:\n    memory.nope()\n    r = 'called'\nexcept AttributeError as e:\n    r = str(e)\nr"
    async with runtime_factory() as rt:
        if rt.capabilities.type_checking:
            # Checked against the stubs: refused before it runs, naming the missing function.
            with pytest.raises(CodeTypeError, match="nope"):
                await rt.execute(code, functions=SIGS)
            return
        result = await drive(await guarded(rt.execute(code, functions=SIGS)), lambda call: None)
    assert "nope" in result.output


async def test_monty_type_checks_namespaced_calls() -> None:
    from codemode.runtimes import CodeTypeError
    from codemode.runtimes.monty import MontyRuntime

    async with MontyRuntime() as rt:
        with pytest.raises(CodeTypeError, match="has no attribute `nope`"):
            await rt.execute("memory.nope()", functions=SIGS)
        with pytest.raises(CodeTypeError, match="MemoryTools.create_entities"):
            await rt.execute("memory.create_entities(names=3)", functions=SIGS)
    async with MontyRuntime(type_check=False) as rt:
        execution = await rt.execute("memory.nope()", functions=SIGS)
        with pytest.raises(CodeRuntimeError, match="memory has no function 'nope'"):
            await guarded(execution.next())


async def test_monty_namespace_survives_a_checkpoint() -> None:
    from codemode.runtimes.monty import MontyRuntime

    async with MontyRuntime() as rt:
        execution = await rt.execute("a = memory.read_graph()\nb = memory.read_graph(depth=1)\n[a, b]", functions=SIGS)
        first = await guarded(execution.next())
        blob = await execution.checkpoint()
        await execution.close()
        restored = await rt.restore(blob)
        await restored.provide_result("A", call_id=first.call_id)
        second = await guarded(restored.next())
        assert (second.function_name, second.kwargs) == ("mcp:memory/read_graph", {"depth": 1})
        await restored.provide_result("B", call_id=second.call_id)
        assert (await guarded(restored.next())).output == ["A", "B"]


def test_stubs_and_name_collisions() -> None:
    stubs = render_stubs(SIGS)
    assert "def plain() -> Any: ..." in stubs
    assert "class MemoryTools:" in stubs and "    def read_graph(self, depth: int = ...) -> Any: ..." in stubs
    assert stubs.rstrip().endswith("memory: MemoryTools")
    clash = ToolSignature(name="memory")
    with pytest.raises(ValueError, match="function 'memory' and the namespace of 'mcp:memory/read_graph'"):
        normalize_functions({**SIGS, "memory": clash})
    with pytest.raises(ValueError, match="not a valid namespaced function name"):
        normalize_functions({"x:y": ToolSignature(name="x:y", path="a.b.c")})


async def test_gathered_async_namespaced_calls(runtime_factory) -> None:
    sig = signature_from_json_schema(
        "mcp:web/fetch", {"type": "object", "properties": {"url": {"type": "string"}}}, path="web.fetch", is_async=True
    )
    code = "import asyncio\npages = await asyncio.gather(*[web.fetch(url=u) for u in ['a', 'b', 'c']])\npages"
    async with runtime_factory() as rt:
        execution = await guarded(rt.execute(code, functions={sig.name: sig}))
        batch = await guarded(execution.next_batch())
        assert sorted(c.kwargs["url"] for c in batch) == ["a", "b", "c"]  # all three before any answer
        for call in batch:
            await execution.provide_result(call.kwargs["url"].upper(), call_id=call.call_id)
        assert (await guarded(execution.next())).output == ["A", "B", "C"]
