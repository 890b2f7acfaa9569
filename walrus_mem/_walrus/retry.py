"""Backoff policy, deadlines and ``Retry-After`` parsing for the Walrus client.

Pure and clock-injectable, so tests can replay every retry decision without
sleeping. The policy is *exponential backoff with full jitter* (the AWS
architecture-blog variant): attempt ``n`` waits ``uniform(0, min(cap, base * 2**n))``,
raised to the server's ``Retry-After`` when it gave one, and never past the
caller's total deadline.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import email.utils
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Deadline", "RetryPolicy", "call_deadline", "call_time_left", "parse_retry_after"]

# The end (time.monotonic) of the enclosing high-level call, e.g. Memory.remember: its
# store, read-back and manifest share one budget instead of each getting a full one.
_call_end: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "walrus_mem_call_end", default=None)

_MAX_EXPONENT = 32  # 2**32 * base is far past any cap; avoids float overflow


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait between attempts.

    Attributes:
        base_delay: ceiling of the first backoff step, in seconds.
        max_delay: ceiling of any single backoff step.
        multiplier: growth of the ceiling per attempt.
        max_connect_failures: consecutive refused/unreachable connections to one
            endpoint before it is given up for the current call (a refused port
            rarely comes back within seconds, so this keeps failure fast).
        min_request_time: a retry is only started if at least this much of the
            deadline remains after the backoff sleep.
        max_retry_after: a ``Retry-After`` hint larger than this is clamped.
    """

    base_delay: float = 0.05
    max_delay: float = 2.0
    multiplier: float = 2.0
    max_connect_failures: int = 3
    min_request_time: float = 0.05
    max_retry_after: float = 300.0

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full-jitter delay before retry number ``attempt`` (0-based)."""
        exponent = min(max(attempt, 0), _MAX_EXPONENT)
        ceiling = min(self.max_delay, self.base_delay * self.multiplier**exponent)
        return rng.uniform(0.0, ceiling)

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None) -> float:
        """Backoff for ``attempt``, but at least the server's ``Retry-After``."""
        wait = self.backoff(attempt, rng)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait


class Deadline:
    """A point in time (on an injectable monotonic clock) a whole call must finish by."""

    __slots__ = ("_clock", "_end", "total")

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.total = seconds
        self._end = clock() + seconds

    def remaining(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self._end - self._clock())

    def elapsed(self) -> float:
        """Seconds since the deadline was armed."""
        return self.total - (self._end - self._clock())

    def allows(self, sleep: float, min_request_time: float) -> bool:
        """Whether sleeping ``sleep`` seconds still leaves time for one more request."""
        return sleep + min_request_time <= self.remaining()


@contextlib.contextmanager
def call_deadline(seconds: float) -> Iterator[None]:
    """Every Walrus call made inside the block (this thread / task) ends by ``seconds``
    from now in all; a nested block can only shorten it."""
    end = time.monotonic() + seconds
    outer = _call_end.get()
    token = _call_end.set(end if outer is None else min(end, outer))
    try:
        yield
    finally:
        _call_end.reset(token)


def call_time_left() -> float | None:
    """Seconds left in the enclosing :func:`call_deadline` (None: no such block)."""
    end = _call_end.get()
    return None if end is None else end - time.monotonic()


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date).

    Returns ``None`` for a missing or unparseable header and ``0.0`` for a date
    in the past. ``now`` is the wall-clock time (``time.time()``) to measure a
    date against.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if math.isnan(seconds) or math.isinf(seconds):
            return None
        return max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000" parses naive; HTTP dates are GMT anyway
        when = when.replace(tzinfo=datetime.UTC)
    reference = time.time() if now is None else now
    return max(0.0, when.timestamp() - reference)
