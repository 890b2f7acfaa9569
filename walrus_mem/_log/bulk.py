"""Many facts per request: a quilt read whole, its facts found in it by digest.

A restore or pull fetches each winning version by its quilt patch id: one request per
memory, which bounds it by the aggregator's request rate, not the network. Most facts
of a namespace sit hundreds to a quilt (one per <= 666 facts written together), so a
merge that wants many facts of one quilt reads the quilt blob once and looks for each
wanted envelope in it: every envelope of the namespace begins with the same 22 bytes
(magic, version, suite, key fingerprint: envelope.py; version 1 or 2) and is
``bucket + 126`` bytes long (version 2: ``bucket + A + 130``, A in its header), and
the manifest binds each wanted version's exact bytes by their BLAKE2b-256
digest. A candidate is taken only when its digest is one the manifest lists, so the
layout of the quilt blob is never trusted: where a patch's bytes are not contiguous in
the blob (or an aggregator serves something else), nothing matches and those facts
are read one by one as before (merging.py).
"""

from __future__ import annotations

import struct
from collections.abc import Collection
from typing import Final

from ..envelope import (
    HEADER_SIZE,
    MAGIC,
    SIGNATURE_SIZE,
    SUITE_ID,
    TAG_SIZE,
    VERSION,
    VERSION_ATTACHED,
)
from . import manifest as mf

__all__ = ["BULK_MAX_BYTES", "BULK_MIN", "find_sealed", "envelope_prefix"]

BULK_MIN: Final = 16
"""Wanted facts of one quilt (in one fetch chunk) from which the quilt is read whole."""
BULK_MAX_BYTES: Final = 8 * 1024 * 1024
"""A quilt larger than this is not read whole (its facts are read one by one): bounds
the memory a merge holds per read."""
_OVERHEAD: Final = HEADER_SIZE + TAG_SIZE + SIGNATURE_SIZE  # 126
_BUCKETS: Final = tuple(1 << k for k in range(8, 18))  # 256 B .. 128 KiB: a fact's bucket


def envelope_prefix(fingerprint: bytes) -> bytes:
    """The first 22 bytes of every envelope sealed under a key of this fingerprint."""
    return MAGIC + bytes([VERSION, SUITE_ID]) + fingerprint


def find_sealed(data: bytes, prefix: bytes, wanted: Collection[str]) -> dict[str, bytes]:
    """Digest -> sealed bytes of every envelope in ``data`` whose BLAKE2b-256 digest is
    in ``wanted``. An envelope found ends before the next one begins, so each start is
    tried only with the bucket lengths that fit before it (one hash when they adjoin)."""
    starts: list[int] = []
    attached_prefix = prefix[:4] + bytes([VERSION_ATTACHED]) + prefix[5:]
    for pre in (prefix, attached_prefix):
        at = data.find(pre)
        while at >= 0:
            starts.append(at)
            at = data.find(pre, at + len(pre))
    starts.sort()
    found: dict[str, bytes] = {}
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(data)
        extra = 0  # version 2: the attachment's length and the 4 bytes that give it
        if data[start + 4] == VERSION_ATTACHED:
            if start + HEADER_SIZE + 4 > end:
                continue
            (attached,) = struct.unpack(">I", data[start + HEADER_SIZE:start + HEADER_SIZE + 4])
            extra = attached + 4
        room = end - start - _OVERHEAD - extra
        exact = room if room in _BUCKETS else None
        for bucket in ([exact] if exact is not None else []) + [
                b for b in _BUCKETS if b < room and b != exact]:
            candidate = data[start : start + bucket + _OVERHEAD + extra]
            digest = mf.sealed_digest(candidate)
            if digest in wanted:
                found[digest] = candidate
                break
        if len(found) == len(wanted):
            break
    return found
