"""Pending entries: merged but not fetched yet, carried forward by every manifest.

A pull whose winning entry's blob could not be read (404 on every aggregator, a
blocked or unverifiable location, a failed read) keeps that entry pending in the
catalog (``LogTables.set_pending``): later pulls retry it, and this data dir's
manifests list it meanwhile, so its absence here never reads as a deletion to
whoever restores from them (docs/sync.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import manifest as mf
from .errors import WalrusMemError
from .expiry import EpochClock

__all__ = ["carry_pending", "parse_pending"]


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
        out.append(theirs if theirs is not None and theirs.rank() > entry.rank() else entry)
    return out + [carry[mid] for mid in sorted(carry)]
