"""Query understanding for recall: who and when a query is about, no model, no network.

:func:`analyse` reads two things from the query text:

* **subjects**: capitalised words that are not stopwords, months or weekdays,
  taken as names ("When did *Caroline* go to ...", "What does *Ana* do?");
* **spans**: the times it names (:func:`walrus_mem.temporal.query_spans`:
  "on 8 May, 2023", "in June", "last week").

:func:`candidate_prior` turns them into a factor per recall candidate, which
:func:`walrus_mem.ranking.fuse_arrays` multiplies into the relevance:

* when some candidates *start with* a named subject (a conversation turn
  "Caroline: ...", a fact "Ana works as ...") and others do not, the others
  are scaled by ``1 - subject_weight``;
* when some candidates' own dates (:func:`walrus_mem.temporal.memory_time`:
  a date in their metadata, else when they were written) fall in a named
  span and others do not, the others are scaled by ``1 - time_weight``.

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

__all__ = ["QueryFeatures", "analyse", "candidate_prior", "names", "subject_match"]

_NAME: Final = re.compile(r"\b([A-Z]\w*)")
_NOT_NAMES: Final = frozenset(
    """
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday
    tell show give list remind find explain describe write please summarize summarise
    """.split()
)
_MAX_SUBJECTS: Final = 8
TIME_SLACK_DAYS: Final = 7.0
"""A memory dated up to this many days after a named span still matches it (people
tell of an event in the days after)."""


@dataclass(frozen=True, slots=True)
class QueryFeatures:
    subjects: tuple[str, ...] = ()  # lower-cased names
    spans: tuple[Span, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.subjects or self.spans)


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
    return QueryFeatures(tuple(names(query)), tuple(query_spans(query, now)))


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
    subject_rows: Callable[[str, Sequence[int]], set[int]],
    times: Callable[[Sequence[int]], Sequence[float]],
) -> npt.NDArray[np.float64] | None:
    """Per-candidate factor in (0, 1] for ``keys`` (``None``: all 1).

    ``subject_rows(match, keys)`` returns the keys whose text matches the FTS5
    expression; ``times(keys)`` their own dates (POSIX seconds). Neither is
    called when the query names no subject / no time or the weight is 0.
    """
    if not features or not keys:
        return None
    prior = np.ones(len(keys))
    changed = False
    match = subject_match(features)
    if match is not None and params.subject_weight > 0.0:
        hit = subject_rows(match, keys)
        named = np.fromiter((key in hit for key in keys), bool, len(keys))
        if named.any() and not named.all():
            prior[~named] *= 1.0 - params.subject_weight
            changed = True
    if features.spans and params.time_weight > 0.0:
        dated = matches(features.spans, times(keys), TIME_SLACK_DAYS)
        if dated.any() and not dated.all():
            prior[~dated] *= 1.0 - params.time_weight
            changed = True
    return prior if changed else None
