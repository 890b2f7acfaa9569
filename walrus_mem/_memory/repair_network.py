"""A catalog repaired after the network behind the endpoints changed (N12 of
.ci/stateful_findings.md).

``repair`` moves an unusable catalog aside and restores each namespace from the heads
this data dir remembers. When the network changed at the same epochs (a redeploy, a
wipe) those heads answer 404, and the rebuilt catalog holds nothing stored before the
change: the check each sync makes (network_reset.py) would then have only the head to
read, and a head alone cannot tell a lost network from an aggregator that lags. Its next
manifest was refused for good (StaleDataDir: a head it published is not in its state).
The moved-aside catalog still names the blobs its published memories lived in: read
beside the head, over the three rounds a loss takes, they tell the two apart. A catalog
lost to garbage names none; the copy of its served mark in heads.sqlite3 (served_mark.py)
still does (N14).
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from .._log.gone import provably_gone
from .._log.heads import HeadRef
from ..errors import WalrusMemError
from .network_reset import suspect
from .network_sample import SAMPLE
from .served_mark import kept_witnesses

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["check_lost_heads"]

log = logging.getLogger(__name__)


def aside_blobs(path: Path, ns: str, limit: int = SAMPLE) -> list[str]:
    """The blobs the published memories of ``ns`` lived in by a moved-aside catalog, the
    latest ends first; what SQLite can still read of it (a damaged page ends the scan)."""
    found: dict[str, int] = {}
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        for blob, end in conn.execute(
                "SELECT blob_id, end_epoch FROM memories NOT INDEXED WHERE namespace = ? "
                "AND status = 'published' AND blob_id IS NOT NULL", (ns,)):
            found[str(blob)] = max(found.get(str(blob), 0), int(end or 0))
    except sqlite3.Error as exc:  # garbage, or a damaged page: what was read so far
        log.info("reading blob ids from %s: %s", path.name, exc)
    finally:
        conn.close()
    return sorted(found, key=lambda b: -found[b])[:limit]


def check_lost_heads(parts: Parts, ns: str, refs: list[str], asides: list[Path]) -> bool:
    """The restore of ``ns`` during a repair could not read the heads ``refs`` (404): was
    the network lost? The newest head is read with the blobs the moved-aside catalogs
    ``asides`` name (:func:`suspect`: three rounds; 404s of the head and of one such blob
    in every round are a loss, followed: the lost heads end, so the next manifest names
    them as gone parents and this data dir's memories are stored again). True when a
    loss was followed."""
    blobs = list(dict.fromkeys([*(b for path in asides for b in aside_blobs(path, ns)),
                                *kept_witnesses(parts, ns)]))
    heads = [HeadRef.parse(r) for r in refs]
    heads = [h for h in heads if not parts.log.seen.is_gone(ns, h.blob_id)
             and not provably_gone(parts.log, ns, h)[0]]
    if not blobs or not heads:
        return False
    errors: list[str] = []
    try:
        followed = suspect(parts, ns, heads[0], errors, sample=blobs)
    except WalrusMemError as exc:  # an outage: the next sync's check asks again
        errors.append(f"{type(exc).__name__}: {exc}")
        followed = False
    for error in errors:
        log.warning("repair of %r, network check: %s", ns, error)
    return followed
