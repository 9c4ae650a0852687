"""``python -m tests.blaxel_local --port PORT``: run the local Blaxel server until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile

from .server import serve


def main() -> None:
    parser = argparse.ArgumentParser(description="A local Blaxel-compatible server (control plane + sandbox API)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port (printed on stdout)")
    parser.add_argument("--root", default=None, help="where sandbox files live (default: a fresh temporary dir)")
    parser.add_argument("--api-key", default=None, help="accept only this key (default: any non-empty key)")
    parser.add_argument("--standby-after", type=float, default=1.0, help="idle seconds before a sandbox is frozen")
    args = parser.parse_args()
    root = args.root or tempfile.mkdtemp(prefix="blaxel-local-")
    try:
        asyncio.run(serve(args.host, args.port, root, api_key=args.api_key, standby_after=args.standby_after))
    finally:
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
