"""Hybrid recall: gather ANN and FTS5 candidates, fuse them, filter and cut.

Called by :meth:`walrus_mem.Memory.recall` under the engine lock with the
namespace's caught-up index. Local only: no network.

1. top N by cosine from USearch and top N by bm25 from the namespace's FTS5
   table (N = max(4k, 50)). Words in more than half the namespace's rows are
   left out of the FTS5 query (:func:`informative_terms`: bm25 gives them no
   weight, FTS5 would still read their doclists). When the query's words match at most
   ``FTS_BUDGET_FACTOR * N`` rows, one FTS5 pass returns the bm25 of *every*
   matching row, so every candidate's keyword score is known without a second
   query; otherwise the most common words are dropped from candidate
   selection (:func:`_first_pass`) and one more pass scores the candidates
   (and the successors the context step may add) with the full query;
2. exact cosine for FTS-only candidates from the index's vector copies;
3. :func:`walrus_mem.ranking.fuse_arrays` (numpy over all candidates), then
   the successors of the top hits (:func:`~walrus_mem.ranking.context_keys`'
   rule) joined and fused again; when the query names someone or a time
   (:mod:`walrus_mem.query_features`) or asks when, each candidate's prior
   comes from one read of the candidates' text, metadata and write time;
4. expiry, metadata filters and the ``min_score`` cutoff, counted; full rows
   are read for the k winners only (or for all candidates when a filter must
   see whole records). A filter that removed too many candidates widens N x4
   and starts over.
"""

from __future__ import annotations

import math
import sqlite3
import time
from dataclasses import dataclass
from itertools import repeat
from typing import Final

import numpy as np
import numpy.typing as npt

from .catalog import Catalog
from .filters import Predicate
from .index import NamespaceIndex
from .models import RecallHit, RecallResult
from .query_features import QueryFeatures, analyse, candidate_prior, wanted
from .ranking import FusionParams, fts_query, fuse_arrays, successor_keys
from .rows import loads_metadata, record_from_row, view_of_row
from .temporal import memory_time

__all__ = ["FTS_BUDGET_FACTOR", "MIN_CANDIDATES", "hybrid_recall", "informative_terms",
           "lexical_match"]

MIN_CANDIDATES: Final = 50
FTS_BUDGET_FACTOR: Final = 10
"""An FTS5 pass scores at most about this many rows per candidate (see _first_pass)."""
TWIN_SLACK: Final = 8
"""Extra ranked rows read so twins collapsed into one hit leave no gap in the top k."""


def _first_pass(catalog: Catalog, ns: str, match: str | None, n: int) -> str | None:
    """The MATCH expression that picks the lexical candidates.

    SQLite computes bm25 for every matching row before it sorts, so a query
    with a very common word costs in proportion to that word's rows, while
    the word adds almost nothing to bm25 (its idf is low). When the query's
    terms match more than ``FTS_BUDGET_FACTOR * n`` rows together, the most
    common terms are dropped from this first pass (the rarest one always
    stays); the candidates it finds then get the full query's bm25. Rows that
    match only the dropped words can still come in as dense candidates.
    """
    if match is None:
        return None
    terms = match.split(" OR ")  # fts_query's format: quoted \w+ words
    return " OR ".join(_kept_terms(catalog.fts_doc_counts(ns, terms), FTS_BUDGET_FACTOR * n))


def _kept_terms(counts: dict[str, int], budget: int) -> list[str]:
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


def _priors(catalog: Catalog, ns: str, features: QueryFeatures, keys: list[int],
            slots: dict[int, int], params: FusionParams) -> dict[int, float] | None:
    """The query-understanding prior of the candidates and of the successors the context
    step may add: one read of their text, metadata and write time."""
    if not wanted(features, params):
        return None
    chosen = set(keys)
    more = [key + ahead for key in keys for ahead in range(1, params.context_depth + 1)
            if key + ahead not in chosen and key + ahead in slots]
    rows = catalog.texts_by_keys(ns, list(dict.fromkeys(keys + more)))
    found = list(rows)
    prior = candidate_prior(
        features,
        [rows[key][0] for key in found],
        lambda: [memory_time(loads_metadata(rows[key][1]), rows[key][2]) for key in found],
        params,
    )
    return None if prior is None else dict(zip(found, prior.tolist(), strict=True))


@dataclass(frozen=True, slots=True)
class _Lexical:
    """The lexical candidates (best first) and the bm25 known so far (SQLite's: lower
    is better)."""

    top: list[int]
    scores: dict[int, float]
    complete: bool  # scores holds the full query's bm25 of every matching row


