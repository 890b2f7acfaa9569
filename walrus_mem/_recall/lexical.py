"""The lexical half of recall: which rows match the query's words, and their bm25.

Scores are SQLite FTS5's bm25 (positive here: higher is better). They come from
the namespace's postings (:mod:`walrus_mem._catalog.postings`: numpy over the query
terms' packed postings, no per-row work in SQLite) or, for a query word FTS5
splits into several tokens (a phrase, which postings do not answer), from FTS5
itself. Both give the same numbers (tests/test_postings.py).

Words in more than half the rows are left out (:func:`informative_terms`).
When the remaining words hold more rows together than a budget
(:data:`POSTINGS_BUDGET` rows for the postings, whose cost per row is a few
bytes of numpy; ``FTS_BUDGET_FACTOR * n`` for FTS5, which scores row by row),
the most common of them only score the candidates (:func:`rescore`) instead
of choosing them; below it the candidates are the full query's top n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from .._catalog.catalog import Catalog
from .._catalog.postings import bm25_idf, bm25_partials
from .ranking import fts_query

__all__ = ["FTS_BUDGET_FACTOR", "Lexical", "informative", "informative_terms",
           "kept_terms", "lexical_pass", "postings_top", "rescore"]

FTS_BUDGET_FACTOR: Final = 10
"""The words choosing candidates match at most about this many rows per candidate."""

POSTINGS_BUDGET: Final = 8192
"""The words choosing candidates from the postings hold at most this many rows together
(or ``FTS_BUDGET_FACTOR * n``, if more): below it, candidates are the full query's top n."""
WHOLE_READ: Final = 65_536
"""A word in at most this many rows is read whole even when only some of its rows are
wanted: a block found by key costs about three times a block read in a row (100k
memories, 150 wanted keys: a word in 60k rows 0.83 ms whole, 1.02 ms by blocks)."""
_NO_KEYS: Final = np.empty(0, dtype=np.int64)
_NO_SCORES: Final = np.empty(0, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Lexical:
    """The lexical candidates (best first) and the keyword scores known so far.

    ``keys`` (ascending) and ``scores`` (bm25 negated: higher is better) are the
    rows matching the words that chose the candidates; ``complete``: those were
    all the query's words, so any row absent from ``keys`` does not match.
    """

    top: list[int]
    keys: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float64]
    complete: bool
    parts: Parts | None = None
    """From the postings: each scored word's rows and share of their scores."""

    def of(self, keys: Sequence[int] | npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The score of each key (NaN: no match)."""
        wanted = np.asarray(keys, dtype=np.int64)
        if not len(self.keys):
            return np.full(len(wanted), math.nan)
        at = np.minimum(self.keys.searchsorted(wanted), len(self.keys) - 1)
        return np.where(self.keys[at] == wanted, self.scores[at], math.nan)


def informative_terms(counts: dict[str, int], rows: int) -> dict[str, int]:
    """The terms whose bm25 weight is not clamped to nothing: those in at most half the rows.

    SQLite's bm25 takes ``idf = log((N - n + 0.5) / (n + 0.5))`` and clamps it
    to 1e-6 when that is <= 0, i.e. for a term in more than half of the N rows
    ("user" in facts that all start with "User ..."). Such a term adds at most
    ``1e-6 * (k1 + 1) = 2.2e-6`` to any row's bm25, below anything fusion can
    tell apart (scores are relative to the best match, at least
    ``lexical_floor``), yet it would cost reading half the namespace's
    postings. Dropping it keeps every row's bm25 to within 2.2e-6 and makes
    the lexical cost independent of how common the common words are. A row
    that matched *only* such words now counts as no keyword match (its
    keyword signal was 2.2e-6 / scale, i.e. 0, either way).
    """
    return {term: count for term, count in counts.items() if 2 * count <= rows}


def informative(catalog: Catalog, ns: str, query: str,
                rows: int) -> tuple[str | None, dict[str, int], bool]:
    """The query's informative words as an FTS5 expression (quoted words joined by
    OR), their row counts, and whether the postings can answer them."""
    match = fts_query(query)
    if match is None:
        return None, {}, True
    words = match.split(" OR ")  # fts_query's format
    counts = catalog.lexicon_counts(ns, words)
    postings = counts is not None
    if counts is None:
        counts = catalog.fts_doc_counts(ns, words)
    terms = informative_terms(counts, rows)
    return " OR ".join(terms) or None, terms, postings


def kept_terms(counts: dict[str, int], budget: int) -> list[str]:
    """The query's terms (in query order) or, over the budget, its rarest ones."""
    if sum(counts.values()) <= budget:
        return list(counts)
    kept: list[str] = []
    used = 0
    for term in sorted(counts, key=counts.__getitem__):
        if kept and used + counts[term] > budget:
            break
        kept.append(term)
        used += counts[term]
    return kept


