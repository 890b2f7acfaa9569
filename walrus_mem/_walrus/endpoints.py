"""Health-aware endpoint ordering for publisher and aggregator failover.

Walrus's own guidance is not to rely on a single publisher or aggregator. The
client keeps one :class:`EndpointHealth` per role: an endpoint that failed in a
way another endpoint might not (refused connection, 5xx, 429, a deadline, a
malformed or lying answer) is *benched* for a while, doubling per consecutive
failure up to a cap, and put behind the healthy ones. Benched endpoints are
still tried, last, so a call never fails merely because every endpoint once
failed. A success clears the record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["EndpointHealth"]

BASE_COOLDOWN: Final = 5.0
MAX_COOLDOWN: Final = 120.0


@dataclass
class _Record:
    failures: int = 0
    benched_until: float = 0.0


class EndpointHealth:
    """Thread-safe failure records per endpoint URL on an injectable monotonic clock."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        *,
        base_cooldown: float = BASE_COOLDOWN,
        max_cooldown: float = MAX_COOLDOWN,
    ) -> None:
        self._clock = clock
        self._base = base_cooldown
        self._max = max_cooldown
        self._records: dict[str, _Record] = {}
        self._lock = threading.Lock()

    def order(self, urls: Sequence[str]) -> list[str]:
        """``urls`` with the healthy ones first (configured order), benched ones after
        (soonest back first)."""
        now = self._clock()
        with self._lock:
            until = {u: self._records[u].benched_until if u in self._records else 0.0
                     for u in urls}
        healthy = [u for u in urls if until[u] <= now]
        benched = sorted((u for u in urls if until[u] > now), key=lambda u: until[u])
        return healthy + benched

    def failed(self, url: str) -> None:
        with self._lock:
            record = self._records.setdefault(url, _Record())
            record.failures += 1
            cooldown = min(self._max, self._base * 2 ** min(record.failures - 1, 16))
            record.benched_until = self._clock() + cooldown

    def succeeded(self, url: str) -> None:
        with self._lock:
            self._records.pop(url, None)

    def benched(self) -> dict[str, float]:
        """Seconds each benched endpoint still sits out (for ``doctor`` and tests)."""
        now = self._clock()
        with self._lock:
            return {u: r.benched_until - now for u, r in self._records.items()
                    if r.benched_until > now}
