"""Read published facts back before trusting the publisher's answer (``verify_publish``).

A publisher's 200 proves nothing by itself: a proxy can rewrite blob ids, a broken
publisher can answer 200 and store nothing. Nothing local can check the id (deriving a
blob id takes the full RS2 erasure encoding), so the check is a read-back from an
aggregator, compared byte for byte (:meth:`WalrusClient.read_back`).

Policies:

* ``none``: trust the answer (the client still checks its shape, size and patch ids);
* ``sample`` (default): one fact per stored blob or quilt, the quilt patch picked at
  random. Every fact of a quilt lives in the same blob and every patch id starts with
  the quilt id (checked for each answer), so one read catches a rewritten or unstored
  blob, which is what a lying publisher can do cheaply. Cost: one aggregator GET per
  store, against a store that already takes several Sui transactions;
* ``all``: every fact (every patch of every quilt): also catches a publisher that
  swaps patch ids inside a real quilt.

A failed read-back raises a :class:`~walrus_mem.errors.StorageError`; the publish path
then keeps the batch in the outbox (the facts stay ``queued``) instead of marking
them ``published``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Literal

from ..errors import AggregatorUnavailable, InvalidInput, InvalidResponse
from ..walrus import QuiltStoreResult, StoreResult, WalrusClient

__all__ = ["VerifyPolicy", "require_read_back", "verify_published"]

VerifyPolicy = Literal["none", "sample", "all"]

_rng = random.SystemRandom()


def require_read_back(client: WalrusClient, what: str) -> None:
    """Refuse a store whose read-back cannot run, *before* storing.

    With no aggregator (a publisher-only config) every read-back fails, the batch stays
    queued and each ``sync`` would pay for the same store again, forever.
    """
    if not client.aggregator_urls:
        raise AggregatorUnavailable(
            f"{what} needs a read-back after each store, but no aggregator is configured, "
            "so nothing was stored: set aggregator_urls (publisher_serves_reads = true if the "
            "publisher URL is a `walrus daemon` serving reads), or verify_publish = \"none\"",
            reason="NO_AGGREGATOR")


def verify_published(
    client: WalrusClient,
    policy: VerifyPolicy,
    stored: StoreResult | QuiltStoreResult,
    sealed: Mapping[str, bytes],
    *,
    deadline: float | None = None,
    rng: random.Random | None = None,
) -> int:
    """Read back what ``stored`` says was stored; return how many facts were checked.

    ``sealed`` maps the quilt identifier (keys.quilt_identifier) to the bytes sent; for a single
    blob it holds one entry.
    """
    if policy not in ("none", "sample", "all"):
        raise InvalidInput(f"verify_publish must be none, sample or all, got {policy!r}")
    if policy == "none" or not sealed:
        return 0
    if isinstance(stored, StoreResult):
        (data,) = sealed.values()
        client.read_back(data, blob_id=stored.blob_id, deadline=deadline)
        return 1
    names = sorted(sealed)
    if policy == "sample":
        names = [(rng or _rng).choice(names)]
    for name in names:
        patch_id = stored.patches.get(name)
        if patch_id is None:
            raise InvalidResponse(f"store answer has no patch for {name[:40]!r}")
        client.read_back(sealed[name], patch_id=patch_id, deadline=deadline)
    return len(names)
