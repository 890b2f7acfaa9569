"""Time expressions in queries and memories, matched without a model or a network.

:func:`query_spans` finds the dates a query is about ("on 8 May, 2023", "May
23, 2023", "in June 2023", "in 2022", "in June", "yesterday", "last week"),
each as a :class:`Span`. :func:`memory_time` reads a memory's own date from
its metadata ("date_time": "1:56 pm on 8 May, 2023", "date": "2023-05-08",
"timestamp": 1683500000, ...), falling back to the time it was written.
:func:`matches` says which memories fall in one of the query's spans.

People talk about an event on the day it happens or in the days after
("I went to a support group yesterday"), so a memory matches a span when its
time lies between the span's start and ``slack_days`` after its end. A month
named without a year ("in June") matches that month of any year. Relative
expressions are resolved against the time of the query.

Recall uses the match as a prior: when a query names a time and some
candidates match it, the others are ranked lower
(:mod:`walrus_mem._recall.query_features`).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "METADATA_TIME_KEYS",
    "Span",
    "matches",
    "memory_time",
    "parse_time",
    "query_spans",
]

_MONTHS: Final = {
    name: number
    for number, names in enumerate(
        [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
         ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
         ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
         ("december", "dec")],
        start=1,
    )
    for name in names
}
_MON: Final = r"(january|february|march|april|may|june|july|august|september|october|november|" \
              r"december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
_DAY: Final = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR: Final = r"(\d{4})"
_DAY_MONTH_YEAR: Final = re.compile(rf"\b{_DAY}(?: of)? {_MON},? {_YEAR}\b")
_MONTH_DAY_YEAR: Final = re.compile(rf"\b{_MON} {_DAY},? {_YEAR}\b")
_ISO_DATE: Final = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR: Final = re.compile(rf"\b{_MON},? {_YEAR}\b")
_YEAR_ALONE: Final = re.compile(r"\b(?:in|during|of|since|from|by|for) (19\d\d|20\d\d)\b")
_MONTH_ALONE: Final = re.compile(rf"\b(?:in|during|of|since|by|early|late|mid|last|this) {_MON}"
                                 r"(?! \d)\b")
# Every pattern here needs a four-digit number (a year, an ISO date), a month name or a
# relative word: recall analyses every query, and most name no time, so one search
# spares the seven below.
_MAYBE_TIME: Final = re.compile(
    r"\b\d{4}\b|\b(?:yesterday|today|tonight|last|this|" + "|".join(_MONTHS) + ")")
_RELATIVE: Final = re.compile(
    r"\b(yesterday|today|tonight|this morning|last night|last week|last weekend|this week|"
    r"last month|this month|last year|this year)\b"
)

METADATA_TIME_KEYS: Final = ("date_time", "datetime", "date", "timestamp", "occurred_at",
                             "session_date", "time")
"""Metadata keys read (in this order) for a memory's own date."""

_DAY_S: Final = 86400.0


@dataclass(frozen=True, slots=True)
class Span:
    """A time a query is about: [start, end) in POSIX seconds, or a month of any year."""

    start: float = -math.inf
    end: float = math.inf
    month: int | None = None  # set for a month named without a year

    def contains(self, ts: float, slack_days: float = 0.0) -> bool:
        if math.isnan(ts):
            return False
        if self.month is not None:
            try:
                when = datetime.fromtimestamp(ts, UTC)
                earlier = datetime.fromtimestamp(ts - slack_days * _DAY_S, UTC)
            except (OverflowError, ValueError, OSError):  # beyond datetime's years 1-9999
                return False
            return self.month in (when.month, earlier.month)
        return self.start <= ts < self.end + slack_days * _DAY_S


def _ts(d: date) -> float:
    return datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()


def _day(year: str, month: str, day: str) -> Span | None:
    try:
        d = date(int(year), _MONTHS[month], int(day))
        return Span(_ts(d), _ts(d + timedelta(days=1)))
    except (ValueError, KeyError, OverflowError):  # no such day, or past 9999-12-31
        return None


