"""Quilts: validation of patches and the mock's on-disk quilt container.

Real QuiltV1 lays patches out in columns of Red Stuff slivers, so patch ids depend on sizes.
The mock sorts identifiers and gives patch ``i`` the sliver range ``[1 + i, 2 + i)`` (spec
section 9). The quilt blob's bytes are a simple container, not the real quilt encoding::

    b"WMQUILT2" || u32le(header_len) || zlib(header JSON) || patch bytes in identifier order

where the header is ``{"version":1,"patches":[{"identifier","length","tags"}, ...]}``. The
quilt id is the blob id of those bytes, so the same patches and tags give the same quilt id.
Containers written before 2026-11-29 (``WMQUILT1``) hold the header JSON itself and still
read; packed, the header takes about 20 B a patch instead of 73 (issue 28 footprint).
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import unicodedata
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

from ._ids import BLOB_ID_BYTES, blob_id_from_digest, quilt_patch_id

MAGIC = b"WMQUILT2"  # the header zlib-packed
MAGIC_V1 = b"WMQUILT1"  # the header as JSON (containers written before 2026-11-29)
MAX_HEADER_BYTES = 64 * 1024 * 1024  # what a packed header may inflate to
MAX_PATCHES = 666  # QuiltV1 with 1000 shards
MAX_IDENTIFIER_BYTES = 65_535
MAX_TAGS_BYTES = 64 * 1024
METADATA_FIELD = "_metadata"


class QuiltError(ValueError):
    """The patches cannot form a quilt; ``str()`` reads like the Rust ``Debug`` output."""


@dataclass
class PatchInput:
    """One patch before layout: its identifier, tags and bytes (in memory or a file)."""

    identifier: str
    data: bytes | BinaryIO
    length: int
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PatchLayout:
    identifier: str
    patch_id: str
    index: int
    start: int
    end: int
    offset: int  # absolute offset in the quilt blob
    length: int
    tags: dict[str, str]


def validate_identifier(identifier: str) -> None:
    """Reject what ``validate_quilt_identifier`` rejects: empty, too long, trailing
    whitespace, control characters."""
    if not identifier:
        raise QuiltError('InvalidIdentifier("identifier must not be empty")')
    if len(identifier.encode("utf-8")) > MAX_IDENTIFIER_BYTES:
        raise QuiltError(
            f'InvalidIdentifier("identifier must be at most {MAX_IDENTIFIER_BYTES} bytes")'
        )
    if identifier != identifier.rstrip():
        raise QuiltError(f'InvalidIdentifier("identifier {identifier!r} ends with whitespace")')
    if any(unicodedata.category(ch) == "Cc" for ch in identifier):
        raise QuiltError(
            f'InvalidIdentifier("identifier {identifier!r} contains control characters")'
        )


def validate_patches(patches: Sequence[PatchInput], max_patches: int = MAX_PATCHES) -> None:
    if len(patches) > max_patches:
        raise QuiltError(f"TooManyBlobs({len(patches)}, {max_patches})")
    seen: set[str] = set()
    tag_bytes = 0
    for patch in patches:
        validate_identifier(patch.identifier)
        if patch.identifier in seen:
            raise QuiltError(f'DuplicateIdentifier("{patch.identifier}")')
        seen.add(patch.identifier)
        tag_bytes += sum(len(k.encode()) + len(v.encode()) for k, v in patch.tags.items())
    if tag_bytes > MAX_TAGS_BYTES:
        raise QuiltError(
            f'QuiltOversize("tags take {tag_bytes} bytes, at most {MAX_TAGS_BYTES}")'
        )


def _header(patches: Sequence[PatchInput]) -> bytes:
    body = {
        "version": 1,
        "patches": [
            {"identifier": p.identifier, "length": p.length, "tags": dict(sorted(p.tags.items()))}
            for p in patches
        ],
    }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def write_quilt(patches: Sequence[PatchInput], out: BinaryIO) -> tuple[str, int, list[PatchLayout]]:
    """Validate, sort and write the quilt container to ``out`` while hashing it.

    Returns (quilt id, total size, layout in identifier order). File sources are read from
    their current position; nothing is held in memory beyond one copy buffer.
    """
    validate_patches(patches)
    ordered = sorted(patches, key=lambda p: p.identifier)
    header = _header(ordered)
    hasher = hashlib.blake2b(digest_size=BLOB_ID_BYTES)

    def emit(chunk: bytes) -> None:
        hasher.update(chunk)
        out.write(chunk)

    header = zlib.compress(header, 9)
    emit(MAGIC + struct.pack("<I", len(header)) + header)
    position = len(MAGIC) + 4 + len(header)
    offsets: list[int] = []
    for patch in ordered:
        offsets.append(position)
        if isinstance(patch.data, bytes):
            if len(patch.data) != patch.length:
                raise QuiltError(f'InvalidPatch("length mismatch for {patch.identifier}")')
            emit(patch.data)
        else:
            copied = 0
            while True:
                chunk = patch.data.read(1024 * 1024)
                if not chunk:
                    break
                copied += len(chunk)
                emit(chunk)
            if copied != patch.length:
                raise QuiltError(f'InvalidPatch("length mismatch for {patch.identifier}")')
        position += patch.length
    quilt_id = blob_id_from_digest(hasher.digest())
    layout = [
        PatchLayout(
            identifier=p.identifier,
            patch_id=quilt_patch_id(quilt_id, 1 + i, 2 + i),
            index=i,
            start=1 + i,
            end=2 + i,
            offset=offsets[i],
            length=p.length,
            tags=dict(sorted(p.tags.items())),
        )
        for i, p in enumerate(ordered)
    ]
    return quilt_id, position, layout


def parse_header(magic: bytes, stored: bytes) -> list[dict[str, object]]:
    """The patch entries of a container's header as stored after ``magic`` (QuiltError
    when it is not one: an unknown magic, a packed header that does not inflate, bad JSON)."""
    if magic == MAGIC:
        inflate = zlib.decompressobj()
        try:
            stored = inflate.decompress(stored, MAX_HEADER_BYTES)
        except zlib.error:
            raise QuiltError("NotAQuilt") from None
        if not inflate.eof or inflate.unconsumed_tail or inflate.unused_data:
            raise QuiltError("NotAQuilt")
    elif magic != MAGIC_V1:
        raise QuiltError("NotAQuilt")
    try:
        patches = json.loads(stored)["patches"]
    except (ValueError, TypeError, KeyError):
        raise QuiltError("NotAQuilt") from None
    if not isinstance(patches, list):
        raise QuiltError("NotAQuilt")
    return patches


def read_layout(source: BinaryIO, quilt_id: str) -> list[PatchLayout]:
    """Recover the layout from a quilt container (used to rebuild a lost index entry)."""
    magic = source.read(len(MAGIC))
    (header_len,) = struct.unpack("<I", source.read(4).ljust(4, b"\0"))
    entries = parse_header(magic, source.read(header_len))
    position = len(MAGIC) + 4 + header_len
    layout = []
    for i, entry in enumerate(entries):
        layout.append(
            PatchLayout(
                identifier=entry["identifier"],  # type: ignore[arg-type]
                patch_id=quilt_patch_id(quilt_id, 1 + i, 2 + i),
                index=i,
                start=1 + i,
                end=2 + i,
                offset=position,
                length=entry["length"],  # type: ignore[arg-type]
                tags=entry["tags"],  # type: ignore[arg-type]
            )
        )
        position += entry["length"]
    return layout


def split_container(data: bytes) -> list[tuple[str | None, bytes]]:
    """A stored blob as (patch identifier, bytes) parts, or [(None, data)] when it is not a
    quilt container (tests and benchmarks look inside a relayer folder with it)."""
    if data[: len(MAGIC)] not in (MAGIC, MAGIC_V1):
        return [(None, data)]
    return [(p.identifier, data[p.offset:p.offset + p.length])
            for p in read_layout(io.BytesIO(data), blob_id_from_digest(bytes(BLOB_ID_BYTES)))]


__all__ = [
    "MAGIC",
    "MAGIC_V1",
    "MAX_PATCHES",
    "METADATA_FIELD",
    "PatchInput",
    "PatchLayout",
    "QuiltError",
    "parse_header",
    "read_layout",
    "split_container",
    "validate_identifier",
    "validate_patches",
    "write_quilt",
]
