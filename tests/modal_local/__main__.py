"""``python -m tests.modal_local --port PORT``: run the local Modal server until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import tempfile

from .server import serve


def main() -> None:
    parser = argparse.ArgumentParser(description="A local Modal-compatible gRPC server (control plane + router)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port (printed on stdout)")
    parser.add_argument("--root", default=None, help="where sandbox files live (default: a fresh temporary dir)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)  # a handler that fails says why on stderr
    root = args.root or tempfile.mkdtemp(prefix="modal-local-")
    try:
        asyncio.run(serve(args.host, args.port, root))
    finally:
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
