"""The runner's input through a FIFO in the sandbox, for providers whose own stdin to the
runner cannot be taken over by another worker (podman closes a container's stdin for good
when its first client goes; a Modal sandbox's stdin is written by byte offset, and a second
worker's handle starts at 0). The sandbox's command is ``LOADER``: it makes the FIFO, holds
it open as the runner's stdin and reads the runner's zip from it; each worker that
attaches execs ``RELAY``, which copies its own stdin into the FIFO, and ends when that worker's
connection does (the runner does not).
"""

from __future__ import annotations

#: Where the runner's input comes from: a FIFO in the sandbox's private /tmp. Not the
#: sandbox's stdin: podman closes that for good when the first client attached to it goes
#: away (a worker that dies, or detaches before a pause), so no other worker could answer.
INPUT_FIFO = "/tmp/.codemode-in"

#: Where the loader writes the runner's zip (``runner/package.py``) before it runs it.
RUNNER_ZIP_FILE = "/tmp/.codemode-runner.zip"

#: The sandbox's command: make the FIFO, hold it open for reading and writing (so writers
#: coming and going never look like an end of input) as fd 0, read ``<length>\\n<runner
#: zip>`` from it unbuffered (the bootstrap line after it stays for the runner), write the
#: zip to the sandbox's private /tmp and run its ``__main__`` as ``python runner.zip`` would.
LOADER = f"""\
import os
try:
    os.mkfifo({INPUT_FIFO!r}, 0o600)
except FileExistsError:
    pass
fd = os.open({INPUT_FIFO!r}, os.O_RDWR)
os.dup2(fd, 0)
os.close(fd)
def take(n):
    b = b""
    while len(b) < n:
        c = os.read(0, n - len(b))
        if not c:
            raise SystemExit(70)
        b += c
    return b
h = b""
while not h.endswith(b"\\n"):
    h += take(1)
data = take(int(h))
with open({RUNNER_ZIP_FILE!r}, "wb") as f:
    f.write(data)
import sys, zipimport
sys.path.insert(0, {RUNNER_ZIP_FILE!r})
main = zipimport.zipimporter({RUNNER_ZIP_FILE!r}).get_code("__main__")
exec(main, {{"__name__": "__main__", "__builtins__": __builtins__}})
"""

#: What a worker execs in the sandbox to reach the runner: its stdin (the exec's attach
#: stream) copied into the FIFO. It ends when the worker's connection does; the runner does not.
RELAY = f"""\
import os
try:
    os.mkfifo({INPUT_FIFO!r}, 0o600)
except FileExistsError:
    pass
fd = os.open({INPUT_FIFO!r}, os.O_WRONLY)
while True:
    data = os.read(0, 1 << 16)
    if not data:
        break
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
"""
