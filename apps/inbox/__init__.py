"""``codemode inbox``: a small server-rendered web page where an authenticated person sees
every call waiting for approval across executions and approves, denies, edits the arguments
then approves, or answers instead of the tool; and where signed links from notifications land.

- ``auth.py``: who is at the page (trusted proxy header, users file of hashed tokens, a login cookie)
- ``data.py``: what waits and what was decided, from Temporal's visibility index and histories
- ``views.py``: HTML (jinja2 templates under ``templates/``)
- ``app.py``: the aiohttp application: routes, forms, decisions (through ``send_decision``)

The face the CLI starts it through (``codemode inbox``, ``codemode dev``): ``InboxAuth`` (and
``AuthConfigError``), ``inbox_signer`` (and ``SIGNING_KEY_ENV``), ``start_inbox``, each
imported when first used (the page's server needs aiohttp and Jinja2, a command's ``--help``
does not).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemode.apps.inbox.auth import AuthConfigError, InboxAuth
    from codemode.apps.inbox.serve import start_inbox
    from codemode.apps.inbox.signing import SIGNING_KEY_ENV, inbox_signer

_FACE = {
    "AuthConfigError": "auth",
    "InboxAuth": "auth",
    "start_inbox": "serve",
    "SIGNING_KEY_ENV": "signing",
    "inbox_signer": "signing",
}

__all__ = ["SIGNING_KEY_ENV", "AuthConfigError", "InboxAuth", "inbox_signer", "start_inbox"]


def __getattr__(name: str) -> Any:
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
