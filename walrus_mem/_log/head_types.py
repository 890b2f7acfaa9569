"""Head references and the seen-head record, the types heads.py and heads_mirror.py share.

A **head reference** names one manifest and binds its content::

    <blob id>.<seq>.<digest>

``digest`` is BLAKE2b-256 (hex) of the manifest's sealed bytes, ``seq`` its
sequence number. Whoever holds a head reference can check that the bytes an
aggregator returns are exactly that manifest, so a fresh machine given the
newest head cannot be rolled back to an older one.

They live below both stores so the mirror can name :class:`SeenHead` without
importing heads.py, which imports the mirror.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from ..errors import InvalidHead

__all__ = ["HeadRef", "SeenHead", "parse_head"]

_BLOB_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
_DIGEST: Final = re.compile(r"[0-9a-f]{64}")
_MAX_SEQ: Final = 2**62


@dataclass(frozen=True, order=True)
class HeadRef:
    """A manifest's blob id, sequence number and content digest."""

    seq: int
    blob_id: str
    digest: str

    def __str__(self) -> str:
        return f"{self.blob_id}.{self.seq}.{self.digest}"

    @classmethod
    def parse(cls, text: str) -> HeadRef:
        """Parse ``<blob id>.<seq>.<digest>`` (InvalidHead otherwise)."""
        if not isinstance(text, str):
            raise InvalidHead("a head reference must be a string")
        parts = text.strip().split(".")
        if len(parts) != 3:
            raise InvalidHead(
                "a head reference looks like <blob id>.<seq>.<64 hex digits> "
                f"(got {len(parts)} dot-separated part(s))"
            )
        blob_id, seq, digest = parts
        if not _BLOB_ID.fullmatch(blob_id):
            raise InvalidHead("the blob id part of the head reference is malformed")
        if not seq.isdigit() or not 1 <= int(seq) < _MAX_SEQ:
            raise InvalidHead("the seq part of the head reference must be a positive integer")
        if not _DIGEST.fullmatch(digest):
            raise InvalidHead("the digest part of the head reference must be 64 lowercase hex")
        return cls(int(seq), blob_id, digest)


def parse_head(text: str) -> HeadRef | str:
    """A full head reference, or a bare blob id (to be checked against SeenHeads)."""
    if isinstance(text, str) and "." not in text.strip():
        blob_id = text.strip()
        if not _BLOB_ID.fullmatch(blob_id):
            raise InvalidHead("not a blob id or head reference")
        return blob_id
    return HeadRef.parse(text)


@dataclass(frozen=True)
class SeenHead:
    ref: HeadRef
    writer: str
    parents: tuple[HeadRef, ...]
    origins: tuple[str, ...]
    end_epoch: int | None = None
    """The highest its manifest blob's end epoch can be (the store answer's, for a head
    this data dir published; the root's ``ends_by`` for another's), None when unknown:
    a 404 for it proves nothing before that epoch has passed (_log/gone.py)."""
    stored_epoch: int | None = None
    """An epoch the network had reached when the manifest was stored (a lower bound: the
    store answer's for a head this data dir published, the writer's clock in the root
    for another's), None when unknown: a network whose epoch is now below it was wiped
    or reset, and the head is gone with it (network_reset.py)."""
