"""What a store costs, in storage units, by the Walrus cost model (docs/walrus.md,
"What storage costs").

Walrus charges for the *encoded* size of a blob (metadata plus every sliver, RS2 with
1000 shards), rounded up to storage units of 1 MiB, for each epoch it is stored, plus a
write fee per unit (``walrus-sui/src/utils.rs``, ``encoding/config.rs``,
``storage-costs.mdx``)::

    symbol  = roundup_even(ceil(max(len, 1) / 222778))       # 334 x 667 source symbols
    encoded = 1000 * (1000 * 64 + 32) + 1000 * (334 + 667) * symbol
    units   = ceil(encoded / 1 MiB)
    cost    = units * (storage_price * epochs + write_price)  # FROST

A store's figure here is ``units x epochs`` (unit-epochs, "storage units" in the stats),
taken from the store answer (``storageSize`` / ``encodedLength`` and the epochs the
storage spans): prices change on chain, units do not. A blob of up to 445,556 bytes is
63 units, whatever its size: why facts are batched into quilts.

Stores are recorded per namespace and purpose through :func:`store_scope`: the code
that stores facts, manifests or renewals opens a scope naming them and the sink that
records them (the catalog's ``store_costs`` table); the client reports every successful
store to the innermost scope.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from .responses import StoreResult

__all__ = ["STORAGE_UNIT", "CostSink", "StoreCost", "cost_of", "encoded_length", "minimum_units",
           "report",
           "store_scope", "units_of"]

N_SHARDS: Final = 1000
PRIMARY_SYMBOLS: Final = 334
SECONDARY_SYMBOLS: Final = 667
SOURCE_SYMBOLS: Final = PRIMARY_SYMBOLS * SECONDARY_SYMBOLS  # 222,778
MAX_SYMBOL: Final = 65534
METADATA_BYTES: Final = N_SHARDS * (N_SHARDS * 2 * 32 + 32)  # 64,032,000
STORAGE_UNIT: Final = 1024 * 1024


def encoded_length(unencoded: int) -> int:
    """Encoded size of a blob of ``unencoded`` bytes (its ``storageSize``)."""
    symbol = -(-max(unencoded, 1) // SOURCE_SYMBOLS)
    symbol += symbol % 2
    if symbol > MAX_SYMBOL:
        raise ValueError(f"a blob of {unencoded} bytes is over the Walrus maximum")
    return METADATA_BYTES + N_SHARDS * (PRIMARY_SYMBOLS + SECONDARY_SYMBOLS) * symbol


def units_of(encoded: int) -> int:
    """Storage units (1 MiB each, rounded up) of an encoded size."""
    return -(-encoded // STORAGE_UNIT)


@dataclass(frozen=True)
class StoreCost:
    """One store as paid: ``units`` = storage units x ``epochs`` (0 when nothing was
    paid: ``alreadyCertified``); ``frost`` the answer's ``cost`` when it gave one."""

    blob_id: str
    kind: str  # "blob" or "quilt"
    files: int
    sent_bytes: int
    encoded_length: int
    epochs: int
    units: int
    frost: int | None
    newly_created: bool


def _epochs(result: StoreResult) -> int:
    raw = result.raw.get("newlyCreated") if isinstance(result.raw, dict) else None
    if isinstance(raw, dict):
        op = raw.get("resourceOperation")
        if isinstance(op, dict) and len(op) == 1:
            inner = next(iter(op.values()))
            ahead = inner.get("epochsAhead") if isinstance(inner, dict) else None
            if isinstance(ahead, int) and not isinstance(ahead, bool) and ahead > 0:
                return ahead
        storage = (raw.get("blobObject") or {}).get("storage") \
            if isinstance(raw.get("blobObject"), dict) else None
        if isinstance(storage, dict):
            start, end = storage.get("startEpoch"), storage.get("endEpoch")
            if isinstance(start, int) and isinstance(end, int) and end > start:
                return end - start
    if result.registered_epoch is not None and result.end_epoch > result.registered_epoch:
        return result.end_epoch - result.registered_epoch
    return 0


def cost_of(result: StoreResult, *, kind: str, files: int, sent_bytes: int) -> StoreCost:
    """The cost of one store answer (``sent_bytes``: the blob, or a quilt's files)."""
    paid = result.newly_created
    encoded = result.encoded_length or encoded_length(result.size or sent_bytes)
    epochs = _epochs(result) if paid else 0
    return StoreCost(blob_id=result.blob_id, kind=kind, files=files, sent_bytes=sent_bytes,
                     encoded_length=encoded, epochs=epochs,
                     units=units_of(encoded) * epochs if paid else 0,
                     frost=result.cost, newly_created=paid)


CostSink = Callable[[str | None, str, StoreCost], None]
"""``sink(namespace, purpose, cost)``: records one store."""

_scope: contextvars.ContextVar[tuple[str | None, str, CostSink | None] | None] = \
    contextvars.ContextVar("walrus_mem_store_scope", default=None)


@contextlib.contextmanager
def store_scope(namespace: str | None, purpose: str,
                sink: CostSink | None = None) -> Iterator[None]:
    """Stores made inside are reported as ``purpose`` of ``namespace``, to ``sink`` (None:
    the enclosing scope's sink, else the client's own ``cost_sink``)."""
    outer = _scope.get()
    if sink is None and outer is not None:
        sink = outer[2]
    token = _scope.set((namespace, purpose, sink))
    try:
        yield
    finally:
        _scope.reset(token)


def report(cost: StoreCost, default: CostSink | None = None) -> None:
    """Hand one store's cost to the current scope's sink, else ``default`` (none: dropped;
    a store outside any scope is ``other`` of no namespace)."""
    namespace, purpose, sink = _scope.get() or (None, "other", None)
    sink = sink or default
    if sink is not None:
        sink(namespace, purpose, cost)


def minimum_units(sizes: list[int] | tuple[int, ...], epochs: int, *,
                  request_cap: int = 10 * 1024 * 1024, max_files: int = 666,
                  part_overhead: int = 512) -> int:
    """The fewest units the network allows for storing ``sizes`` (facts, each to stay
    readable on its own) for ``epochs``: as few blobs as the publisher's request cap and
    a quilt's 666 patches allow, the bytes split evenly among them, with no quilt index or
    column padding. The yardstick bench/cost.py compares what was paid with."""
    if not sizes:
        return 0
    total = sum(sizes)
    count = max(-(-len(sizes) // max_files),
                -(-(total + part_overhead * len(sizes)) // request_cap))
    return count * units_of(encoded_length(-(-total // count))) * epochs
