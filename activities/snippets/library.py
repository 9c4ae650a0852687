"""Where saved snippets are kept: the object store that holds executions' data, per Temporal
namespace, outside every execution's prefix (the retention sweep never touches them)::

    codemode/ns/{ns}/snippets/{name}/v/{version}.json   one version (content and provenance)
    codemode/ns/{ns}/snippets/{name}/g/{grant id}.json  a signed grant of one version

Versions are content-addressed: saving the same content again finds it saved; another content
is another key. With encryption keys each object is sealed like a checkpoint, bound to the
snippet's name. Reading a version checks its content still hashes to it."""

from __future__ import annotations

from pydantic import ValidationError

from codemode.approvals.snippet_signing import SnippetGrant
from codemode.storage import BlobNotFound, BlobStore, key_segment
from codemode.storage.encryption import Keyring

from ..checkpoints import CheckpointScope, CheckpointUnusable, seal, unseal
from .models import SavedSnippet, SnippetError, check_name


class SnippetLibrary:
    def __init__(self, store: BlobStore, namespace: str = "default", *, keys: Keyring | None = None) -> None:
        self.store = store
        self.bucket = store.bucket
        self.namespace = namespace
        self.keys = keys

    # -- keys --------------------------------------------------------------------------------

    @property
    def root(self) -> str:
        return f"codemode/ns/{key_segment(self.namespace)}/snippets/"

    def _version_key(self, name: str, version: str) -> str:
        return f"{self.root}{name}/v/{version}.json"

    def _grant_key(self, name: str, grant_id: str) -> str:
        return f"{self.root}{name}/g/{grant_id}.json"

    def _scope(self, name: str) -> CheckpointScope:
        """What a sealed object is bound to: this namespace's snippet of this name."""
        return CheckpointScope(namespace=self.namespace, execution_id=f"snippets/{name}", first_run_id="")

    async def _put(self, name: str, key: str, kind: str, data: bytes) -> None:
        if self.keys is not None:
            data = seal(self.keys, self._scope(name), data, kind)
        await self.store.put_object(bucket=self.bucket, key=key, data=data)

    async def _get(self, name: str, key: str, kind: str) -> bytes | None:
        try:
            blob = await self.store.get_object(bucket=self.bucket, key=key)
        except BlobNotFound:
            return None
        try:
            return unseal(self.keys, self._scope(name), blob, f"snippet {name}", kind)
        except CheckpointUnusable as err:
            raise SnippetError(f"snippet {name!r} cannot be read: {err}") from None

    # -- versions ----------------------------------------------------------------------------

    async def save(self, saved: SavedSnippet) -> tuple[SavedSnippet, bool]:
        """Keep ``saved``; (what is kept, whether it is new). The same content saved before is
        kept as it was (its first provenance)."""
        if not saved.intact():
            raise SnippetError(f"snippet {saved.name!r}: its version is not the hash of its content")
        existing = await self.get(saved.name, saved.version)
        if existing is not None:
            return existing, False
        data = saved.model_dump_json().encode()
        await self._put(saved.name, self._version_key(saved.name, saved.version), "snip", data)
        return saved, True

    async def versions(self, name: str) -> list[SavedSnippet]:
        """Every version of ``name``, oldest first (by when it was promoted)."""
        check_name(name)
        keys = await self.store.list_keys(bucket=self.bucket, prefix=f"{self.root}{name}/v/")
        found: list[SavedSnippet] = []
        for key in keys:
            version = key.rsplit("/", 1)[-1].removesuffix(".json")
            saved = await self.get(name, version)
            if saved is not None:
                found.append(saved)
        return sorted(found, key=lambda s: (s.provenance.promoted_at, s.version))

    async def get(self, name: str, version: str) -> SavedSnippet | None:
        """One version (its full hash), checked: None when there is none."""
        check_name(name)
        data = await self._get(name, self._version_key(name, version), "snip")
        if data is None:
            return None
        try:
            saved = SavedSnippet.model_validate_json(data)
        except ValidationError as err:
            raise SnippetError(f"snippet {name}@{version[:12]} is unreadable: {err}") from None
        if saved.version != version or saved.name != name or not saved.intact():
            raise SnippetError(f"snippet {name}@{version[:12]} was altered in the store: its content has another hash")
        return saved

    async def find(self, name: str, version: str | None = None) -> SavedSnippet:
        """The newest version of ``name``, or the one whose hash starts with ``version`` (8
        characters at least). Raises ``SnippetError`` saying what there is."""
        versions = await self.versions(name)
        if not versions:
            names = await self.names()
            listed = f"saved: {', '.join(names)}" if names else "none is saved"
            raise SnippetError(f"no saved snippet named {name!r} ({listed})")
        if version is None:
            return versions[-1]
        if len(version) < 8:
            raise SnippetError(f"give at least 8 characters of the version of {name!r}, not {version!r}")
        matches = [s for s in versions if s.version.startswith(version)]
        if len(matches) != 1:
            known = ", ".join(s.version[:12] for s in versions)
            why = "no" if not matches else "more than one"
            raise SnippetError(f"{why} version of {name!r} starts with {version!r} (its versions: {known})")
        return matches[0]

    async def names(self) -> list[str]:
        keys = await self.store.list_keys(bucket=self.bucket, prefix=self.root)
        return sorted({k[len(self.root) :].split("/", 1)[0] for k in keys if "/v/" in k})

    async def newest(self) -> list[SavedSnippet]:
        """The newest version of every snippet, by name."""
        out = []
        for name in await self.names():
            versions = await self.versions(name)
            if versions:
                out.append(versions[-1])
        return out

    async def remove(self, name: str, version: str | None = None) -> list[str]:
        """Delete one version (and its grants), or every version of ``name``; the versions deleted."""
        if version is None:
            doomed = await self.versions(name)
            keys = await self.store.list_keys(bucket=self.bucket, prefix=f"{self.root}{name}/")
        else:
            one = await self.find(name, version)
            doomed = [one]
            keys = [self._version_key(name, one.version)]
            keys += [self._grant_key(name, g.grant_id) for g in await self.grants(name, one.version)]
        if keys:
            await self.store.delete_objects(bucket=self.bucket, keys=keys)
        return [s.version for s in doomed]

    # -- grants ------------------------------------------------------------------------------

    async def add_grant(self, grant: SnippetGrant) -> SnippetGrant:
        if await self.get(grant.name, grant.version) is None:
            raise SnippetError(f"no snippet {grant.name}@{grant.version[:12]} to grant")
        await self._put(grant.name, self._grant_key(grant.name, grant.grant_id), "grant", grant.model_dump_json().encode())
        return grant

    async def grants(self, name: str, version: str | None = None) -> list[SnippetGrant]:
        """The grants kept for ``name`` (of one version when given), oldest first. Whether each
        still counts is the worker's to judge when a call asks (``grants.py``)."""
        check_name(name)
        found = []
        for key in await self.store.list_keys(bucket=self.bucket, prefix=f"{self.root}{name}/g/"):
            data = await self._get(name, key, "grant")
            if data is None:
                continue
            try:
                grant = SnippetGrant.model_validate_json(data)
            except ValidationError:
                continue  # unreadable: never counts
            if grant.name == name and (version is None or grant.version == version):
                found.append(grant)
        return sorted(found, key=lambda g: g.granted_at)

    async def revoke(self, name: str, grant_id: str) -> bool:
        key = self._grant_key(check_name(name), grant_id)
        if not await self.store.object_exists(bucket=self.bucket, key=key):
            return False
        await self.store.delete_objects(bucket=self.bucket, keys=[key])
        return True

