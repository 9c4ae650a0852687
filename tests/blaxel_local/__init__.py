"""A local Blaxel-compatible server: Blaxel's cloud cannot be reached from here.

``python -m tests.blaxel_local --port PORT`` serves the control plane and each sandbox's API
on one aiohttp port (``server.py`` lists the calls). The unmodified ``blaxel`` SDK talks to
it once its control-plane client is pointed there (``client.with_base_url(URL)``, which the
blaxel runtime does for ``CODEMODE_BLAXEL_API_URL``); the sandbox's URL comes from the
record the server returns. Sandboxes are the local E2B server's: real local processes in
bubblewrap, frozen with SIGSTOP while in standby.
"""

from __future__ import annotations

from tests.e2b_local import LocalE2BServer


class LocalBlaxelServer(LocalE2BServer):
    """``python -m tests.blaxel_local`` in a subprocess on an ephemeral port."""

    module = "tests.blaxel_local"

    @property
    def env(self) -> dict[str, str]:  # type: ignore[override]
        """What a worker needs to use this server: the credentials and where the API is."""
        return {"BL_API_KEY": "local-test-key", "BL_WORKSPACE": "local", "CODEMODE_BLAXEL_API_URL": self.url}
