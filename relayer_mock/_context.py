"""Shared pieces of the app: settings, per-request context, the handlers' common base."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from . import _cost as cost
from ._quilt import MAX_PATCHES
from ._realism import StoreLatency
from ._store import Store
from .auth import PublisherAuth
from .faults import FaultDecision, FaultInjector, FaultKind

MiB = 1024 * 1024
DEFAULT_MAX_BLOB_SIZE = 10 * MiB  # publisher --max-body-size default, 10,240 KiB
DEFAULT_MAX_QUILT_SIZE = 100 * MiB  # publisher --max-quilt-body-size default, 102,400 KiB
MAX_EPOCHS_AHEAD = 53
# Attribute / tag names an aggregator copies into response headers by default.
ALLOWED_HEADERS = frozenset({
    "content-type", "authorization", "content-disposition", "content-encoding",
    "content-language", "content-location", "link",
})


@dataclass(frozen=True)
class RelayerSettings:
    """Static settings of one app instance."""

    max_blob_size: int = DEFAULT_MAX_BLOB_SIZE
    max_quilt_size: int = DEFAULT_MAX_QUILT_SIZE
    storage_price: int = cost.DEFAULT_STORAGE_PRICE
    write_price: int = cost.DEFAULT_WRITE_PRICE
    max_epochs_ahead: int = MAX_EPOCHS_AHEAD
    aggregator_max_blob_size: int | None = None
    publisher_max_concurrent: int | None = None
    aggregator_max_concurrent: int | None = None
    allow_quilt_patch_tags_in_response: bool = False
    # strict (default): behave like the daemon where old tests relied on leniency
    # (unknown publisher query parameters, short Sui addresses, quilt routes on plain blobs)
    strict: bool = True
    role: str = "both"  # publisher | aggregator | both
    store_latency: StoreLatency = StoreLatency()
    not_found_after_store: float = 0.0  # seconds a fresh blob still answers 404 (CDN lag)
    # this app's own blocklist (the daemon's --blocklist-path; "*" blocks every blob), unlike
    # the shared one of /_mock/blocklist, so two aggregators on one data dir can disagree
    operator_blocklist: frozenset[str] = frozenset()
    # 503 BLOB_UNAVAILABLE (not 404) in the first epoch after a blob expired ("mid-expiry")
    unavailable_after_expiry: bool = False
    real_quilt_sizes: bool = False  # quilt storage from the QuiltV1 size (_profiles.py)
    nullable_certified_epoch: bool = False  # certifiedEpoch null in store answers
    profile: str | None = None

    def public_dict(self) -> dict[str, Any]:
        return {
            "maxBlobSize": self.max_blob_size,
            "maxQuiltSize": self.max_quilt_size,
            "storagePrice": self.storage_price,
            "writePrice": self.write_price,
            "maxEpochsAhead": self.max_epochs_ahead,
            "aggregatorMaxBlobSize": self.aggregator_max_blob_size,
            "publisherMaxConcurrent": self.publisher_max_concurrent,
            "aggregatorMaxConcurrent": self.aggregator_max_concurrent,
            "maxQuiltPatches": MAX_PATCHES,
            "strict": self.strict,
            "role": self.role,
            "storeLatencyMs": self.store_latency.describe(),
            "notFoundAfterStore": self.not_found_after_store,
            "operatorBlocklist": sorted(self.operator_blocklist),
            "unavailableAfterExpiry": self.unavailable_after_expiry,
            "realQuiltSizes": self.real_quilt_sizes,
            "nullableCertifiedEpoch": self.nullable_certified_epoch,
            "profile": self.profile,
        }


@dataclass
class Ctx:
    """Per-request bookkeeping: the fault decision and counters flushed at the end."""

    name: str
    decision: FaultDecision
    counters: Counter[str] = field(default_factory=Counter)

    def fault(self, kind: FaultKind) -> None:
        self.counters[f"faults.{kind.value}"] += 1
        self.counters[f"faults_by_route.{self.name}.{kind.value}"] += 1


class RelayerBase:
    """What every handler mixin can use."""

    store: Store
    injector: FaultInjector
    settings: RelayerSettings
    auth: PublisherAuth | None