def _one_per_text(ranked: list[tuple[int, str]]) -> list[int]:
    """The positions (of (position, text), best first) whose text no better-ranked one
    has: twins show once."""
    seen: set[str] = set()
    out = []
    for i, text in ranked:
        if text not in seen:
            seen.add(text)
            out.append(i)
    return out


def informative_terms(counts: dict[str, int], rows: int) -> dict[str, int]:
    """The terms whose bm25 weight is not clamped to nothing: those in at most half the rows.

    SQLite's bm25 takes ``idf = log((N - n + 0.5) / (n + 0.5))`` and clamps it
    to 1e-6 when that is <= 0, i.e. for a term in more than half of the N rows
    ("user" in facts that all start with "User ..."). Such a term adds at most
    ``1e-6 * (k1 + 1) = 2.2e-6`` to any row's bm25, below anything fusion can
    tell apart (scores are relative to the best match, at least
    ``lexical_floor``), yet FTS5 would read its whole doclist: half the
    namespace. Dropping it keeps every row's bm25 to within 2.2e-6 and makes
    the lexical cost independent of how common the common words are. A row
    that matched *only* such words now counts as no keyword match (its
    keyword signal was 2.2e-6 / scale, i.e. 0, either way).
    """
    return {term: count for term, count in counts.items() if 2 * count <= rows}


def lexical_match(catalog: Catalog, ns: str, query: str, rows: int) -> str | None:
    """The FTS5 expression recall runs for ``query``: its informative terms, OR-joined."""
    return _informative(catalog, ns, query, rows)[0]


def _informative(catalog: Catalog, ns: str, query: str,
                 rows: int) -> tuple[str | None, dict[str, int]]:
    """:func:`lexical_match` and the row counts of its terms."""
    match = fts_query(query)
    if match is None:
        return None, {}
    terms = informative_terms(catalog.fts_doc_counts(ns, match.split(" OR ")), rows)
    return " OR ".join(terms) or None, terms  # fts_query's format: quoted words joined by OR


def _lexical_pass(catalog: Catalog, ns: str, match: str | None, n: int,
                  counts: dict[str, int] | None = None) -> _Lexical:
    """The lexical candidates of ``match``; ``counts``: its terms' row counts, if known."""
    if match is None:
        return _Lexical([], {}, complete=True)
    budget = FTS_BUDGET_FACTOR * n
    if counts is None:
        counts = catalog.fts_doc_counts(ns, match.split(" OR "))  # fts_query's format
    kept = _kept_terms(counts, budget)
    first = match if len(kept) == len(counts) else " OR ".join(kept)
    if sum(counts[term] for term in kept) <= budget:
        rows = catalog.fts_matches(ns, first)  # every match, bm25 included, best first
        top = [key for key, _ in rows[:n]]
        if first == match:
            return _Lexical(top, dict(rows), complete=True)
        return _Lexical(top, {}, complete=False)
    rows = catalog.fts_search(ns, first, n)  # one word in more rows than the budget
    top = [key for key, _ in rows]
    if first == match:
        return _Lexical(top, dict(rows), complete=len(rows) < n)
    return _Lexical(top, {}, complete=False)


