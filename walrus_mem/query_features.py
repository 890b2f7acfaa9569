"""Query understanding for recall: who and when a query is about, no model, no network.

:func:`analyse` reads three things from the query text:

* **subjects**: capitalised words that are not stopwords, months or weekdays,
  taken as names ("When did *Caroline* go to ...", "What does *Ana* do?");
* **spans**: the times it names (:func:`walrus_mem.temporal.query_spans`:
  "on 8 May, 2023", "in June", "last week");
* **asks when**: a question for a time ("When did ...", "How long ...",
  "What year ...").

:func:`candidate_prior` turns them into a factor per recall candidate, which
:func:`walrus_mem.ranking.fuse_arrays` multiplies into the relevance:

* when some candidates *start with* a named subject (a conversation turn
  "Caroline: ...", a fact "Ana works as ...") and others do not, the others
  are scaled by ``1 - subject_weight``;
* when some candidates' own dates (:func:`walrus_mem.temporal.memory_time`:
  a date in their metadata, else when they were written) fall in a named
  span and others do not, the others are scaled by ``1 - time_weight``;
* when the query asks when and some candidates mention a time
  (:data:`TIME_WORDS`: "yesterday", "last week", "in June", "ago", ...) and
  others do not, the others are scaled by ``1 - when_weight``: the answer to
  "When did Ana move?" is the memory that says when.

Both factors only ever lower a score, and only relative to other candidates
of the same query: a query whose subject or time matches no candidate (or
every candidate) ranks exactly as without them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from .ranking import _STOPWORDS, FusionParams
from .temporal import Span, matches, query_spans

__all__ = ["TIME_WORDS", "QueryFeatures", "analyse", "candidate_prior", "names",
           "subject_match", "when_match"]

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
TIME_WORDS: Final = (
    "yesterday today tonight tomorrow ago last next recently weekend week month year day "
    "since monday tuesday wednesday thursday friday saturday sunday january february march "
    "april june july august september october november december summer winter spring"
).split()
"""Words that date what a memory says (FTS5 matches them after stemming: "weeks", "days")."""
_TIME_WORDS_MATCH: Final = " OR ".join(f'"{w}"' for w in TIME_WORDS)
TIME_SLACK_DAYS: Final = 7.0
"""A memory dated up to this many days after a named span still matches it (people
tell of an event in the days after)."""


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


def when_match(features: QueryFeatures) -> str | None:
    """FTS5 expression matching rows that mention a time, for a query that asks when."""
    return _TIME_WORDS_MATCH if features.asks_when else None


def subject_match(features: QueryFeatures) -> str | None:
    """FTS5 expression matching rows whose *first* word is a subject (``^"ana" OR ...``)."""
    if not features.subjects:
        return None
    return " OR ".join(f'^"{name}"' for name in features.subjects)  # \w+: no quote inside


def candidate_prior(
    features: QueryFeatures,
    keys: Sequence[int],
    params: FusionParams,
    *,
    fts_rows: Callable[[str, Sequence[int]], set[int]],
    times: Callable[[Sequence[int]], Sequence[float]],
) -> npt.NDArray[np.float64] | None:
    """Per-candidate factor in (0, 1] for ``keys`` (``None``: all 1).

    ``fts_rows(match, keys)`` returns the keys whose text matches the FTS5
    expression (:func:`subject_match`, :func:`when_match`); ``times(keys)``
    their own dates (POSIX seconds). Nothing is asked for a feature the query
    does not have or whose weight is 0.
    """
    if not features or not keys:
        return None
    prior = np.ones(len(keys))
    changed = False

    def lower(hit: npt.NDArray[np.bool_], weight: float) -> None:
        nonlocal changed
        if hit.any() and not hit.all():
            prior[~hit] *= 1.0 - weight
            changed = True

    for match, weight in ((subject_match(features), params.subject_weight),
                          (when_match(features), params.when_weight)):
        if match is not None and weight > 0.0:
            found = fts_rows(match, keys)
            lower(np.fromiter((key in found for key in keys), bool, len(keys)), weight)
    if features.spans and params.time_weight > 0.0:
        lower(matches(features.spans, times(keys), TIME_SLACK_DAYS), params.time_weight)
    return prior if changed else None
