"""A manifest's pages from the last one's segments plus what changed since.

The full computation reads every live row of the namespace, in key order, and cuts
the entries into pages (:func:`~walrus_mem._log.manifest.chunk_entries`): at 1M
memories that is seconds per manifest, whatever the write. Chunking restarts after
every *natural* boundary (an entry whose id hash hits the page target), so each run
of entries ending at one (a *segment*) is paged on its own. The last manifest's
segments are kept in the catalog (``_catalog/manifest_cache.py``) with the keys that
changed since; :func:`build` re-reads only the segments holding a changed key or a
page that cannot be reused, plus the tail after the last boundary (where new
memories land, followed by the tombstones), and lists the others' pages by digest.
The result is exactly :func:`~walrus_mem._log.manifest.chunk_entries` of the full
entry list (tests/test_manifest_segments.py compares the two).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import manifest as mf

__all__ = ["Chunk", "Segments", "build", "entry_of"]

Segments = list[tuple[int, list[tuple[str, int]]]]
"""(key of the segment's boundary entry, [(page digest, entry count)]) in key order."""


@dataclass(frozen=True)
class Chunk:
    """One page of a manifest: its digest and size, and its entries when they were read
    (None: a cached page, listed by digest, that the caller found reusable)."""

    digest: str
    count: int
    entries: list[mf.Entry] | None


def entry_of(row: Any) -> mf.Entry:
    """The manifest entry of a published catalog row (as the full computation makes it)."""
    return mf.Entry(str(row["id"]), int(row["version"]), str(row["blob_id"]),
                    row["quilt_patch_id"], row["end_epoch"], float(row["updated_at"]),
                    str(row["digest"]))


def _pages(entries: list[mf.Entry]) -> list[Chunk]:
    return [Chunk(mf.entries_digest(page), len(page), page)
            for page in mf.chunk_entries(entries)]


def build(
    cached: Segments | None,
    dirty: set[int],
    reusable: Callable[[str], bool],
    rows_between: Callable[[int | None, int | None], Sequence[Any]],
    tail: Sequence[mf.Entry],
) -> tuple[list[Chunk], Segments]:
    """The manifest's pages in order, and the segments to cache for the next one.

    ``cached``: the last manifest's segments (None: read everything);
    ``dirty``: keys whose rows changed since; ``reusable(digest)``: a cached page
    may be listed by digest; ``rows_between(after, upto)``: published rows with
    ``after < key <= upto`` in key order (None: unbounded); ``tail``: the entries
    after the live ones (the tombstones).
    """
    segments = cached or []
    ends = [end for end, _ in segments]
    redo = {bisect.bisect_left(ends, key) for key in dirty}
    redo |= {j for j, (_, pages) in enumerate(segments)
             if not all(reusable(digest) for digest, _ in pages)}
    chunks: list[Chunk] = []
    kept: Segments = []
    carry: list[tuple[int, mf.Entry]] = []  # read entries after the last boundary seen

    def take(rows: Sequence[Any]) -> None:
        """Append ``rows`` to the carry and page off every segment it completes."""
        nonlocal carry
        items = carry + [(int(r["key"]), entry_of(r)) for r in rows]
        start = 0
        for i, (key, entry) in enumerate(items):
            if mf.is_boundary(entry.memory_id):
                pages = _pages([e for _, e in items[start:i + 1]])
                chunks.extend(pages)
                kept.append((key, [(p.digest, p.count) for p in pages]))
                start = i + 1
        carry = items[start:]

    after: int | None = None
    for j, (end, pages) in enumerate(segments):
        if j in redo or carry:
            take(rows_between(after, end))
        else:
            chunks.extend(Chunk(digest, count, None) for digest, count in pages)
            kept.append((end, pages))
        after = end
    take(rows_between(after, None))
    chunks.extend(_pages([e for _, e in carry] + list(tail)))
    return chunks, kept
