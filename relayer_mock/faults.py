"""Fault injection: what can go wrong on the wire, how often, reproducibly.

Each request on a publisher or aggregator route draws one decision from a seeded
``random.Random`` owned by the app instance. Decisions are independent per request, so every
fault is transient: a retry draws again and can succeed. With concurrent requests the sequence
of decisions follows the order in which requests reach the server, so a seed reproduces a run
exactly only when requests are sequential. Parameters of an injected fault (latency, which
bytes to flip, which other blob to serve) come from a per-request RNG seeded from the main one,
so they do not depend on how requests interleave after the decision.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class FaultKind(StrEnum):
    """Kinds of injected faults. The value is the name used on the command line and in JSON."""

    HTTP_500 = "500"  # JSON INTERNAL_ERROR envelope
    HTTP_503 = "503"  # JSON UNAVAILABLE (aggregator: BLOB_UNAVAILABLE)
    HTTP_504 = "504"  # publisher only: INSUFFICIENT_CONFIRMATIONS (DEADLINE_EXCEEDED)
    HTTP_429 = "429"  # load shed, plain text or JSON, with Retry-After
    LATENCY = "latency"  # added delay, then a normal response
    DROP = "drop"  # headers with the full Content-Length, half the body, then the socket closes
    TRUNCATE = "truncate"  # reads: 200 with a shortened body and a matching Content-Length
    CORRUPT = "corrupt"  # reads: some bytes flipped, same length
    LIE = "lie"  # reads: another stored blob's bytes
    STORE_ERROR = "store_error"  # publisher: HTTP 200 {"error":{blobId,failurePhase,errorMsg}}
    MARKED_INVALID = "marked_invalid"  # publisher: markedInvalid, turned into 500 INTERNAL


class RouteClass(StrEnum):
    """Which fault kinds a route can suffer."""

    WRITE = "write"  # PUT /v1/blobs, PUT /v1/quilts
    READ = "read"  # routes that return blob or patch bytes
    READ_JSON = "read_json"  # GET /v1/quilts/{id}/patches


_COMMON = {FaultKind.HTTP_500, FaultKind.HTTP_503, FaultKind.HTTP_429, FaultKind.LATENCY,
           FaultKind.DROP}
APPLICABLE: dict[RouteClass, frozenset[FaultKind]] = {
    RouteClass.WRITE: frozenset(
        _COMMON | {FaultKind.HTTP_504, FaultKind.STORE_ERROR, FaultKind.MARKED_INVALID}
    ),
    RouteClass.READ: frozenset(
        _COMMON | {FaultKind.TRUNCATE, FaultKind.CORRUPT, FaultKind.LIE}
    ),
    RouteClass.READ_JSON: frozenset(_COMMON),
}
ALL_KINDS: tuple[FaultKind, ...] = tuple(FaultKind)
# Faults that corrupt content silently (only caught by verifying what was read).
SILENT_KINDS = frozenset({FaultKind.TRUNCATE, FaultKind.CORRUPT, FaultKind.LIE})

_ALIASES: dict[str, tuple[FaultKind, ...]] = {
    "all": ALL_KINDS,
    "5xx": (FaultKind.HTTP_500, FaultKind.HTTP_503, FaultKind.HTTP_504),
    "error200": (FaultKind.STORE_ERROR,),
    "invalid": (FaultKind.MARKED_INVALID,),
    "lying": (FaultKind.LIE,),
    "transport": (FaultKind.DROP,),
    "silent": tuple(sorted(SILENT_KINDS, key=lambda k: k.value)),
    "writes": tuple(sorted(APPLICABLE[RouteClass.WRITE], key=lambda k: k.value)),
    "reads": tuple(sorted(APPLICABLE[RouteClass.READ], key=lambda k: k.value)),
}


def parse_kinds(value: str | Iterable[str | FaultKind]) -> tuple[FaultKind, ...]:
    """Parse ``"5xx,429,drop"`` (or a list) into kinds; accepts the aliases in ``_ALIASES``."""
    items = value.split(",") if isinstance(value, str) else list(value)
    kinds: list[FaultKind] = []
    for item in items:
        name = str(item.value if isinstance(item, FaultKind) else item).strip().lower()
        if not name:
            continue
        expanded = _ALIASES.get(name)
        if expanded is None:
            try:
                expanded = (FaultKind(name),)
            except ValueError:
                known = ", ".join([k.value for k in FaultKind] + sorted(_ALIASES))
                raise ValueError(f"unknown fault kind {name!r} (known: {known})") from None
        for kind in expanded:
            if kind not in kinds:
                kinds.append(kind)
    return tuple(kinds)


def parse_range_ms(text: str) -> tuple[int, int]:
    """``"50"`` -> (50, 50); ``"20-80"`` -> (20, 80)."""
    parts = text.strip().split("-")
    if len(parts) == 1:
        low = high = int(parts[0])
    elif len(parts) == 2:
        low, high = int(parts[0]), int(parts[1])
    else:
        raise ValueError(f"expected MS or MIN-MAX, got {text!r}")
    if low < 0 or high < low:
        raise ValueError(f"invalid latency range {text!r}")
    return low, high


class FaultConfig(BaseModel):
    """Fault-injection settings of one app instance (not shared through the data dir).

    ``rate`` enables the documented mix: each publisher/aggregator request gets a fault with
    probability ``rate``, the kind drawn uniformly from ``kinds`` that apply to that route.
    ``probabilities`` adds independent per-kind probabilities on top (checked first, in kind
    order). ``scope`` limits both to read or write routes. Admin routes and ``/status`` are
    never faulted.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rate: float = Field(default=0.0, ge=0.0, le=1.0)
    kinds: tuple[FaultKind, ...] = ALL_KINDS
    probabilities: dict[FaultKind, float] = Field(default_factory=dict)
    scope: Literal["all", "reads", "writes"] = "all"
    seed: int | None = None
    latency_ms: tuple[int, int] = (0, 0)
    fault_latency_ms: tuple[int, int] = (10, 100)
    retry_after: int = Field(default=0, ge=0)
    rate_limit_body: Literal["text", "json", "mixed"] = "mixed"

    @field_validator("kinds", mode="before")
    @classmethod
    def _parse_kinds(cls, value: Any) -> Any:
        if isinstance(value, str | list | tuple):
            return parse_kinds(value)
        return value

    @field_validator("probabilities", mode="before")
    @classmethod
    def _parse_probabilities(cls, value: Any) -> Any:
        if isinstance(value, dict):
            out: dict[FaultKind, float] = {}
            for key, prob in value.items():
                for kind in parse_kinds([str(key)]):
                    out[kind] = prob
            return out
        return value

    @field_validator("probabilities")
    @classmethod
    def _check_probabilities(cls, value: dict[FaultKind, float]) -> dict[FaultKind, float]:
        for kind, prob in value.items():
            if not 0.0 <= prob <= 1.0:
                raise ValueError(f"probability for {kind.value} must be within [0, 1]")
        return value

    @field_validator("latency_ms", "fault_latency_ms", mode="before")
    @classmethod
    def _parse_range(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_range_ms(value)
        if isinstance(value, int):
            return (value, value)
        return value

    @model_validator(mode="after")
    def _check_ranges(self) -> FaultConfig:
        for name in ("latency_ms", "fault_latency_ms"):
            low, high = getattr(self, name)
            if low < 0 or high < low:
                raise ValueError(f"{name} must be (min, max) with 0 <= min <= max")
        return self

    @property
    def enabled(self) -> bool:
        """True when any fault or added latency can happen."""
        return (
            self.rate > 0
            or any(p > 0 for p in self.probabilities.values())
            or self.latency_ms[1] > 0
        )

    @classmethod
    def mix(cls, rate: float, seed: int | None = None, **kwargs: Any) -> FaultConfig:
        """The documented mix: every applicable kind, uniformly, with total probability ``rate``."""
        return cls(rate=rate, seed=seed, **kwargs)

    @classmethod
    def only(cls, kind: FaultKind | str, probability: float = 1.0, seed: int | None = None,
             **kwargs: Any) -> FaultConfig:
        """A single kind with its own probability (e.g. ``FaultConfig.only("lie", 0.5)``)."""
        return cls.model_validate(
            {"probabilities": {str(kind): probability}, "seed": seed, **kwargs}
        )

    def public_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["enabled"] = self.enabled
        return data


@dataclass(frozen=True)
class FaultDecision:
    """One request's fault (``kind`` None: none) plus an RNG for its parameters."""

    kind: FaultKind | None
    rng: random.Random
    latency_s: float  # always-on latency (``latency_ms``), applied whatever the kind


NO_FAULT_RNG = random.Random(0)


class FaultInjector:
    """Thread-safe decision maker around a seeded ``random.Random``."""

    def __init__(self, config: FaultConfig | None = None, *, log_size: int = 1000) -> None:
        self._lock = threading.Lock()
        self._config = config or FaultConfig()
        self._rng = random.Random(self._config.seed)
        self._log: deque[dict[str, Any]] = deque(maxlen=log_size)
        self._sequence = 0

    @property
    def config(self) -> FaultConfig:
        return self._config

    def configure(self, config: FaultConfig) -> None:
        """Replace the settings; a seed (re)starts the random sequence from that seed."""
        with self._lock:
            self._config = config
            self._rng = random.Random(config.seed)
            self._log.clear()
            self._sequence = 0

    def decide(self, route_class: RouteClass, route: str) -> FaultDecision:
        config = self._config
        if not config.enabled:
            return FaultDecision(None, NO_FAULT_RNG, 0.0)
        with self._lock:
            config = self._config
            rng = self._rng
            in_scope = (
                config.scope == "all"
                or (config.scope == "writes" and route_class is RouteClass.WRITE)
                or (config.scope == "reads" and route_class is not RouteClass.WRITE)
            )
            applicable = APPLICABLE[route_class]
            kind: FaultKind | None = None
            for candidate in ALL_KINDS:
                prob = config.probabilities.get(candidate, 0.0)
                if prob > 0 and rng.random() < prob and kind is None:
                    if in_scope and candidate in applicable:
                        kind = candidate
            if config.rate > 0:
                roll = rng.random()
                eligible = [k for k in config.kinds if k in applicable]
                if kind is None and in_scope and eligible and roll < config.rate:
                    kind = eligible[rng.randrange(len(eligible))]
            low, high = config.latency_ms
            latency = rng.uniform(low, high) / 1000.0 if high > 0 else 0.0
            sub_rng = random.Random(rng.getrandbits(64))
            self._sequence += 1
            if kind is not None:
                self._log.append(
                    {"seq": self._sequence, "route": route, "kind": kind.value,
                     "at": time.time()}
                )
        return FaultDecision(kind, sub_rng, latency)

    def log(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._log)