def _top(keys: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], n: int) -> list[int]:
    """The n best keys (ties: lower key first), as FTS5's ``ORDER BY bm25, rowid``."""
    if len(keys) > 4 * n:  # only the n best need sorting
        cut = np.partition(-scores, n - 1)[n - 1]
        near = np.flatnonzero(-scores <= cut)
        keys, scores = keys[near], scores[near]
    order = np.lexsort((keys, -scores))[:n]
    top: list[int] = keys[order].tolist()
    return top


def _avgdl(catalog: Catalog, ns: str) -> tuple[int, float]:
    rows, tokens = catalog.lexicon_stats(ns)
    return rows, (tokens / rows if rows else 1.0)


_Part = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]  # one word's keys and shares


class Parts:
    """Each scored word's rows and share of their bm25, cut out of the concatenated
    arrays on first use: only a recall that rescores its candidates needs them."""

    __slots__ = ("_keys", "_shares", "_sizes", "_split", "_words")

    def __init__(self, words: Sequence[str], keys: npt.NDArray[np.int64],
                 shares: npt.NDArray[np.float64], sizes: list[int]) -> None:
        self._words, self._keys, self._shares, self._sizes = words, keys, shares, sizes
        self._split: dict[str, _Part] | None = None

    def get(self, word: str) -> _Part | None:
        if self._split is None:
            bounds = np.cumsum(self._sizes)[:-1]
            self._split = dict(zip(self._words, zip(np.split(self._keys, bounds),
                                                    np.split(self._shares, bounds),
                                                    strict=True), strict=True))
        return self._split.get(word)


def _word_part(catalog: Catalog, ns: str, word: str, rows: int, count: int, avgdl: float,
               keys: npt.NDArray[np.int64] | None = None) -> _Part:
    """A word's rows and its share of their bm25: all of them, or (``keys``) at least
    those of ``keys`` that hold it, read from the blocks that can hold them."""
    if keys is None or count <= WHOLE_READ:
        found, tf, dl = catalog.lexicon_postings(ns, word)
    else:
        found, tf, dl = catalog.lexicon_postings_at(ns, word, keys)
    return found, bm25_partials(tf, dl, bm25_idf(rows, count), avgdl)


