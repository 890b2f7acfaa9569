"""The size of a quilt as the publisher builds it (QuiltV1's ``quilt.data().len()``).

A publisher with JWT auth compares a token's ``size`` / ``max_size`` on ``PUT /v1/quilts``
with this length, not with the request body, so a token helper needs it before the upload
(walrus_mem passes it to its token helpers). Ported from walrus-core
(``quilt_encoding.rs``: ``construct_quilt``, ``serialized_blob_size``,
``compute_symbol_size``) for the public networks' 1000 shards: the quilt is a matrix of
334 rows x 667 columns of symbols; column 0 (up to 10) holds the index, each patch whole
columns; the symbol size is the smallest even size that fits them all. So a quilt is never
under 445,556 bytes (symbols of 2 bytes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

__all__ = ["encoded_quilt_size"]

N_ROWS: Final = 334  # primary source symbols for 1000 shards
N_COLUMNS: Final = 667  # secondary source symbols
_INDEX_PREFIX: Final = 5  # version byte + u32 index length
_MAX_INDEX_COLUMNS: Final = 10
_BLOB_HEADER: Final = 6
_LENGTH_PREFIX: Final = 2  # before the identifier, and before the tags when there are any
_ALIGNMENT: Final = 2  # RS2


def _uleb(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def _bcs_str(text: str) -> int:
    raw = len(text.encode())
    return _uleb(raw) + raw


def _bcs_tags(tags: Mapping[str, str]) -> int:
    return _uleb(len(tags)) + sum(_bcs_str(k) + _bcs_str(v) for k, v in tags.items())


def _fits(sizes: Sequence[int], column: int) -> bool:
    return sum(-(-s // column) for s in sizes) <= N_COLUMNS


def encoded_quilt_size(
    patches: Sequence[tuple[str, int]], tags: Mapping[str, Mapping[str, str]] | None = None
) -> int:
    """Bytes of the quilt the publisher builds from ``(identifier, length)`` patches."""
    tags = tags or {}
    ordered = sorted(patches)
    # QuiltIndexV1 in BCS: per patch end_index (u16), identifier, tags (start_index skipped)
    index = _uleb(len(ordered)) + sum(
        2 + _bcs_str(name) + _bcs_tags(tags.get(name, {})) for name, _ in ordered
    )
    sizes = [_INDEX_PREFIX + index]
    for name, length in ordered:
        prefix = _bcs_str(name) + _LENGTH_PREFIX
        if tags.get(name):
            prefix += _bcs_tags(tags[name]) + _LENGTH_PREFIX
        sizes.append(prefix + length + _BLOB_HEADER)
    low = max(-(-sum(sizes) // (N_COLUMNS * N_ROWS)),
              -(-sizes[0] // (N_ROWS * _MAX_INDEX_COLUMNS)),
              -(-_INDEX_PREFIX // N_ROWS))
    high = -(-max(sizes) // (N_COLUMNS // len(sizes) * N_ROWS))
    while low < high:
        mid = (low + high) // 2
        if _fits(sizes, mid * N_ROWS):
            high = mid
        else:
            low = mid + 1
    symbol = -(-low // _ALIGNMENT) * _ALIGNMENT
    return symbol * N_ROWS * N_COLUMNS
