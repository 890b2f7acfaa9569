"""Reading blobs whose content must verify, and grouping stores into quilts.

Shared by Memory's collaborators (_memory/writer.py, publisher.py, reading.py, renewal.py,
grants.py) and the namespace log (_log/merging.py, pages.py, legacy.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from ..errors import EnvelopeError, InvalidInput, InvalidResponse
from ..walrus import MAX_QUILT_BODY, MAX_QUILT_PATCHES, WalrusClient
from .cost import encoded_length, units_of
from .quilt_size import encoded_quilt_size

__all__ = ["PART_OVERHEAD", "QUILT_MAX_BYTES", "QUILT_MAX_FACTS", "check_patches",
           "batches_units", "cheapest_batches", "quilt_budget", "read_checked",
           "store_batches"]

log = logging.getLogger(__name__)

QUILT_MAX_FACTS: Final = MAX_QUILT_PATCHES
# PUT /v1/quilts takes 100 MiB bodies (blobs: 10 MiB); leave room for the multipart framing
QUILT_MAX_BYTES: Final = MAX_QUILT_BODY - 4 * 1024 * 1024
# A quilt request's multipart framing: per file its boundary and headers (name twice,
# content type), and the closing boundary; identifiers are short keyed hashes.
PART_OVERHEAD: Final = 512
_FRAMING: Final = 4096


def quilt_budget(request_cap: int) -> int:
    """Bytes of files (each counted with PART_OVERHEAD) a request under ``request_cap`` holds."""
    return max(1, min(QUILT_MAX_BYTES, request_cap - _FRAMING))


def read_checked(
    client: WalrusClient,
    check: Callable[[bytes], object],
    *,
    blob_id: str | None = None,
    patch_id: str | None = None,
    fail_fast: tuple[type[Exception], ...] = (),
    max_size: int | None = None,
) -> bytes:
    """Read a blob or quilt patch whose content must pass ``check``.

    The first read is plain (one round trip in the common case); only if its
    bytes fail ``check`` is the read repeated with ``check`` as the client's
    verify callback, so the client fails over to the next aggregator (and
    raises VerificationFailed if none serves good bytes). Errors in
    ``fail_fast`` are raised at once: they cannot be an aggregator's fault.
    ``max_size``: the expected size when known (a longer answer is cut off).
    """

    def read(verify: Callable[[bytes], object] | None) -> bytes:
        if patch_id is not None:
            return client.read_quilt_patch(patch_id, verify=verify, max_size=max_size)
        assert blob_id is not None
        return client.read_blob(blob_id, verify=verify, max_size=max_size)

    data = read(None)
    try:
        check(data)
        return data
    except fail_fast:
        raise
    except (EnvelopeError, InvalidInput) as exc:
        log.warning("content of %s failed verification (%s); trying the aggregators again",
                    patch_id or blob_id, type(exc).__name__)
    return read(check)


def check_patches(patches: Mapping[str, str], identifiers: Sequence[str]) -> None:
    """A quilt store answer must give a patch id for every identifier we sent."""
    lost = [i for i in identifiers if not patches.get(i)]
    if lost:
        raise InvalidResponse(
            f"quilt store answer lists no patch for {len(lost)} of {len(identifiers)} files"
        )


def store_batches(sizes: Sequence[int], max_bytes: int = QUILT_MAX_BYTES) -> list[range]:
    """Split item positions into quilt batches: ≤ 666 facts and ≤ ``max_bytes`` each (an
    item alone over it is a batch of its own)."""
    out: list[range] = []
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if i > start and (i - start >= QUILT_MAX_FACTS or total + size > max_bytes):
            out.append(range(start, i))
            start, total = i, 0
        total += size
    if start < len(sizes):
        out.append(range(start, len(sizes)))
    return out


_NAME_CHARS: Final = 32  # keys.quilt_identifier: 16 bytes in hex
_EXTRA_SPLITS: Final = 8


def _span_units(sizes: Sequence[int], span: range, overhead: int) -> int:
    if len(span) == 1:  # stored as a blob of its own
        return units_of(encoded_length(max(sizes[span[0]] - overhead, 0)))
    patches = [(f"{i:0{_NAME_CHARS}x}", max(sizes[i] - overhead, 0)) for i in span]
    return units_of(encoded_length(encoded_quilt_size(patches)))


def batches_units(sizes: Sequence[int], spans: Sequence[range],
                  overhead: int = PART_OVERHEAD) -> int:
    """Storage units (one epoch) of storing ``spans`` of the items as quilts (a span of
    one: a blob); sizes counted with ``overhead`` each, as :func:`cheapest_batches`."""
    return sum(_span_units(sizes, s, overhead) for s in spans if len(s))


def _even(n: int, k: int) -> list[range]:
    base, extra = divmod(n, k)
    out, start = [], 0
    for i in range(k):
        end = start + base + (1 if i < extra else 0)
        out.append(range(start, end))
        start = end
    return out


def cheapest_batches(sizes: Sequence[int], max_bytes: int = QUILT_MAX_BYTES,
                     overhead: int = PART_OVERHEAD) -> list[range]:
    """Quilt batches of the items (sizes counted with ``overhead`` each) that cost the
    fewest storage units: the fewest :func:`store_batches` allows, or up to
    ``_EXTRA_SPLITS`` more, each an even split, priced by the QuiltV1 size the publisher
    builds. A full quilt is not always cheapest: 666 patches of ~1 KiB need an index
    wider than 10 columns, which grows the symbol size (130 units where 2 x 500
    patches cost 67 each, with 32-character identifiers; docs/walrus.md)."""
    greedy = store_batches(sizes, max_bytes)
    if len(sizes) < 2:
        return greedy
    best, best_units = greedy, sum(_span_units(sizes, s, overhead) for s in greedy)
    for k in range(len(greedy), min(len(sizes), len(greedy) + _EXTRA_SPLITS) + 1):
        spans = _even(len(sizes), k)
        if any(len(s) > QUILT_MAX_FACTS or (len(s) > 1 and sum(sizes[i] for i in s) > max_bytes)
               for s in spans):
            continue
        units = sum(_span_units(sizes, s, overhead) for s in spans)
        if units < best_units:
            best, best_units = spans, units
    return best
