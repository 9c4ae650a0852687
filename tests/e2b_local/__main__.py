"""``python -m tests.e2b_local --port PORT``: run the local E2B server until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile

from .server import serve


def main() -> None:
    parser = argparse.ArgumentParser(description="A local E2B-compatible server (control plane + envd on one port)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port (printed on stdout)")
    parser.add_argument("--root", default=None, help="where sandbox files live (default: a fresh temporary dir)")
    parser.add_argument("--envd-version", default="0.6.13")
    parser.add_argument("--api-key", default=None, help="accept only this key (default: any non-empty key)")
    args = parser.parse_args()
    root = args.root or tempfile.mkdtemp(prefix="e2b-local-")
    try:
        asyncio.run(serve(args.host, args.port, root, envd_version=args.envd_version, api_key=args.api_key))
    finally:
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
