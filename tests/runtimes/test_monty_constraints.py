"""MONTY_CONSTRAINTS measured, not believed: every flag is checked against what the installed
Monty really accepts, by running a snippet that needs the feature on a real pool.

A snippet is *accepted* when it runs to its end with the expected output; *rejected* when
Monty refuses it (syntax, type check or run-time error). Each flag must equal the measured
acceptance, with type checking on (what users get) and off (what the VM itself does). When
Monty changes, this file fails and says which flag or module to update in runtimes/monty.py.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.runtimes import CodeExecutionError, CodeRuntimeError, ExecutionResult, FunctionCall
from codemode.runtimes.monty import MONTY_CONSTRAINTS, MONTY_MODULES, MONTY_OS_MODULES, MontyRuntime


@pytest.fixture(scope="module", params=[True, False], ids=["type-checked", "unchecked"])
async def monty(request: pytest.FixtureRequest) -> AsyncIterator[MontyRuntime]:
    rt = MontyRuntime(type_check=request.param)
    try:
        yield rt
    finally:
        await rt.aclose()


@pytest.fixture(scope="module")
async def unchecked() -> AsyncIterator[MontyRuntime]:
    rt = MontyRuntime(type_check=False)
    try:
        yield rt
    finally:
        await rt.aclose()


async def attempt(rt: MontyRuntime, code: str, inputs: dict[str, Any] | None = None) -> Any:
    """The snippet's output, or the CodeExecutionError Monty refused it with."""
    try:
        execution = await rt.execute(code, functions=[], inputs=inputs)
    except CodeExecutionError as err:
        return err
    async with execution:
        try:
            event = await execution.next()
        except CodeExecutionError as err:
            return err
    assert not isinstance(event, FunctionCall), f"unexpected call {event}"
    assert isinstance(event, ExecutionResult)
    return event.output


async def accepts(rt: MontyRuntime, code: str, expected: Any, inputs: dict[str, Any] | None = None) -> bool:
    outcome = await attempt(rt, code, inputs)
    if isinstance(outcome, CodeExecutionError):
        return False
    assert outcome == expected, f"Monty ran {code!r} but computed {outcome!r}, not {expected!r}"
    return True


#: flag -> (snippet needing the feature, its output under CPython)
FEATURES: dict[str, tuple[str, Any]] = {
    "supports_while_loops": ("i = 0\nwhile i < 3:\n    i += 1\ni", 3),
    "supports_comprehensions": (
        "[x * 2 for x in range(3)] + sorted({x for x in [5]}) + list({k: 1 for k in [7]}) + [sum(x for x in [1, 2])]",
        [0, 2, 4, 5, 7, 3],
    ),
    "supports_lambdas": ("double = lambda x: x * 2\nsorted([3, 1, 2], key=lambda v: -v) + [double(4)]", [3, 2, 1, 8]),
    "supports_fstrings": ("n = 7\nf'{n:>3}|{n!r}|{n * 2}'", "  7|7|14"),
    "supports_try_except": (
        "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    r = 'caught ' + str(e)\nfinally:\n    r += '!'\nr",
        "caught division by zero!",
    ),
    "supports_classes": (
        "class Point:\n    def __init__(self, x: int) -> None:\n        self.x = x\n"
        "    def double(self) -> int:\n        return self.x * 2\nPoint(21).double()",
        42,
    ),
    "supports_class_inheritance": (
        "class Base:\n    def name(self) -> str:\n        return 'base'\nclass Child(Base):\n    pass\nChild().name()",
        "base",
    ),
    "supports_generators": ("def gen():\n    yield 1\n    yield 2\nlist(gen())", [1, 2]),
    "supports_del": ("d = {'a': 1, 'b': 2}\ndel d['a']\nd", {"b": 2}),
    "supports_match": (
        "def kind(v: object) -> str:\n    match v:\n        case [x, y]:\n            return 'pair'\n"
        "        case {'k': _}:\n            return 'map'\n        case _:\n            return 'other'\n"
        "[kind([1, 2]), kind({'k': 1}), kind(3)]",
        ["pair", "map", "other"],
    ),
    "supports_async": (
        "import asyncio\nasync def twice(x: int) -> int:\n    await asyncio.sleep(0)\n    return x * 2\n"
        "await asyncio.gather(twice(1), twice(2))",
        [2, 4],
    ),
    "supports_imports": ("import json\njson.dumps({'a': 1})", '{"a": 1}'),
}


@pytest.mark.parametrize("flag", sorted(FEATURES))
async def test_flag_matches_what_monty_accepts(monty: MontyRuntime, flag: str) -> None:
    code, expected = FEATURES[flag]
    measured = await accepts(monty, code, expected)
    assert getattr(MONTY_CONSTRAINTS, flag) == measured, f"{flag}: Monty {'accepts' if measured else 'rejects'} {code!r}"


