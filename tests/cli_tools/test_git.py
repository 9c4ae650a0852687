"""git from code on a temporary repository: log, diff and status as the code calls them, the
canonical id in every record and summary, ``commit`` approved by a person and run once, and
the injection probe: nothing the code passes reaches a shell, becomes an option or a global
option, or runs a subcommand off the allow-list."""

from __future__ import annotations

import asyncio
from pathlib import Path

from codemode.client.executions import start_execution
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest, DenySignal
from tests.workflows.test_approval import wait_for_state

from .conftest import cli_worker, git, git_config

READ = """
log = git.log(max_count=5, oneline=True)
status = git.status(porcelain=True)
diff = git.diff(path="src")
first = git.log("HEAD~1", max_count=1, format="%s")
{"log": log["stdout"].splitlines(), "status": status["stdout"], "diff": diff["stdout"],
 "first": first["stdout"].strip(), "codes": [log["returncode"], status["returncode"], diff["returncode"]]}
"""


async def test_log_status_and_diff_from_code(client, repo: Path) -> None:
    async with cli_worker(client, git_config(repo)) as worker:
        handle = await start_execution(client, CodeExecutionRequest(code=READ), task_queue=worker.task_queue)
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success, outcome.error
    out = outcome.output
    assert [line.split(" ", 1)[1] for line in out["log"]] == ["add the app", "add notes"]
    assert out["status"] == " M src/app.py\n"
    assert "-print('hello')\n+print('hello, world')" in out["diff"]
    assert out["first"] == "add notes"
    assert out["codes"] == [0, 0, 0]
    # The canonical id is the activity type and the record's tool; the summary is the command line.
    assert [c.tool for c in outcome.tool_calls] == ["cli:git/log", "cli:git/status", "cli:git/diff", "cli:git/log"]
    assert [c.summary for c in outcome.tool_calls] == [
        "cli:git/log: git log --max-count=5 --oneline",
        "cli:git/status: git status --porcelain",
        "cli:git/diff: git diff -- src",
        "cli:git/log: git log --max-count=1 --format=%s 'HEAD~1'",
    ]
    history = await handle.fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert [t for t in scheduled if t.startswith("cli:")] == [
        "cli:git/log",
        "cli:git/status",
        "cli:git/diff",
        "cli:git/log",
    ]


PROBE = """
import json
out = {}
# No shell: the text is one argument of --grep, searched for in the commit messages.
out["grep"] = git.log(grep="x; rm -rf " + sentinel)["stdout"]
# A path after `--` is a path, never an option: nothing is written.
out["output_path"] = git.diff(path="--output=" + written)["stdout"]
# A positional that the command would read as an option is refused.
try:
    git.log("--output=" + written)
except ValueError as e:
    out["dash"] = str(e)
# Raw flags, global options and flags the host refused are not parameters at all.
for name, kwargs in [("raw", {"-c": "alias.x=!touch " + sentinel}), ("c", {"c": "alias.x=!touch " + sentinel}),
                     ("git_dir", {"git_dir": "/"}), ("output", {"output": written})]:
    try:
        git.log(**kwargs) if name != "output" else git.diff(**kwargs)
    except TypeError as e:
        out[name] = str(e)
# A subcommand off the allow-list does not exist in the namespace.
try:
    git.config("alias.x", "!touch " + sentinel)
except AttributeError as e:
    out["config"] = str(e)
out
"""


async def test_injection_probe(client, repo: Path, tmp_path: Path) -> None:
    sentinel = tmp_path / "sentinel"
    sentinel.write_text("still here")
    written = tmp_path / "written.txt"
    async with cli_worker(client, git_config(repo)) as worker:
        req = CodeExecutionRequest(
            code=PROBE, runtime="python", inputs={"sentinel": str(sentinel), "written": str(written)}
        )
        handle = await start_execution(client, req, task_queue=worker.task_queue)
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success, outcome.error
    out = outcome.output
    assert out["grep"] == "" and out["output_path"] == ""
    assert "starts with '-', so the command would read it as an option; it is refused" in out["dash"]
    for name in ("raw", "c", "git_dir", "output"):
        assert "unexpected keyword argument" in out[name], out
    assert "config" in out["config"]
    assert sentinel.read_text() == "still here" and not written.exists()
    # Only the two calls that were allowed ran; the refused ones never left the sandbox's host.
    ran = [c for c in outcome.tool_calls if c.status == "ok"]
    assert [c.summary for c in ran] == [
        f"cli:git/log: git log '--grep=x; rm -rf {sentinel}'",
        f"cli:git/diff: git diff -- --output={written}",
    ]
    assert [c.status for c in outcome.tool_calls if c.status != "ok"] == ["error"] * (len(outcome.tool_calls) - 2)


