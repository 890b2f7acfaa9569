"""Query understanding for recall: who and when a query is about, no model, no network.

:func:`analyse` reads three things from the query text:

* **subjects**: capitalised words that are not stopwords, months or weekdays,
  taken as names ("When did *Caroline* go to ...", "What does *Ana* do?");
* **spans**: the times it names (:func:`walrus_mem._recall.temporal.query_spans`:
  "on 8 May, 2023", "in June", "last week");
* **asks when**: a question for a time ("When did ...", "How long ...",
  "What year ...").

:func:`candidate_prior` turns them into a factor per recall candidate, which
:func:`walrus_mem._recall.ranking.fuse_arrays` multiplies into the relevance:

* when some candidates *start with* a named subject (a conversation turn
  "Caroline: ...", a fact "Ana works as ...") and others do not, the others
  are scaled by ``1 - subject_weight``;
* when some candidates' own dates (:func:`walrus_mem._recall.temporal.memory_time`:
  a date in their metadata, else when they were written) fall in a named
  span and others do not, the others are scaled by ``1 - time_weight``;
* when the query asks when and some candidates mention a time
  (:func:`mentions_time`: "yesterday", "last week", "in June", "2019",
  "ago", ...) and others do not, the others are scaled by ``1 - when_weight``:
  the answer to "When did Ana move?" is the memory that says when.

The engine reads the candidates' text, metadata and write time in one
query, only for queries that name someone or a time or ask when.

Both factors only ever lower a score, and only relative to other candidates
of the same query: a query whose subject or time matches no candidate (or
every candidate) ranks exactly as without them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from .ranking import _STOPWORDS, FusionParams
from .temporal import Span, matches, query_spans

__all__ = ["TIME_SLACK_DAYS", "QueryFeatures", "analyse", "candidate_prior", "mentions_time",
           "names", "starts_with", "wanted"]

_NAME: Final = re.compile(r"\b([A-Z]\w*)")
_NOT_NAMES: Final = frozenset(
    """
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday
    tell show give list remind find explain describe write please summarize summarise
    """.split()
)
_MAX_SUBJECTS: Final = 8
_ASKS_WHEN: Final = re.compile(
    r"^\W*(?:when\b|since when\b|how long\b|how many (?:years|months|weeks|days)\b|"
    r"(?:what|which) (?:year|month|date|day|time|week|weekend)\b)",
    re.IGNORECASE,
)
_TIME_WORD: Final = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|last|next|recently|since|"
    r"(?:week|weekend|month|year|day)s?|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"january|february|march|april|june|july|august|september|october|november|december|"
    r"summer|winter|spring|(?:19|20)\d\d)\b",
)  # matched on lower-cased text: 3x faster than re.IGNORECASE
_FIRST_WORD: Final = re.compile(r"\w+")
TIME_SLACK_DAYS: Final = 7.0
"""A memory dated up to this many days after a named span still matches it (people
tell of an event in the days after)."""


def mentions_time(text: str) -> bool:
    """Whether ``text`` dates what it says ("yesterday", "last week", "in June", "2019")."""
    return _TIME_WORD.search(text.lower()) is not None


def starts_with(text: str, subjects: Collection[str]) -> bool:
    """Whether the first word of ``text`` is one of ``subjects`` ("Ana: ...", "Ana's ...")."""
    m = _FIRST_WORD.match(text) or _FIRST_WORD.search(text)
    return m is not None and m.group(0).lower() in subjects


@dataclass(frozen=True, slots=True)
class QueryFeatures:
    subjects: tuple[str, ...] = ()  # lower-cased names
    spans: tuple[Span, ...] = ()
    asks_when: bool = False

    def __bool__(self) -> bool:
        return bool(self.subjects or self.spans or self.asks_when)


def names(query: str) -> list[str]:
    """Capitalised words of ``query`` that can be names, lower-cased, in order, once each."""
    out: list[str] = []
    for word in _NAME.findall(query):
        low = word.lower()
        if low in _STOPWORDS or low in _NOT_NAMES or low in out or len(low) < 2:
            continue
        out.append(low)
        if len(out) >= _MAX_SUBJECTS:
            break
    return out


def analyse(query: str, now: float | None = None) -> QueryFeatures:
    """The subjects and times ``query`` names (``now`` resolves "yesterday" etc.)."""
    return QueryFeatures(tuple(names(query)), tuple(query_spans(query, now)),
                         bool(_ASKS_WHEN.match(query)))


def candidate_prior(
    features: QueryFeatures,
    texts: Sequence[str],
    times: Callable[[], Sequence[float]],
    params: FusionParams,
) -> npt.NDArray[np.float64] | None:
    """Per-candidate factor in (0, 1] for candidates with these texts; ``None`` when
    every factor is 1. ``times()`` gives their own dates (POSIX seconds, NaN:
    unknown); it is called only when the query names a time."""
    if not features or not texts:
        return None
    prior = np.ones(len(texts))
    changed = False

    def lower(hit: npt.NDArray[np.bool_], weight: float) -> None:
        nonlocal changed
        if weight > 0.0 and hit.any() and not hit.all():
            prior[~hit] *= 1.0 - weight
            changed = True

    if features.subjects and params.subject_weight > 0.0:
        subjects = frozenset(features.subjects)
        lower(np.array([starts_with(t, subjects) for t in texts]), params.subject_weight)
    if features.asks_when and params.when_weight > 0.0:
        lower(np.array([mentions_time(t) for t in texts]), params.when_weight)
    if features.spans and params.time_weight > 0.0:
        lower(matches(features.spans, times(), TIME_SLACK_DAYS), params.time_weight)
    return prior if changed else None


def wanted(features: QueryFeatures, params: FusionParams) -> bool:
    """Whether :func:`candidate_prior` can change anything (else skip reading rows)."""
    return bool((features.subjects and params.subject_weight > 0.0)
                or (features.asks_when and params.when_weight > 0.0)
                or (features.spans and params.time_weight > 0.0))
