"""One secured front for the whole session (``rig.py``): a dev server behind nginx with mTLS on
one port and an API key on the other, on namespace ``codemode-prod``; stopped at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.secure_front.rig import SecureFront, nginx_path


@pytest.fixture(scope="session")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureFront]:
    if nginx_path() is None and os.environ.get("CI", "").lower() not in ("1", "true"):
        pytest.skip("nginx is not installed here (apt-get install nginx-light; CI installs it)")
    rig = SecureFront(tmp_path_factory.mktemp("secure-front")).start()
    try:
        yield rig
    finally:
        rig.stop()
