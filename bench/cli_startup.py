"""How long the commands a person types while deciding approvals take, against ``python -c pass``.

Each command runs as a person runs it (the ``codemode`` script beside this interpreter, a new
process each time), round-robin with the floor so that load from other processes falls on all
of them alike; the median of ``--repeat`` runs is printed with its ratio to the floor and what
it costs over it. ``python -c "import temporalio.client"`` is a reference: a command that
talks to a server cannot cost less than that import. The CPU time (user + system) of each
command is printed too: on a machine shared with other work it swings far less than the time.

Without ``--address``, an embedded server (``codemode server``) and a worker (``codemode
worker --tools examples.tools``) are started for the run, and ``examples/email.py`` parks on
its approval to give ``status`` an execution to read. Goals (issue 28): ``--help`` and
``approve --help`` <= 0.3 s, ``status ID`` <= 0.6 s, on a quiet machine.

    python bench/cli_startup.py [--repeat 9] [--address HOST:PORT --id EXECUTION_ID]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOALS = {"codemode --help": 0.3, "codemode approve --help": 0.3, "codemode status ID": 0.6}


def codemode_command() -> list[str]:
    """The ``codemode`` script installed beside this interpreter (what a person types), else ``-m``."""
    script = Path(sys.executable).parent / "codemode"
    return [str(script)] if script.exists() else [sys.executable, "-m", "codemode"]


def timed(argv: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """The wall time and the CPU time (user + system) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@contextmanager
def background(argv: list[str], env: dict[str, str], log: Path, ready: str, timeout: float = 60) -> Iterator[None]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, env=env, cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + timeout
        while ready not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{' '.join(argv)} did not get ready:\n{log.read_text(errors='replace')}")
            time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def own_server(env: dict[str, str], folder: Path) -> Iterator[str]:
    """An embedded server and a worker for this run; yields the id of an execution parked on an approval."""
    from codemode.worker.dev_server import free_port

    port = free_port()
    address = f"127.0.0.1:{port}"
    env.update(TEMPORAL_ADDRESS=address, CODEMODE_DATA_DIR=str(folder / "data"))
    cli = codemode_command()
    server = [*cli, "server", "--port", str(port), "--ui-port", str(free_port()), "--db", str(folder / "db.sqlite")]
    with (
        background(server, env, folder / "server.log", "Temporal server:"),
        background([*cli, "worker", "--tools", "examples.tools"], env, folder / "worker.log", "Worker ready"),
    ):
        run = subprocess.run(
            [*cli, "run", "examples/email.py", "--tools", "examples.tools"],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r"codemode approve (\S+) ", run.stderr)
        if run.returncode != 3 or not found:
            raise SystemExit(f"examples/email.py did not park on its approval:\n{run.stdout}\n{run.stderr}")
        yield found.group(1)


def measure(
    commands: dict[str, tuple[list[str], tuple[int, ...]]], env: dict[str, str], repeat: int
) -> dict[str, tuple[float, float]]:
    """Per command: the median wall time and the median CPU time."""
    for argv, ok in commands.values():  # once each first: the page cache, .pyc files
        timed(argv, env, ok)
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, (argv, ok) in commands.items():
            runs[name].append(timed(argv, env, ok))
    return {name: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for name, r in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--address", help="A running server (with --id); default: start one for the run.")
    parser.add_argument("--id", dest="execution_id", help="An execution on that server for `status`.")
    args = parser.parse_args()
    if bool(args.address) != bool(args.execution_id):
        parser.error("give --address and --id together")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CODEMODE_"))}
    env["CODEMODE_TASK_QUEUE"] = f"bench-cli-{os.getpid()}"
    cli = codemode_command()
    folder = Path(tempfile.mkdtemp(prefix="cli-startup-"))
    try:
        if args.address:
            env["TEMPORAL_ADDRESS"] = args.address
            results = run_all(cli, env, args.execution_id, args.repeat)
        else:
            with own_server(env, folder) as execution_id:
                results = run_all(cli, env, execution_id, args.repeat)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report(results, args.repeat)


def run_all(cli: list[str], env: dict[str, str], execution_id: str, repeat: int) -> dict[str, tuple[float, float]]:
    commands = {
        "python -c pass": ([sys.executable, "-c", "pass"], (0,)),
        'python -c "import temporalio.client"': ([sys.executable, "-c", "import temporalio.client"], (0,)),
        "codemode --help": ([*cli, "--help"], (0,)),
        "codemode approve --help": ([*cli, "approve", "--help"], (0,)),
        "codemode run --help": ([*cli, "run", "--help"], (0,)),
        "codemode status ID": ([*cli, "status", execution_id], (0,)),
        "codemode list": ([*cli, "list", "--limit", "5"], (0,)),
    }
    return measure(commands, env, repeat)


def report(results: dict[str, tuple[float, float]], repeat: int) -> None:
    floor, _ = results["python -c pass"]
    reference, reference_cpu = results['python -c "import temporalio.client"']
    load = os.getloadavg()[0]
    print(f"median of {repeat} runs each, round-robin; load average {load:.1f} on {os.cpu_count()} cores")
    print(
        f"{'command':38} {'time':>7} {'x floor':>8} {'- floor':>8} {'x tc ref':>9}"
        f" {'cpu':>7} {'x tc ref':>9}  goal (time)"
    )
    for name, (median, cpu) in results.items():
        goal = GOALS.get(name)
        verdict = "" if goal is None else f"{goal:.1f}s {'ok' if median <= goal else 'over'}"
        print(
            f"{name:38} {median:6.3f}s {median / floor:7.1f}x {median - floor:7.3f}s {median / reference:8.2f}x"
            f" {cpu:6.3f}s {cpu / reference_cpu:8.2f}x  {verdict}"
        )


if __name__ == "__main__":
    main()
