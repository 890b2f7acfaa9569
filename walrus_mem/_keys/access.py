"""Local access checks: a namespace is read and written only with its own key.

The catalog records, for every namespace, the fingerprint of the key it was
created with. Every read path of :class:`~walrus_mem.Memory` (recall, get,
list, history, and so everything built on them: export, tools, hooks, MCP)
derives the configured key of the namespace and compares fingerprints first.
A mismatch, or a key that cannot be resolved at all, is an error and no
plaintext is returned.

This is access control between agents of one *trusting* OS user, not
isolation: the catalog is a local SQLite file and whoever can read the data
dir can read it without any key. Separate OS users, or separate data dirs with
mode 0700, are the isolation boundary on one machine (docs/threat-model.md).
"""

from __future__ import annotations

import hmac

from ..errors import AccessDenied
from ..keys import NamespaceKeys

__all__ = ["check_access"]


def check_access(namespace: str, recorded: str | None, keys: NamespaceKeys) -> None:
    """Raise :class:`AccessDenied` unless ``keys`` is the key recorded for ``namespace``."""
    if recorded is None or hmac.compare_digest(recorded.encode(), keys.fingerprint.encode()):
        return
    raise AccessDenied(
        f"namespace {namespace!r} was created with key {recorded}, but the configured key is "
        f"{keys.fingerprint}: access refused. Configure that namespace's own key (its agent's "
        "key, or the master key it was derived from)"
    )