COMMIT = """
git.add(pathspec="src/app.py")
done = git.commit(message="Greet the world")
[done["returncode"], git.log(max_count=1, format="%s")["stdout"].strip()]
"""


async def test_commit_waits_for_a_person_and_runs_once(client, repo: Path) -> None:
    before = git(repo, "rev-list", "--count", "HEAD").strip()
    config = git_config(repo, approval={"commit": "always", "add": "never"})
    async with cli_worker(client, config) as worker:
        handle = await start_execution(client, CodeExecutionRequest(code=COMMIT), task_queue=worker.task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
        (pending,) = status.pending_approvals
        assert pending.tool == "cli:git/commit"
        assert pending.summary == "cli:git/commit: git commit '--message=Greet the world'"
        assert git(repo, "rev-list", "--count", "HEAD").strip() == before  # nothing ran yet
        await handle.signal("approve", ApproveSignal(call_id=pending.call_id, by="alice"))
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success, outcome.error
    assert outcome.output == [0, "Greet the world"]
    assert int(git(repo, "rev-list", "--count", "HEAD")) == int(before) + 1
    commit = next(c for c in outcome.tool_calls if c.tool == "cli:git/commit")
    assert commit.approval.decision == "approved" and commit.approval.by == "alice" and commit.attempts == 1


async def test_a_denied_commit_never_runs_and_a_failing_command_raises(client, repo: Path) -> None:
    code = (
        "try:\n    git.commit(message='nope')\nexcept PermissionError as e:\n    denied = str(e)\n"
        "try:\n    git.log('no-such-revision')\nexcept RuntimeError as e:\n    failed = str(e)\n"
        "[denied, failed]"
    )
    before = git(repo, "rev-list", "--count", "HEAD")
    async with cli_worker(client, git_config(repo)) as worker:
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=worker.task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
        await handle.signal("deny", DenySignal(call_id=status.pending_approvals[0].call_id, by="bob", reason="not now"))
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success, outcome.error
    denied, failed = outcome.output
    assert "denied" in denied and "not now" in denied
    assert failed.startswith("CalledProcessError: cli:git/log: `git log no-such-revision` exited with status 128: ")
    assert "unknown revision" in failed
    assert git(repo, "rev-list", "--count", "HEAD") == before
    log = outcome.tool_calls[-1]
    assert log.error.type == "CalledProcessError" and log.attempts == 1  # a failing command is not retried


async def test_approval_when_parks_one_commit_and_runs_another(client, repo: Path) -> None:
    """``approval_when`` on a command (issue 36): decided per call on the worker, recorded."""
    rule = {"commit": [{"argument": "message", "op": "matches", "value": "(?i)release"}]}
    config = git_config(repo, approval={"add": "never"}, approval_when=rule)
    code = (
        'git.add(pathspec="src/app.py")\n'
        'git.commit(message="Greet the world")\n'
        "try:\n"
        '    r = git.commit(message="Release 1.0")["returncode"]\n'
        "except RuntimeError as e:\n"
        "    r = 'ran: nothing to commit' if 'nothing to commit' in str(e) else str(e)\n"
        "r"
    )
    async with cli_worker(client, config) as worker:
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=worker.task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
        (pending,) = status.pending_approvals
        assert pending.summary.endswith("'--message=Release 1.0'")
        assert pending.reason == "approval_when: message matches '(?i)release'"
        assert git(repo, "log", "-1", "--format=%s").strip() == "Greet the world"  # ran without a person
        await handle.signal("approve", ApproveSignal(call_id=pending.call_id, by="alice"))
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success and outcome.output == "ran: nothing to commit", outcome.error
    assert [c.approval is not None for c in outcome.tool_calls] == [False, False, True]
