"""Ed25519 keys of approvers: ``ed25519:BASE64`` public keys (what the approvers file lists)
and private keys kept in the user's config directory, one file per approver, mode 0600."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

PREFIX = "ed25519:"
#: An approver's name: what the approvers file, signatures and records call a person.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


class ApproverKeyError(ValueError):
    """A key that cannot be read or used (malformed text, a missing or unreadable file)."""


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ApproverKeyError(
            f"invalid approver name {name!r}: use 1 to 64 letters, digits, '.', '_', '@' or '-', "
            "starting with a letter or digit"
        )
    return name


def public_text(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PREFIX + base64.b64encode(raw).decode()


def parse_public(text: str) -> Ed25519PublicKey:
    """An ``ed25519:BASE64`` public key (32 bytes)."""
    if not isinstance(text, str) or not text.startswith(PREFIX):
        raise ApproverKeyError(f"not an Ed25519 public key: {text!r} (expected ed25519:BASE64)")
    try:
        raw = base64.b64decode(text[len(PREFIX) :], validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as err:
        raise ApproverKeyError(f"not an Ed25519 public key: {text!r} ({err})") from None


def verify(public: str, signature_b64: str, message: bytes) -> bool:
    """Whether ``signature_b64`` is ``public``'s Ed25519 signature of ``message``."""
    try:
        key = parse_public(public)
        key.verify(base64.b64decode(signature_b64, validate=True), message)
    except (ApproverKeyError, InvalidSignature, ValueError):
        return False
    return True


def sign(private: Ed25519PrivateKey, message: bytes) -> str:
    return base64.b64encode(private.sign(message)).decode()


def config_dir() -> Path:
    """Where approvers' private keys live: ``$XDG_CONFIG_HOME/codemode/approvers`` (default
    ``~/.config/codemode/approvers``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "codemode" / "approvers"


def key_path(name: str) -> Path:
    return config_dir() / f"{check_name(name)}.key"


def generate(name: str, *, force: bool = False) -> tuple[Path, str]:
    """Make ``name``'s key pair: the private key written to ``key_path(name)`` (mode 0600,
    never overwritten unless ``force``); returns the path and the public key text."""
    path = key_path(name)
    if path.exists() and not force:
        raise ApproverKeyError(f"{path} exists already: {name} has a key (use --force to replace it)")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path, public_text(private.public_key())


def load_private(path: str | Path) -> Ed25519PrivateKey:
    """A private key file (PEM, PKCS8, unencrypted) as ``keygen`` writes it."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as err:
        raise ApproverKeyError(f"cannot read the key file {p}: {err.strerror or err}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as err:
        raise ApproverKeyError(f"{p} is not an unencrypted PEM private key: {err}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ApproverKeyError(f"{p} holds a {type(key).__name__}, not an Ed25519 key")
    return key


def load_for(name: str, key_file: str | Path | None = None) -> Ed25519PrivateKey:
    """``name``'s private key: ``key_file`` when given, else the one ``keygen`` made."""
    if key_file is not None:
        return load_private(key_file)
    path = key_path(name)
    if not path.exists():
        raise ApproverKeyError(
            f"no key for approver {name!r} at {path}: make one with `codemode keygen --approver {name}` "
            "(and add its public key to the approvers file), or pass --key FILE"
        )
    return load_private(path)
