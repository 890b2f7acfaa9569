"""Manifest pages a pull does not read again: those it merged before and still holds.

A page is named by the digest of its entries (manifest.py), so its content never
changes, and merging is idempotent (merge.py): a page whose every entry the local
state already holds merges to nothing. Without this a pull of 10k new memories into
a namespace of 100k read and planned over the whole manifest and the local state of
every memory (about 3.4 s of pages and 1.2 s of local versions, docs/benchmarks.md);
with it, it reads the pages that changed and the local versions of what they list.

**What is remembered.** After a complete merge, each page of the heads merged whose
entries all merged cleanly (none missing, expired, unreadable, failed to fetch, or a
rival of another head) is recorded with what it lists: its live ids, its tombstones
and the blobs its live entries name (:class:`PageSummary`), under the namespace's
key generation, in the catalog's ``meta`` table in the transaction that records the
merged heads (_catalog/merged_pages.py). The record is replaced by every merge that
reads heads: the pages of the heads merged now.

**Why a remembered page may be skipped, and when it is not.** Every way the local
state changes keeps what a merged page held, except losing rows or going back in
time: a local update only raises a version, a forget leaves a tombstone (which wins
over every version), a merge only takes winners. Going back in time replaces the
catalog, and the record goes with it: a catalog moved aside by repair starts empty;
a data dir restored from a backup, or copied, holds the record of its own state.
Losing rows any other way (a damaged file salvaged by hand, a half-done repair) is
caught at each pull: a page is skipped only while every id it lists is here, live
or forgotten (a tombstone it lists, forgotten) (:func:`held_pages`); else it is read
and merged again. A key rotation (here or followed) changes the generation, whose
record is another; a restore (``recheck``) reads every page, and a merge that is
not complete records nothing.

What a skipped page lists still counts where the merge needs the whole manifest:
the report's ``total`` and ``unchanged``, the blobs a forget must keep (a live entry
names them), and what this data dir holds that no merged head lists (a manifest due).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._catalog import merged_pages
from .._catalog.catalog import Catalog
from . import manifest as mf

__all__ = ["PageSummary", "Skipped", "held_pages", "local_ids", "record_merged"]


@dataclass(frozen=True)
class PageSummary:
    """What one manifest page lists, as far as a merge that skips it needs to know."""

    live: tuple[str, ...]
    dead: tuple[str, ...]
    blobs: tuple[str, ...]

    @classmethod
    def of(cls, entries: Iterable[mf.Entry]) -> PageSummary:
        live: list[str] = []
        dead: list[str] = []
        blobs: set[str] = set()
        for e in entries:
            if e.deleted:
                dead.append(e.memory_id)
            else:
                live.append(e.memory_id)
                if e.blob_id:
                    blobs.add(e.blob_id)
        return cls(tuple(live), tuple(dead), tuple(sorted(blobs)))

    def encode(self) -> str:
        return json.dumps({"l": self.live, "t": self.dead, "b": self.blobs},
                          separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> PageSummary | None:
        """None when the record does not parse (then the page is read)."""
        try:
            value: Any = json.loads(text)
            parts = [value[k] for k in ("l", "t", "b")]
        except (ValueError, TypeError, KeyError):
            return None
        if not all(isinstance(p, list) and all(isinstance(x, str) for x in p) for p in parts):
            return None
        return cls(tuple(parts[0]), tuple(parts[1]), tuple(parts[2]))

    def held(self, live: Collection[str], dead: Collection[str]) -> bool:
        """Whether the local state still holds every id the page lists: a live entry's
        memory live or forgotten here, a tombstone's forgotten here."""
        return (all(m in live or m in dead for m in self.live)
                and all(m in dead for m in self.dead))


def local_ids(catalog: Catalog, ns: str) -> tuple[set[str], set[str]]:
    """The ids of the live memories of ``ns`` and of its tombstones."""
    live = {str(r[0]) for r in catalog.query(
        "SELECT id FROM memories WHERE namespace = ?", (ns,))}
    return live, set(catalog.tombstones(ns))


def held_pages(catalog: Catalog, ns: str, generation: int) -> dict[str, PageSummary]:
    """The pages merged into ``ns`` under key ``generation`` whose every id the local
    state still holds (digest -> summary): those a merge need not read."""
    recorded = merged_pages.load(catalog, ns, generation)
    if not recorded:
        return {}
    live, dead = local_ids(catalog, ns)
    out: dict[str, PageSummary] = {}
    for digest, text in recorded.items():
        summary = PageSummary.decode(text)
        if summary is not None and summary.held(live, dead):
            out[digest] = summary
    return out


@dataclass
class Skipped:
    """The pages one merge did not read (digest -> summary), and what they list."""

    pages: dict[str, PageSummary] = field(default_factory=dict)
    live: set[str] = field(init=False, default_factory=set)
    dead: set[str] = field(init=False, default_factory=set)
    blobs: set[str] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        pages, self.pages = self.pages, {}
        for digest, summary in pages.items():
            self.add(digest, summary)

    def add(self, digest: str, summary: PageSummary) -> None:
        if digest not in self.pages:
            self.pages[digest] = summary
            self.live.update(summary.live)
            self.dead.update(summary.dead)
            self.blobs.update(summary.blobs)

    def totals(self, remote: Sequence[mf.Entry]) -> tuple[int, int]:
        """(live memories the merged heads list, ids listed only by skipped pages):
        a merge's ``total`` and what it adds to ``unchanged``."""
        ids = {e.memory_id for e in remote}
        deleted = {e.memory_id for e in remote if e.deleted}
        everything = ids | self.live | self.dead
        return len(everything - deleted - self.dead), len((self.live | self.dead) - ids)

    def listed(self, remote: Iterable[mf.Entry]) -> tuple[set[str], set[str]]:
        """The ids the merged heads list live, and those they list forgotten, by an
        entry read (``remote``) or a skipped page. Any head's entry counts, whatever
        the order the heads were read in (the last entry read of an id counted before,
        so a tombstone one head listed and another did not could count or not)."""
        live = {e.memory_id for e in remote if not e.deleted}
        dead = {e.memory_id for e in remote if e.deleted}
        return live | self.live, dead | self.dead


def record_merged(catalog: Catalog, ns: str, generation: int,
                  read: Mapping[str, Sequence[mf.Entry]], skipped: Skipped,
                  unclean: Collection[str]) -> None:
    """After a complete merge (inside its catalog transaction): the pages merged are
    ``skipped`` (held, checked at the merge's start) and those ``read`` (digest ->
    entries) none of whose ids is ``unclean`` (not merged: missing, expired,
    unreadable, failed, or a rival)."""
    new = {digest: PageSummary.of(entries).encode() for digest, entries in read.items()
           if digest not in skipped.pages
           and not any(e.memory_id in unclean for e in entries)}
    merged_pages.replace(catalog, ns, generation, skipped.pages.keys(), new)
