"""Pending entries: merged but not fetched yet, carried forward by every manifest.

A pull whose winning entry's blob could not be read (404 on every aggregator, a
blocked or unverifiable location, a failed read) keeps that entry pending in the
catalog (``LogTables.set_pending``): later pulls retry it, and this data dir's
manifests list it meanwhile, so its absence here never reads as a deletion to
whoever restores from them (docs/sync.md).

A pending entry never outranks, on its digest alone, a copy of the same version
(same memory, version and update time) that a merged manifest lists or this
data dir holds: the two differ only in their sealing (a key rotation re-sealed
one, _log/older.py), and the one that is here or readable is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._walrus.expiry import EpochClock
from ..errors import WalrusMemError
from . import manifest as mf
from .merge import LocalVersion
from .older import same_version

__all__ = ["carry_pending", "parse_pending", "yield_pending"]


def parse_pending(raw: Mapping[str, Any]) -> dict[str, mf.Entry]:
    """The catalog's pending entries (memory id -> entry JSON) that parse and are live."""
    out: dict[str, mf.Entry] = {}
    for mid, data in raw.items():
        try:
            entry = mf.Entry.from_json(data)
        except WalrusMemError:
            continue
        if entry.memory_id == mid and not entry.deleted:
            out[mid] = entry
    return out


def yield_pending(pending: Mapping[str, mf.Entry], entries: Iterable[mf.Entry],
                  live: Mapping[str, LocalVersion]) -> dict[str, mf.Entry]:
    """The pending entries a merge takes in: those whose version ``entries`` (the
    manifests being merged) or ``live`` (the local state) hold already are left out."""
    held = {(e.memory_id, e.version, e.updated_at) for e in entries if not e.deleted}
    return {mid: e for mid, e in pending.items()
            if (mid, e.version, e.updated_at) not in held
            and not (mid in live and same_version(e, live[mid]))}


def carry_pending(live: list[mf.Entry], pending: Mapping[str, mf.Entry],
                  tombstones: Mapping[str, int], clock: EpochClock) -> list[mf.Entry]:
    """A manifest's live entries with the merged-but-unfetched ones carried forward: a
    pending entry is listed (location as its writer listed it) unless forgotten here,
    expired, or a local version ranks above it."""
    carry = {mid: e for mid, e in pending.items()
             if mid not in tombstones and not clock.expired(e.end_epoch)}
    out = []
    for entry in live:
        theirs = carry.pop(entry.memory_id, None)
        wins = theirs is not None and theirs.rank() > entry.rank() and not same_version(
            theirs, entry)  # never over the same version held here, on its digest alone
        out.append(theirs if wins and theirs is not None else entry)
    return out + [carry[mid] for mid in sorted(carry)]
