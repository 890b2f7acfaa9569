"""Announcing a published head: heads.sqlite3 and the shared heads file.

A manifest's head is recorded "to announce" in the same catalog transaction
that records the manifest (``LogTables.record_manifest``); announcing it adds
it to heads.sqlite3 and the heads file, then clears the mark. A sync killed in
between, or a heads file that could not be written, leaves the mark, and the
next sync announces it (:func:`announce_pending`): else no other machine ever
learns that head.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from filelock import Timeout

from ..errors import InvalidHead, LocalStoreError
from ..keys import NamespaceKeys
from .heads import HeadRef, HeadsFile, SeenHead

if TYPE_CHECKING:
    from .context import LogContext

__all__ = ["announce", "announce_pending", "announce_record", "announced_in"]

log = logging.getLogger(__name__)


def announce_record(seen: SeenHead) -> dict[str, Any]:
    """A head to announce, as kept in the catalog until it is (LogTables.unannounced)."""
    return {"head": str(seen.ref), "writer": seen.writer,
            "parents": [str(p) for p in seen.parents], "origins": list(seen.origins),
            "end_epoch": seen.end_epoch, "stored_epoch": seen.stored_epoch}


def _announce_seen(record: Mapping[str, Any]) -> SeenHead:
    end, stored = record.get("end_epoch"), record.get("stored_epoch")  # absent before
    return SeenHead(HeadRef.parse(record["head"]), str(record["writer"]),
                    tuple(HeadRef.parse(p) for p in record["parents"]),
                    tuple(str(o) for o in record["origins"]),
                    end if isinstance(end, int) else None,
                    stored if isinstance(stored, int) else None)


def announce_pending(nslog: LogContext, ns: str) -> str | None:
    """Announce the head this data dir recorded but did not announce (a process
    killed between recording a manifest and writing heads.sqlite3 / the heads file,
    or a heads file that could not be written): else no other machine ever learns
    it. Idempotent; None when nothing is left pending, else why it still is."""
    if nslog.tables.unannounced(ns) is None:
        return None
    with nslog.turn(ns, wait=False) as ours:
        # Taken: a publish (it announces a newer head, superseding this one) or a pull
        # (the next sync announces it): nothing to wait for.
        record = nslog.tables.unannounced(ns) if ours else None
        if record is None:
            return None
        try:
            seen = _announce_seen(record)
        except (InvalidHead, KeyError, TypeError, ValueError):
            log.warning("unannounced head of %r unreadable in the catalog; dropped", ns)
            nslog.tables.announced(ns, str(record.get("head")))
            return None
        log.warning("announcing head seq %d of %r, recorded by a sync that did not "
                    "finish announcing it", seen.ref.seq, ns)
        return announce(nslog, ns, nslog.host.keys_for(ns), seen, retry=True)


def announce(nslog: LogContext, ns: str, keys: NamespaceKeys, seen: SeenHead, *,
             retry: bool) -> str | None:
    """Add ``seen`` (this data dir's newest head) to heads.sqlite3 and the heads
    file, then clear its pending announcement; None, or why it stays pending."""
    heads_file = nslog.heads_file()
    try:
        nslog.seen.add(ns, seen)  # INSERT OR IGNORE: the same head twice is one row
        if heads_file is not None and not (
                retry and announced_in(nslog, ns, keys, heads_file, seen.ref)):
            heads_file.replace(ns, seen.ref, seen.parents)
    except (OSError, Timeout, LocalStoreError) as exc:
        problem = (f"head seq {seen.ref.seq} of {ns!r} published but not announced "
                   f"({type(exc).__name__}: {exc}); the next sync announces it")
        log.warning("%s", problem)
        return problem
    nslog.tables.announced(ns, str(seen.ref))
    return None


def announced_in(nslog: LogContext, ns: str, keys: NamespaceKeys, heads_file: HeadsFile,
                 ref: HeadRef) -> bool:
    """Whether the heads file already names ``ref`` or a head descending from it
    (another machine merged it: writing it again would add a superseded line)."""
    lines = [r for _, r in heads_file.read(ns)]
    return ref in lines or any(r.seq > ref.seq and nslog.descends(ns, keys, r, ref)
                               for r in lines)
