"""Hybrid recall ranking: FTS5 query building and dense + lexical score fusion.

The engine gathers candidates (ANN neighbours plus FTS5 matches), computes the
exact cosine similarity of every candidate and SQLite's bm25 for those that
match :func:`fts_query`, then calls :func:`fuse` to order them.

Work in progress: the fusion defaults below are placeholders until tuned on
LoCoMo (bench/locomo.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_MIN_SCORE",
    "DEFAULT_PARAMS",
    "FTS_TOKENIZE",
    "Candidate",
    "FusionParams",
    "Scores",
    "fts_query",
    "fuse",
]

FTS_TOKENIZE: Final = "porter unicode61 remove_diacritics 2"
"""Tokenizer spec for the engine's FTS5 table (``tokenize=...``)."""

_WORD: Final = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS: Final = 32

_STOPWORDS: Final = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t don
    """.split()
)


def fts_query(text: str) -> str | None:
    """Build a safe FTS5 MATCH expression from free user text.

    Every word becomes a double-quoted FTS5 string, so quotes, operators
    (AND/OR/NOT/NEAR), column filters and prefix stars in the user's text are
    plain words, never syntax. Stopwords and duplicates are dropped and the rest
    OR-joined (bm25 rewards documents matching more of them). Returns ``None``
    when no usable term remains.
    """
    terms: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOPWORDS or word in seen:
            continue
        seen.add(word)
        terms.append(f'"{word}"')
        if len(terms) >= _MAX_TERMS:
            break
    if not terms:
        return None
    return " OR ".join(terms)


@dataclass(frozen=True)
class Candidate:
    """One recall candidate with its raw signals.

    ``dense`` is the cosine similarity in [-1, 1]; ``lexical`` is ``-bm25``
    (higher is better, ``None`` when the row does not match the FTS query);
    ranks are 0-based positions in each candidate list, ``None`` if absent.
    """

    key: int
    dense: float | None
    lexical: float | None
    dense_rank: int | None
    lexical_rank: int | None
    created_at: float
    importance: float


@dataclass(frozen=True)
class FusionParams:
    """Weights of the fused score; see :func:`fuse`."""

    dense_weight: float = 0.6
    lexical_weight: float = 0.4
    lexical_half: float = 5.0
    recency_weight: float = 0.0
    recency_half_life_days: float = 30.0
    importance_weight: float = 0.0


DEFAULT_PARAMS: Final = FusionParams()
DEFAULT_MIN_SCORE: Final = 0.2


@dataclass(frozen=True)
class Scores:
    """Final score and the normalised components it was made of."""

    score: float
    dense: float | None
    lexical: float | None
    recency: float
    importance: float


def _squash(lexical: float | None, half: float) -> float | None:
    if lexical is None:
        return None
    x = max(lexical, 0.0)
    return x / (x + half)


def fuse(
    candidates: Sequence[Candidate],
    params: FusionParams = DEFAULT_PARAMS,
    *,
    now: float,
) -> list[tuple[Candidate, Scores]]:
    """Score and sort candidates, best first."""
    out: list[tuple[Candidate, Scores]] = []
    for cand in candidates:
        dense = None if cand.dense is None else max(cand.dense, 0.0)
        lexical = _squash(cand.lexical, params.lexical_half)
        age_days = max(now - cand.created_at, 0.0) / 86400.0
        recency = math.exp(-math.log(2) * age_days / params.recency_half_life_days)
        importance = min(max(cand.importance, 0.0), 1.0)
        base = params.dense_weight * (dense or 0.0) + params.lexical_weight * (lexical or 0.0)
        score = base * (1.0 - params.recency_weight - params.importance_weight)
        score += params.recency_weight * recency + params.importance_weight * importance
        out.append((cand, Scores(score, dense, lexical, recency, importance)))
    out.sort(key=lambda pair: (-pair[1].score, pair[0].key))
    return out