def _score_words(catalog: Catalog, ns: str, words: Sequence[str], counts: dict[str, int]
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], Parts]:
    """bm25 of every row matching ``words``, and each word's part of it."""
    if not words:
        return _NO_KEYS, _NO_SCORES, Parts((), _NO_KEYS, _NO_SCORES, [])
    rows, avgdl = _avgdl(catalog, ns)
    read = catalog.lexicon_postings_many(ns, words)
    found = [read[word] for word in words]
    sizes = [len(keys) for keys, _, _ in found]
    keys = np.concatenate([f[0] for f in found])
    # every word's shares in one numpy pass (elementwise: the same floats as word by word)
    idf = np.repeat([bm25_idf(rows, counts[word]) for word in words], sizes)
    shares = bm25_partials(np.concatenate([f[1] for f in found]),
                           np.concatenate([f[2] for f in found]), idf, avgdl)
    parts = Parts(words, keys, shares, sizes)
    if len(words) == 1 or not len(keys):
        return keys, shares, parts
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    new = np.empty(len(ordered), dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    inverse = np.empty(len(keys), dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    # bincount adds in input order, phrase by phrase from 0.0, as FTS5's bm25 does
    # (a phrase absent from a row adds exactly 0.0 there): the same floats
    total = np.bincount(inverse, weights=shares)
    return ordered[new], np.asarray(total, dtype=np.float64), parts


def postings_top(catalog: Catalog, ns: str, counts: dict[str, int], n: int) -> list[int]:
    """The postings' own top n for the words of ``counts`` (:func:`informative`'s), every
    word scoring all its rows (no budget): the lexical floor bench/recall.py measures."""
    keys, scores, _ = _score_words(catalog, ns, list(counts), counts)
    return _top(keys, scores, n)


def lexical_pass(catalog: Catalog, ns: str, match: str | None, n: int,
                 counts: dict[str, int], postings: bool) -> Lexical:
    """The lexical candidates of ``match`` (:func:`informative`'s) with ``counts``."""
    if match is None:
        return Lexical([], _NO_KEYS, _NO_SCORES, complete=True)
    budget = FTS_BUDGET_FACTOR * n
    if postings:  # reading postings costs little per row: every word chooses, up to a cap
        budget = max(budget, POSTINGS_BUDGET)
    kept = kept_terms(counts, budget)
    complete = len(kept) == len(counts)
    if postings:
        keys, scores, parts = _score_words(catalog, ns, kept, counts)
        return Lexical(_top(keys, scores, n), keys, scores, complete, parts=parts)
    first = match if complete else " OR ".join(kept)
    if sum(counts[term] for term in kept) <= budget:
        rows = catalog.fts_matches(ns, first)  # every match, bm25 included, best first
        keys, scores = _arrays(rows)
        return Lexical([key for key, _ in rows[:n]], keys, scores, complete)
    rows = catalog.fts_search(ns, first, n)  # one word in more rows than the budget
    keys, scores = _arrays(rows)
    return Lexical([key for key, _ in rows], keys, scores, complete and len(rows) < n)


def _arrays(rows: Sequence[tuple[int, float]]
            ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """FTS5's (key, bm25) rows as ascending keys and negated bm25."""
    if not rows:
        return _NO_KEYS, _NO_SCORES
    keys = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    scores = -np.fromiter((r[1] for r in rows), np.float64, len(rows))
    order = np.argsort(keys)
    return keys[order], scores[order]


def rescore(catalog: Catalog, ns: str, match: str, lexical: Lexical, counts: dict[str, int],
            wanted: Sequence[int]) -> Lexical:
    """``lexical`` with the full query's scores of the ``wanted`` keys instead."""
    if lexical.parts is not None:
        keys = np.unique(np.asarray(wanted, dtype=np.int64))
        rows, avgdl = _avgdl(catalog, ns)
        total = np.zeros(len(keys))
        matched = np.zeros(len(keys), dtype=bool)
        for word, count in counts.items():  # in query order, as FTS5 sums its phrases
            found, shares = lexical.parts.get(word) or _word_part(
                catalog, ns, word, rows, count, avgdl, keys)
            if not len(found):
                continue
            at = np.minimum(np.searchsorted(found, keys), len(found) - 1)
            hit = found[at] == keys
            total += np.where(hit, shares[at], 0.0)
            matched |= hit
        return Lexical(lexical.top, keys[matched], total[matched], complete=True)
    fts5 = catalog.fts_scores(ns, match, wanted)
    keys, scores = _arrays(sorted(fts5.items()))
    return Lexical(lexical.top, keys, scores, complete=True)
