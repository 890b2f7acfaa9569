"""Copies sealed under a retired key generation, as a merge meets them.

After a rotation (rotation.py) a manifest may still list a version whose blob
was sealed under an older generation of the namespace: a pending entry carried
since before the rotation (_log/pending.py), or a rotation elsewhere that has
not re-published yet. The log opens such a blob with that generation's key
(``NamespaceLog._fetch``; the manifest's digest binds the bytes). This module
decides what the merge then does with it:

* the same version (same memory, version and update time) already held here is
  kept: a copy that differs only in its sealing never replaces one, and the old
  generation's copy never wins merely because its digest sorts higher;
* any other fetched copy is merged as usual, then sealed again under the current
  generation (``rotation.reseal_fetched``) and queued, like every memory of the
  rotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from ..envelope import envelope_fingerprint
from ..errors import EnvelopeError
from ..keys import NamespaceKeys
from . import manifest as mf
from .merge import LocalVersion

__all__ = ["same_version", "split_older"]

Fetched = tuple[mf.Entry, bytes, dict[str, Any]]


def same_version(entry: mf.Entry, other: mf.Entry | LocalVersion) -> bool:
    """Whether two copies are of one version (they may differ only in their sealing)."""
    return entry.version == other.version and entry.updated_at == other.updated_at


def split_older(keys: NamespaceKeys, fetched: list[Fetched],
                live: Mapping[str, LocalVersion], kept: AbstractSet[str]
                ) -> tuple[list[Fetched], set[str], int]:
    """(what to apply, the memory ids among it sealed under an older generation, how
    many older copies of a version held here were left out)."""
    out: list[Fetched] = []
    older: set[str] = set()
    dropped = 0
    for item in fetched:
        entry, data, _ = item
        try:
            current = envelope_fingerprint(data) == keys.fingerprint_bytes
        except EnvelopeError:
            current = True  # it opened, so it is well formed; never the case
        if not current and entry.memory_id not in kept:
            local = live.get(entry.memory_id)
            if local is not None and same_version(entry, local):
                dropped += 1
                continue
            older.add(entry.memory_id)
        out.append(item)
    return out, older, dropped