async def test_filesystem_flag_matches(monty: MontyRuntime, tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text("host file")
    measured = await accepts(monty, "open(path).read()", "host file", inputs={"path": str(path)})
    assert MONTY_CONSTRAINTS.supports_filesystem == measured


async def test_third_party_flag_matches(monty: MontyRuntime) -> None:
    import pydantic  # installed on the host (a dependency), so Monty could only be ignoring it

    measured = await accepts(monty, "import pydantic\npydantic.VERSION", pydantic.VERSION)
    assert MONTY_CONSTRAINTS.supports_third_party_packages == measured


#: module -> (a use of it, the output CPython gives): importing is not enough, it must work.
MODULE_USES: dict[str, tuple[str, Any]] = {
    "asyncio": ("async def one() -> int:\n    return 1\nawait asyncio.gather(one())", [1]),
    "base64": ("base64.b64encode(b'hi')", b"aGk="),
    "binascii": ("binascii.hexlify(b'\\x01\\xff')", b"01ff"),
    "bisect": ("bisect.bisect_left([1, 3, 5], 3)", 1),
    "collections": ("collections.Counter('aab')['a']", 2),
    "copy": ("copy.deepcopy({'a': [1]})", {"a": [1]}),
    "csv": ("list(csv.reader(['a,b']))", [["a", "b"]]),
    "dataclasses": ("@dataclasses.dataclass\nclass P:\n    x: int\nP(1).x", 1),
    "datetime": ("(datetime.date(2024, 1, 31) + datetime.timedelta(days=1)).isoformat()", "2024-02-01"),
    "decimal": ("str(decimal.Decimal('1.10') + decimal.Decimal('2.20'))", "3.30"),
    "functools": ("functools.reduce(lambda a, b: a + b, [1, 2, 3])", 6),
    "hashlib": ("hashlib.sha256(b'').hexdigest()[:8]", "e3b0c442"),
    "itertools": ("list(itertools.chain([1], [2]))", [1, 2]),
    "json": ("json.loads(json.dumps({'a': [1]}))", {"a": [1]}),
    "math": ("math.gcd(12, 18)", 6),
    "random": ("0 <= random.random() < 1", True),
    "re": ("re.findall(r'\\d+', 'a1b22')", ["1", "22"]),
    "sys": ("type(sys.version).__name__", "str"),
    "time": ("time.time() > 0", True),
    "tomllib": ("tomllib.loads('a = 1')", {"a": 1}),
    "typing": ("x: typing.List[int] = [1]\nx", [1]),  # annotations only: no typing.cast, TypedDict
    "unicodedata": ("unicodedata.name('a')", "LATIN SMALL LETTER A"),
}


def test_every_listed_module_has_a_use() -> None:
    assert sorted(MODULE_USES) == sorted(MONTY_MODULES)


async def test_every_listed_module_imports_and_works(monty: MontyRuntime) -> None:
    wrong = {}
    for name in MONTY_MODULES:
        code, expected = MODULE_USES[name]
        outcome = await attempt(monty, f"import {name}\n{code}")
        if outcome != expected:
            wrong[name] = outcome
    assert wrong == {}


@pytest.mark.parametrize("name", ["statistics", "uuid", "string", "numpy", "pydantic"])
async def test_unlisted_modules_do_not_import(unchecked: MontyRuntime, name: str) -> None:
    assert name not in MONTY_MODULES
    outcome = await attempt(unchecked, f"import {name}\n'imported'")
    assert isinstance(outcome, CodeRuntimeError)
    assert outcome.error_type == "ModuleNotFoundError"
    assert outcome.line == 1


async def test_module_list_is_exactly_what_monty_imports(unchecked: MontyRuntime) -> None:
    """Every stdlib name CPython knows, tried on Monty: the importable ones must be the
    listed modules plus the OS ones held back from the prompt."""
    importable = []
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name == "antigravity":
            continue
        if await attempt(unchecked, f"import {name}\n1") == 1:
            importable.append(name)
    assert sorted(importable) == sorted({*MONTY_MODULES, *MONTY_OS_MODULES})


@pytest.mark.parametrize("name", MONTY_OS_MODULES)
async def test_os_modules_import_but_reach_nothing(unchecked: MontyRuntime, name: str) -> None:
    code = {
        "os": "import os\nos.listdir('/')",
        "pathlib": "import pathlib\npathlib.Path('/etc/hostname').read_text()",
        "posixpath": "import posixpath\nposixpath.exists('/etc/hostname')",
    }[name]
    outcome = await attempt(unchecked, code)
    assert isinstance(outcome, CodeRuntimeError) and outcome.error_type == "PermissionError"


def test_capabilities_agree_with_the_constraints() -> None:
    caps = MontyRuntime.capabilities
    assert caps.importable_modules == list(MONTY_MODULES)
    assert MONTY_CONSTRAINTS.importable_modules == MONTY_MODULES
    assert caps.filesystem == MONTY_CONSTRAINTS.supports_filesystem
    assert caps.third_party_packages == MONTY_CONSTRAINTS.supports_third_party_packages
