"""The Walrus client's counters (:attr:`walrus_mem.walrus.WalrusClient.stats`)."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClientStats"]


@dataclass
class ClientStats:
    """Counters of what the client did and saw (thread-safe increments).

    ``faults`` counts every unsuccessful answer by kind (``http_503``,
    ``truncated``, ``store_error``, ``verification``, ``transport_ReadError`` ...),
    whether it led to a retry, a failover or the final error. ``retry_reasons``
    counts, by the same kinds, the failures that were followed by a backoff
    sleep and another attempt (``retries`` is their total). ``failovers``
    counts moves to the next aggregator after a failed read.
    """

    requests: int = 0
    retries: int = 0
    failovers: int = 0
    verification_failures: int = 0
    deadline_exhaustions: int = 0
    adopted: int = 0  # stores whose answer was lost, found landed and adopted (adopt.py)
    faults: Counter[str] = field(default_factory=Counter)
    retry_reasons: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def _fault(self, kind: str) -> None:
        with self._lock:
            self.faults[kind] += 1

    def _retry(self, kind: str) -> None:
        with self._lock:
            self.retries += 1
            self.retry_reasons[kind] += 1

    def snapshot(self) -> dict[str, Any]:
        """A plain-dict copy, e.g. for ``json.dumps`` or a benchmark report."""
        with self._lock:
            return {
                "requests": self.requests,
                "retries": self.retries,
                "failovers": self.failovers,
                "verification_failures": self.verification_failures,
                "deadline_exhaustions": self.deadline_exhaustions,
                "adopted": self.adopted,
                "faults": dict(self.faults),
                "retry_reasons": dict(self.retry_reasons),
            }
