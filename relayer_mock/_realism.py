"""What makes the mock behave like a real network in time: stores that take a while, blobs
that are unavailable while being stored, CDN-style 404s right after a store.

* :class:`StoreLatency`: how long a store takes, drawn per request from a distribution
  (``"0"``, ``"200"``, ``"50-400"`` uniform, ``"lognormal:300:0.6"`` median ms and sigma,
  ``"exp:250"`` mean ms). A real store runs several Sui transactions and a sliver fan-out,
  so seconds are normal on Testnet.
* Blobs being stored: between the start of a store's latency and its completion, reads of
  that blob id answer 503 ``BLOB_UNAVAILABLE`` (registered, not yet certified), through
  every app instance of this process that serves the same data dir (a publisher-only and
  an aggregator-only app on two ports, say). Other processes see a 404 until the store lands.
* ``not_found_after_store``: seconds during which a freshly stored blob still answers 404,
  as a CDN-fronted aggregator with a cached 404 does (``reading-blobs-after-upload.mdx``).
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["StoreLatency", "being_stored", "fresh", "storing"]


@dataclass(frozen=True)
class StoreLatency:
    """A store-latency distribution in milliseconds."""

    kind: Literal["fixed", "uniform", "lognormal", "exp"] = "fixed"
    a: float = 0.0
    b: float = 0.0

    @classmethod
    def parse(cls, text: str | StoreLatency | None) -> StoreLatency:
        if text is None:
            return cls()
        if isinstance(text, StoreLatency):
            return text
        spec = text.strip().lower()
        try:
            if spec.startswith("lognormal:"):
                median, sigma = (float(x) for x in spec.split(":")[1:3])
                result = cls("lognormal", median, sigma)
            elif spec.startswith("exp:"):
                result = cls("exp", float(spec.split(":", 1)[1]))
            elif "-" in spec:
                low, high = (float(x) for x in spec.split("-", 1))
                result = cls("uniform", low, high)
            else:
                result = cls("fixed", float(spec))
        except ValueError:
            raise ValueError(
                f"store latency {text!r}: expected MS, MIN-MAX, lognormal:MEDIAN:SIGMA or exp:MEAN"
            ) from None
        values = (result.a, result.b)
        if any(v < 0 or math.isnan(v) or math.isinf(v) for v in values) or (
            result.kind == "uniform" and result.b < result.a
        ):
            raise ValueError(f"store latency {text!r}: values must be finite and ordered")
        return result

    @property
    def enabled(self) -> bool:
        return self.a > 0 or self.b > 0

    def sample(self, rng: random.Random) -> float:
        """One store's latency in seconds (capped at 120 s)."""
        if self.kind == "fixed":
            ms = self.a
        elif self.kind == "uniform":
            ms = rng.uniform(self.a, self.b)
        elif self.kind == "lognormal":
            ms = self.a * math.exp(rng.gauss(0.0, self.b)) if self.a > 0 else 0.0
        else:
            ms = rng.expovariate(1.0 / self.a) if self.a > 0 else 0.0
        return min(ms, 120_000.0) / 1000.0

    def describe(self) -> str:
        return {"fixed": f"{self.a:g}", "uniform": f"{self.a:g}-{self.b:g}",
                "lognormal": f"lognormal:{self.a:g}:{self.b:g}",
                "exp": f"exp:{self.a:g}"}[self.kind]


_lock = threading.Lock()
_pending: dict[tuple[Path, str], int] = {}


def _key(data_dir: Path, blob_id: str) -> tuple[Path, str]:
    return (data_dir.resolve(), blob_id)


class storing:
    """``with storing(data_dir, blob_id):`` marks the blob as being stored."""

    def __init__(self, data_dir: Path, blob_id: str) -> None:
        self._key = _key(data_dir, blob_id)

    def __enter__(self) -> None:
        with _lock:
            _pending[self._key] = _pending.get(self._key, 0) + 1

    def __exit__(self, *exc: object) -> None:
        with _lock:
            left = _pending.get(self._key, 1) - 1
            if left:
                _pending[self._key] = left
            else:
                _pending.pop(self._key, None)


def being_stored(data_dir: Path, blob_id: str) -> bool:
    with _lock:
        return _key(data_dir, blob_id) in _pending


def fresh(first_stored_at: float, window: float, now: float | None = None) -> bool:
    """Whether a blob first stored at ``first_stored_at`` is still inside the 404 window."""
    return window > 0 and (time.time() if now is None else now) - first_stored_at < window