def _month(year: int, month: int) -> Span | None:
    try:
        first = date(year, month, 1)
        after = date(year + (month == 12), month % 12 + 1, 1)
    except (ValueError, OverflowError):  # year 0, or December 9999
        return None
    return Span(_ts(first), _ts(after))


def _relative(phrase: str, now: float) -> Span:
    today = datetime.fromtimestamp(now, UTC).date()
    start_of_today = _ts(today)
    week_start = _ts(today - timedelta(days=today.weekday()))
    if phrase in ("today", "tonight", "this morning"):
        return Span(start_of_today, start_of_today + _DAY_S)
    if phrase in ("yesterday", "last night"):
        return Span(start_of_today - _DAY_S, start_of_today)
    if phrase in ("last week", "last weekend"):
        return Span(week_start - 7 * _DAY_S, week_start)
    if phrase == "this week":
        return Span(week_start, week_start + 7 * _DAY_S)
    if phrase == "last month":
        year, month = (today.year, today.month - 1) if today.month > 1 else (today.year - 1, 12)
        return _month(year, month) or Span()
    if phrase == "this month":
        return _month(today.year, today.month) or Span()
    year = today.year - (phrase == "last year")
    return Span(_ts(date(year, 1, 1)), _ts(date(year + 1, 1, 1)))


def query_spans(text: str, now: float | None = None) -> list[Span]:
    """The times ``text`` names, most precise first; ``now`` resolves "yesterday" etc.

    Without ``now``, relative expressions are ignored. Never raises.
    """
    t = " ".join(text.lower().split())
    spans: list[Span] = []
    if not _MAYBE_TIME.search(t):
        return spans

    def take(pattern: re.Pattern[str], make: Any) -> None:
        nonlocal t
        found = list(pattern.finditer(t))
        if not found:  # recall parses every query: most name no time at all
            return
        for m in found:
            span = make(m)
            if span is not None:
                spans.append(span)
        t = pattern.sub(" ", t)

    take(_ISO_DATE, lambda m: _day(m.group(1), _month_name(m.group(2)), m.group(3)))
    take(_DAY_MONTH_YEAR, lambda m: _day(m.group(3), m.group(2), m.group(1)))
    take(_MONTH_DAY_YEAR, lambda m: _day(m.group(3), m.group(1), m.group(2)))
    take(_MONTH_YEAR, lambda m: _month(int(m.group(2)), _MONTHS[m.group(1)]))
    take(_YEAR_ALONE, lambda m: Span(_ts(date(int(m.group(1)), 1, 1)),
                                     _ts(date(int(m.group(1)) + 1, 1, 1))))
    take(_MONTH_ALONE, lambda m: Span(month=_MONTHS[m.group(1)]))
    if now is not None:
        take(_RELATIVE, lambda m: _relative(m.group(1), now))
    return spans


def _month_name(number: str) -> str:
    names = [name for name, n in _MONTHS.items() if n == int(number) and len(name) > 3]
    return names[0] if names else ""


def parse_time(value: object) -> float | None:
    """POSIX seconds of a date-like value (number, ISO string, "1:56 pm on 8 May, 2023")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, date):
        return _ts(value)
    if not isinstance(value, str) or not value.strip():
        return None
    return _parse_string(value)


@functools.lru_cache(maxsize=4096)
def _parse_string(value: str) -> float | None:
    """:func:`parse_time` of a string, cached: memories of one day share its stamp."""
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        pass
    else:
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    for span in query_spans(value):
        if span.month is None and math.isfinite(span.start):
            return span.start
    return None


def memory_time(metadata: Mapping[str, Any], created_at: float) -> float:
    """A memory's own date: the first parseable :data:`METADATA_TIME_KEYS` value, else
    the time it was written."""
    for key in METADATA_TIME_KEYS:
        if key in metadata:
            ts = parse_time(metadata[key])
            if ts is not None:
                return ts
    return created_at


def matches(spans: Sequence[Span], times: Iterable[float],
            slack_days: float = 7.0) -> npt.NDArray[np.bool_]:
    """Which ``times`` fall in any of ``spans`` (up to ``slack_days`` after its end)."""
    return np.array([any(s.contains(float(ts), slack_days) for s in spans) for ts in times],
                    dtype=bool)
