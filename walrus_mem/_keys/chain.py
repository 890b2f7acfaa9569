"""A Memory's namespace keys: resolved lazily, cached, and checked against the key each
namespace was created with (the local access check of every read and write).

Only this namespace's agent ``${VAR}`` is resolved, never another agent's; the master
key is parsed once and kept as a :class:`MasterSeed` (no raw key string is kept).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Protocol

from .._recall.carried import SealedVectors
from ..errors import ConfigError, KeyMaterialError
from ..keys import MasterSeed, NamespaceKeys, resolve_master_seed
from .access import check_access
from .generations import current_generation
from .keystore import key_file_in_use

if TYPE_CHECKING:
    from .._catalog.catalog import Catalog
    from ..config import Settings

__all__ = ["KeyChain", "older_generation"]

log = logging.getLogger(__name__)


class KeyChain:
    """The keys of every namespace one Memory uses, by generation."""

    def __init__(self, settings: Settings, catalog: Catalog, lock: threading.RLock,
                 master: MasterSeed | None = None) -> None:
        self.settings = settings
        self.catalog = catalog
        self.lock = lock
        self._master = master
        self._cache: dict[str, NamespaceKeys] = {}
        # A catalog row whose sealed copy carries its vector keeps none itself (issue 28):
        # the catalog reads it from the sealed copy with these keys (_catalog/vectors.py).
        catalog.vector_source = SealedVectors(self.derive_keys)

    def master_seed(self) -> MasterSeed:
        """The master seed: the explicit key, else config, key file or keyring (once)."""
        if self._master is None:
            seed, source = resolve_master_seed(
                config_value=self.settings.master_key_value(),
                key_file=key_file_in_use(self.settings),
                use_keyring=self.settings.use_keyring,
            )
            log.debug("master key from %s (fingerprint %s)", source, seed.fingerprint)
            self._master = seed
        return self._master

    def derive(self, namespace: str, generation: int | None = None) -> NamespaceKeys:
        """A namespace's keys of ``generation`` (default: the current one), not cached."""
        # Only this namespace's agent ${VAR} is resolved: other agents' are never read.
        if generation is None:  # the current one: 0 unless rotated (walrus_mem._memory.rotation)
            generation = current_generation(self.catalog, namespace)
        found = self.settings.agent_for_namespace(namespace)
        if found is not None and found[1].key is not None:
            seed = found[1].agent_seed(found[0])
            assert seed is not None
            return NamespaceKeys.from_agent_key(seed, namespace, generation)
        return NamespaceKeys.derive(self.master_seed(), namespace, generation)

    def for_namespace(self, namespace: str) -> NamespaceKeys:
        """The (validated) namespace's current keys, cached; registers the namespace.
        :class:`AccessDenied` if it was created under another key."""
        with self.lock:
            keys = self._cache.get(namespace)
            if keys is None:
                keys = self.derive(namespace)
                row = self.catalog.ensure_namespace(namespace, keys.fingerprint)
                check_access(namespace, row["key_fingerprint"], keys)
                self._cache[namespace] = keys
            return keys

    def authorize(self, namespace: str) -> None:
        """Local access check of every read: the configured key must be the one the
        namespace was created with (else :class:`AccessDenied`, no plaintext). A
        namespace this data dir does not know holds nothing to read: no check."""
        with self.lock:
            if namespace in self._cache:
                return
            row = self.catalog.namespace(namespace)
            if row is None or row["key_fingerprint"] is None:
                return
            keys = self.derive(namespace)
            check_access(namespace, row["key_fingerprint"], keys)
            self._cache[namespace] = keys

    def readable(self, namespace: str) -> bool:
        """Whether this process holds the key of ``namespace``."""
        try:
            self.authorize(namespace)
        except (KeyMaterialError, ConfigError):
            return False
        return True

    def use(self, namespace: str, keys: NamespaceKeys) -> None:
        """Make ``keys`` the cached current keys of ``namespace`` (a rotation's switch)."""
        self._cache[namespace] = keys

    def drop_cached(self, namespace: str) -> None:
        """Forget the cached keys of ``namespace``: the next use derives them again."""
        self._cache.pop(namespace, None)

    def derive_keys(self, namespace: str, *, generation: int | None = None) -> NamespaceKeys:
        """:meth:`derive` under the name :class:`Deriving` asks for."""
        return self.derive(namespace, generation)


class Deriving(Protocol):
    """What can derive a namespace's keys of a given generation (a KeyChain, a Memory)."""

    def derive_keys(self, namespace: str, *, generation: int | None = None
                    ) -> NamespaceKeys: ...


def older_generation(source: Deriving, keys: NamespaceKeys,
                     fingerprint: bytes) -> NamespaceKeys | None:
    """The keys of the generation of ``keys``' namespace older than ``keys`` whose
    fingerprint is ``fingerprint`` (retired generations stay derivable), else None.

    An envelope's fingerprint is unauthenticated: it only picks the key to try, and
    callers use an older generation only for bytes a digest already binds (an entry
    or page of a verified manifest, a head this data dir has seen), so a leaked old
    key cannot bring in anything new."""
    for generation in range(keys.generation - 1, -1, -1):
        older = source.derive_keys(keys.namespace, generation=generation)
        if older.fingerprint_bytes == fingerprint:
            return older
    return None