def hybrid_recall(
    catalog: Catalog,
    idx: NamespaceIndex,
    query: str,
    vector: npt.NDArray[np.float32],
    *,
    k: int,
    predicate: Predicate | None,
    cutoff: float,
    include_expired: bool,
    params: FusionParams,
) -> RecallResult:
    """The k best memories of ``idx.namespace`` for ``query`` / ``vector``."""
    ns = idx.namespace
    total = len(idx)
    if total == 0:
        return RecallResult()
    match, counts = _informative(catalog, ns, query, total)
    features = analyse(query, now=time.time())
    n = max(4 * k, MIN_CANDIDATES)
    slots = idx.slots
    nan = math.nan
    while True:
        dense_keys, dense_sims = (idx.search(vector, n) if n < total
                                  else idx.search_all(vector))
        lexical = _lexical_pass(catalog, ns, match, n, counts)
        union = list(dict.fromkeys(dense_keys + lexical.top))
        full: dict[int, sqlite3.Row] = {}
        if predicate is None:  # dense keys come from the index itself: all in slots
            keys = dense_keys + [key for key in union[len(dense_keys):] if key in slots]
        else:
            full = catalog.memories_by_keys(ns, union)
            keys = [key for key in union if key in slots and key in full]
        bm25 = lexical.scores
        if not lexical.complete and match:
            # One pass with the full query scores the candidates and the successors the
            # context step below may add: a second FTS query would cost as much again.
            # (A successor outside the namespace is not in its FTS5 table: no match.)
            chosen = set(keys)
            wanted = keys + [key + ahead for key in keys
                             for ahead in range(1, params.context_depth + 1)
                             if key + ahead not in chosen]
            bm25 = catalog.fts_scores(ns, match, wanted)
        # Exact cosine: USearch's for dense candidates, the index's vector copies for
        # the keyword-only ones. Ranking needs created_at / importance / expires_at,
        # which the index also keeps: no catalog row is read before fusion unless a
        # filter has to look at whole records.
        at = idx.slots_of(keys)
        if predicate is None:
            dense = np.empty(len(keys))
            dense[: len(dense_keys)] = dense_sims
            dense[len(dense_keys):] = idx.similarities_at(at[len(dense_keys):], vector)
        else:
            dense_of = dict(zip(dense_keys, dense_sims, strict=True))
            dense = np.fromiter(map(dense_of.get, keys, repeat(nan)), np.float64, len(keys))
            missing = np.isnan(dense)
            if missing.any():
                dense[missing] = idx.similarities_at(at[missing], vector)
        now = time.time()

        key_arr = np.asarray(keys, dtype=np.int64)
        lex = -np.fromiter(map(bm25.get, keys, repeat(nan)), np.float64, len(keys))
        priors = _priors(catalog, ns, features, keys, slots, params)
        prior = None if priors is None else np.array([priors.get(key, 1.0) for key in keys])
        fused = fuse_arrays(key_arr, dense, lex, idx.created_at[at], idx.importance[at],
                            params, now=now, prior=prior)
        # Conversational context: the memory written right after a top hit (the
        # answer after a question) joins as a candidate with its own signals.
        following = [key for key in successor_keys(key_arr[fused.order].tolist(), params)
                     if key in slots]
        if predicate is not None and following:
            full.update(catalog.memories_by_keys(ns, following))
            following = [key for key in following if key in full]
        if following:
            more = idx.slots_of(following)
            keys = keys + following
            at = np.concatenate([at, more])
            dense = np.concatenate([dense, idx.similarities_at(more, vector)])
            key_arr = np.asarray(keys, dtype=np.int64)
            lex = np.concatenate([lex, -np.fromiter(map(bm25.get, following, repeat(nan)),
                                                    np.float64, len(following))])
            if priors is not None:
                prior = np.array([priors.get(key, 1.0) for key in keys])
            fused = fuse_arrays(key_arr, dense, lex, idx.created_at[at], idx.importance[at],
                                params, now=now, prior=prior)
        # Expiry and filters remove a candidate; the cutoff counts it as below.
        removed = np.zeros(len(keys), dtype=bool)
        if not include_expired:
            removed |= idx.expires_at[at] <= now  # NaN (never expires) compares False
        if predicate is not None:
            removed |= np.fromiter(
                (not predicate(view_of_row(full[key])) for key in keys), bool, len(keys))
        below = ~removed & (fused.score < cutoff)
        kept = fused.order[~(removed | below)[fused.order]]
        winners = kept[:k].tolist()
        filtered_out = int(removed.sum())
        exhausted = n >= total and len(lexical.top) < n
        if len(winners) >= k or not filtered_out or exhausted:
            # Twins (one text remembered on two machines, both kept by the merge:
            # docs/sync.md) show once: the best-ranked; a few more rows fill their place.
            # Rows are read for the k best first, and for a few more only when a twin
            # (or a row forgotten meanwhile) left a gap; records are built for the k shown.
            for width in (k, k + TWIN_SLACK):
                winners = kept[:width].tolist()
                if predicate is None:
                    full = catalog.memories_by_keys(ns, [keys[i] for i in winners])
                shown = _one_per_text([(i, full[keys[i]]["text"]) for i in winners
                                       if keys[i] in full])[:k]
                if len(shown) >= k or len(kept) <= width:
                    break
            hits = [
                RecallHit(
                    record=record_from_row(full[keys[i]]),
                    score=float(fused.score[i]),
                    dense=float(dense[i]),
                    lexical=None if math.isnan(fused.lexical[i]) else float(fused.lexical[i]),
                    recency=float(fused.recency[i]),
                    importance=float(fused.importance[i]),
                    context=float(fused.context[i]),
                )
                for i in shown
            ]
            return RecallResult(hits, candidates=len(keys), filtered_out=filtered_out,
                                below_min_score=int(below.sum()))
        n *= 4  # filters removed too many: widen the candidate pool

