"""The secured-clusters guide's profiles are Temporal profiles that work: each TOML block loads
with the SDK's own loader, and the guide's two profiles, pointed at the secured front, connect
(the Cloud-shaped one with no CA of its own, trusting the system's roots as with Temporal Cloud:
here a bundle of the system's roots plus the rig's CA)."""

from __future__ import annotations

import re
from pathlib import Path

from temporalio.envconfig import ClientConfig

from tests.cli.runner import REPO, base_env, codemode
from tests.secure_front.rig import NAMESPACE, SecureFront

GUIDE = (REPO / "docs" / "guides" / "secured-clusters.md").read_text()
TOML = re.findall(r"```toml\n(.*?)```", GUIDE, flags=re.DOTALL)
SYSTEM_ROOTS = Path("/etc/ssl/certs/ca-certificates.crt")


def test_the_guides_profiles_load() -> None:
    profiles = {name for block in TOML for name in ClientConfig.load(config_source=block).profiles}
    assert profiles == {"cloud", "mtls"}


async def test_the_guides_profiles_reach_the_front(front: SecureFront, tmp_path: Path) -> None:
    cloud, mtls = TOML
    ca = front.cert("ca.pem")
    cloud = (
        cloud.replace("my-ns.a1b2c.tmprl.cloud:7233", front.apikey_address)
        .replace("my-ns.a1b2c", NAMESPACE)
        .replace("<your API key>", front.api_key)
    )
    mtls = (
        mtls.replace("temporal.internal.example:7233", front.mtls_address)
        .replace('"payments"', f'"{NAMESPACE}"')
        .replace("/etc/codemode/tls/client.pem", front.cert("client.pem"))
        .replace("/etc/codemode/tls/client.key", front.cert("client.key"))
        .replace("/etc/codemode/tls/ca.pem", ca)
    )
    config = tmp_path / "temporal.toml"
    config.write_text(cloud + "\n" + mtls)
    bundle = tmp_path / "roots.pem"
    bundle.write_text((SYSTEM_ROOTS.read_text() if SYSTEM_ROOTS.exists() else "") + Path(ca).read_text())
    env = base_env(TEMPORAL_CONFIG_FILE=str(config), CODEMODE_DATA_DIR=str(tmp_path / "data"), SSL_CERT_FILE=str(bundle))
    for profile in ("cloud", "mtls"):
        res = await codemode("list", "--profile", profile, env=env, timeout=30)
        assert res.rc == 0, res
