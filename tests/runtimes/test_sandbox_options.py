"""``SandboxOptions``: what a runtime cannot honour is refused before anything runs, with a
``CapabilityError`` that names it; a request with a malformed mount is refused when made."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from codemode.runtimes import CapabilityError, SandboxOptions
from codemode.runtimes.monty import MontyRuntime
from codemode.workflows.models import CodeExecutionRequest


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (SandboxOptions(mounts={"/srv/skills": "/skills"}), "cannot mount"),
        (SandboxOptions(network="full"), "network='full'"),
        (SandboxOptions(network="ratchet"), "network='ratchet'"),
        (SandboxOptions(packages=["tabulate"]), "cannot install packages (tabulate)"),
    ],
)
async def test_monty_refuses_what_it_cannot_do(options: SandboxOptions, words: str) -> None:
    async with MontyRuntime() as rt:
        with pytest.raises(CapabilityError) as err:
            await rt.execute("1", functions={}, options=options)
    assert words in str(err.value)
    assert err.value.kind == "capability"


async def test_default_options_run() -> None:
    async with MontyRuntime() as rt:
        execution = await rt.execute("1 + 1", functions={}, options=SandboxOptions())
        result = await execution.next()
    assert result.output == 2


def test_request_carries_options_only_when_asked() -> None:
    assert CodeExecutionRequest(code="1").sandbox_options() is None
    opts = CodeExecutionRequest(code="1", mounts={"/srv/skills": "/skills"}, network="ratchet").sandbox_options()
    assert opts == SandboxOptions(mounts={"/srv/skills": "/skills"}, network="ratchet")


@pytest.mark.parametrize("mounts", [{"skills": "/skills"}, {"/srv": "skills"}, {"/srv/../etc": "/x"}])
def test_request_refuses_bad_mounts(mounts: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match="mount"):
        CodeExecutionRequest(code="1", mounts=mounts)


def test_request_refuses_unknown_network() -> None:
    with pytest.raises(ValidationError):
        CodeExecutionRequest(code="1", network="some")  # type: ignore[arg-type]
