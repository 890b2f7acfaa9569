"""Quilt patch lookups from the quilt container's own header, with a small LRU cache.

A quilt blob is the container of :mod:`relayer_mock._quilt` (``WMQUILT2``, a packed JSON
header, or ``WMQUILT1`` before, then the patches). The header names every patch
(identifier, length, tags, in identifier order); patch ``i``'s id is
``quilt_patch_id(quilt id, 1 + i, 2 + i)`` and its offset the header's end plus the
lengths before it. So the store keeps no row per patch (index schema 1 had one, about
320 bytes a patch with its two indexes): a lookup reads the header of the quilt's file
once and keeps it parsed. A quilt id is the digest of its bytes, so a parsed header never
goes stale; whether a blob has patches at all is the store's to say.
"""

from __future__ import annotations

import struct
import threading
from array import array
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._ids import parse_quilt_patch_id, quilt_patch_id
from ._quilt import MAGIC, PatchLayout, QuiltError, parse_header
from ._store_types import PatchRecord

__all__ = ["QuiltIndex", "QuiltIndexCache"]

_PREFIX = len(MAGIC) + 4
_NO_TAGS: dict[str, str] = {}


@dataclass(frozen=True)
class QuiltIndex:
    """One quilt's patches: identifiers in index order, their offsets, lengths and tags."""

    quilt_id: str
    identifiers: Sequence[str]
    positions: dict[str, int]
    offsets: array[int]
    lengths: array[int]
    tags: Sequence[dict[str, str] | None]

    @classmethod
    def from_header(cls, quilt_id: str, entries: Sequence[Mapping[str, Any]],
                    header_end: int) -> QuiltIndex:
        identifiers = [str(e["identifier"]) for e in entries]
        lengths = array("q", (int(e["length"]) for e in entries))
        offsets = array("q")
        position = header_end
        for length in lengths:
            offsets.append(position)
            position += length
        tags = [dict(e["tags"]) or None for e in entries]
        return cls(quilt_id, identifiers, {name: i for i, name in enumerate(identifiers)},
                   offsets, lengths, tags)

    @classmethod
    def from_layout(cls, quilt_id: str, layout: Sequence[PatchLayout]) -> QuiltIndex:
        identifiers = [p.identifier for p in layout]
        return cls(quilt_id, identifiers, {name: i for i, name in enumerate(identifiers)},
                   array("q", (p.offset for p in layout)),
                   array("q", (p.length for p in layout)),
                   [dict(p.tags) or None for p in layout])

    @classmethod
    def read(cls, path: Path, quilt_id: str) -> QuiltIndex:
        """Parse the header of the container at ``path`` (FileNotFoundError if gone)."""
        with open(path, "rb") as handle:
            prefix = handle.read(_PREFIX)
            if len(prefix) < _PREFIX:
                raise QuiltError("NotAQuilt")
            (header_len,) = struct.unpack("<I", prefix[len(MAGIC):])
            header = handle.read(header_len)
        if len(header) != header_len:
            raise QuiltError("NotAQuilt")
        return cls.from_header(quilt_id, parse_header(prefix[: len(MAGIC)], header),
                               _PREFIX + header_len)

    def __len__(self) -> int:
        return len(self.identifiers)

    def record(self, index: int) -> PatchRecord:
        tags = self.tags[index]
        return PatchRecord(
            quilt_id=self.quilt_id,
            identifier=self.identifiers[index],
            patch_id=quilt_patch_id(self.quilt_id, 1 + index, 2 + index),
            offset=self.offsets[index],
            length=self.lengths[index],
            tags=dict(tags) if tags else dict(_NO_TAGS),
        )

    def by_identifier(self, identifier: str) -> PatchRecord | None:
        index = self.positions.get(identifier)
        return None if index is None else self.record(index)

    def by_patch_id(self, patch_id: str) -> PatchRecord | None:
        """The patch this id names: ``[1 + i, 2 + i)`` of this quilt, else None."""
        try:
            quilt_id, start, end = parse_quilt_patch_id(patch_id)
        except ValueError:
            return None
        index = start - 1
        if quilt_id != self.quilt_id or end != start + 1 or not 0 <= index < len(self):
            return None
        return self.record(index)

    def records(self) -> list[PatchRecord]:
        return [self.record(i) for i in range(len(self))]


class QuiltIndexCache:
    """Parsed quilt headers, least recently used out past ``max_patches`` patches in all
    (about 150 bytes of memory a patch: 16,384 patches, some 2.5 MB)."""

    def __init__(self, max_patches: int = 16_384) -> None:
        self.max_patches = max_patches
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, QuiltIndex] = OrderedDict()
        self._patches = 0

    def get(self, quilt_id: str, path: Path) -> QuiltIndex:
        with self._lock:
            entry = self._entries.get(quilt_id)
            if entry is not None:
                self._entries.move_to_end(quilt_id)
                return entry
        entry = QuiltIndex.read(path, quilt_id)  # outside the lock: file I/O and parsing
        self.put(entry)
        return entry

    def put(self, entry: QuiltIndex) -> None:
        with self._lock:
            if entry.quilt_id in self._entries:
                self._entries.move_to_end(entry.quilt_id)
                return
            self._entries[entry.quilt_id] = entry
            self._patches += len(entry)
            while self._patches > self.max_patches and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._patches -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._patches = 0
