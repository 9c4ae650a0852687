"""A local Modal-compatible server: Modal's cloud cannot be reached from here.

``python -m tests.modal_local --port PORT`` serves Modal's control plane and its task command
router over gRPC on one port (grpclib, handlers built from the SDK's ``modal_proto`` base
classes; ``server.py`` lists the RPCs). The unmodified ``modal`` SDK talks to it through
``MODAL_SERVER_URL=http://localhost:PORT`` with any ``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET``
(and ``MODAL_CONFIG_PATH`` at a file of its own, so no user config is read). Sandboxes are the
local E2B server's: real local processes in bubblewrap.
"""

from __future__ import annotations

import os
import tempfile

from tests.e2b_local import LocalE2BServer

#: The image id tests create sandboxes from (``Image.from_id``: building one needs more RPCs).
IMAGE_ID = "im-local0000000000000000"


class LocalModalServer(LocalE2BServer):
    """``python -m tests.modal_local`` in a subprocess on an ephemeral port."""

    module = "tests.modal_local"

    @property
    def env(self) -> dict[str, str]:  # type: ignore[override]
        """What a worker needs to use this server (the URL, any token, no user config)."""
        return {
            "MODAL_SERVER_URL": self.url,
            "MODAL_TOKEN_ID": "ak-local",
            "MODAL_TOKEN_SECRET": "as-local",
            "MODAL_CONFIG_PATH": os.path.join(tempfile.gettempdir(), "codemode-modal-local.toml"),
            "CODEMODE_MODAL_IMAGE": IMAGE_ID,
        }
