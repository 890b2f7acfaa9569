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

__all__ = ["PART_OVERHEAD", "QUILT_MAX_BYTES", "QUILT_MAX_FACTS", "check_patches",
           "quilt_budget", "read_checked", "store_batches"]

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
