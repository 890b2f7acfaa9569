"""Hybrid recall: gather ANN and lexical candidates, fuse them, filter and cut.

Called by :meth:`walrus_mem.Memory.recall` under the engine lock with the
namespace's caught-up index. Local only: no network.

1. top N by cosine from USearch and top N by bm25 from the namespace's
   postings (:mod:`walrus_mem._recall.lexical`; N = max(4k, 50)). Words in more than
   half the namespace's rows are left out (bm25 gives them no weight). When
   the other words hold at most a budget of rows, the bm25 of *every*
   matching row is known from one pass, so every candidate's keyword score is
   known too; otherwise the most common words are left out of candidate
   selection and :func:`~walrus_mem._recall.lexical.rescore` gives the candidates
   (and the successors the context step may add) the full query's bm25;
2. exact cosine for keyword-only candidates from the index's vector copies;
3. :func:`walrus_mem._recall.ranking.fuse_arrays` (numpy over all candidates), then
   the successors of the top hits (:func:`~walrus_mem._recall.ranking.context_keys`'
   rule) joined and fused again; when the query names someone or a time
   (:mod:`walrus_mem._recall.query_features`) or asks when, each candidate's prior
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
from itertools import compress, repeat
from typing import Final

import numpy as np
import numpy.typing as npt

from .._catalog.catalog import Catalog
from .._catalog.rows import loads_metadata, record_from_row, view_of_row
from ..models import RecallHit, RecallResult
from .filters import Predicate
from .index import NamespaceIndex
from .lexical import FTS_BUDGET_FACTOR, informative, informative_terms, lexical_pass, rescore
from .query_features import QueryFeatures, analyse, candidate_prior, wanted
from .ranking import FusionParams, fuse_arrays, fused_order
from .temporal import memory_time

__all__ = ["FTS_BUDGET_FACTOR", "MIN_CANDIDATES", "hybrid_recall", "informative_terms",
           "lexical_match"]

MIN_CANDIDATES: Final = 50
TWIN_SLACK: Final = 8
"""Extra ranked rows read so twins collapsed into one hit leave no gap in the top k."""
_VALIDATE_HIT: Final = RecallHit.__pydantic_validator__.validate_python


def _priors(catalog: Catalog, ns: str, features: QueryFeatures, keys: list[int],
            idx: NamespaceIndex, params: FusionParams) -> dict[int, float] | None:
    """The query-understanding prior of the candidates and of the successors the context
    step may add: one read of their text, metadata and write time."""
    if not wanted(features, params):
        return None
    chosen = set(keys)
    after = [key + ahead for key in keys for ahead in range(1, params.context_depth + 1)
             if key + ahead not in chosen]
    more = list(compress(after, idx.find(after)[0]))
    rows = catalog.texts_by_keys(ns, list(dict.fromkeys(keys + more)))
    found = list(rows)
    prior = candidate_prior(
        features,
        [rows[key][0] for key in found],
        lambda: [memory_time(loads_metadata(rows[key][1]), rows[key][2]) for key in found],
        params,
    )
    return None if prior is None else dict(zip(found, prior.tolist(), strict=True))


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


def _dense(idx: NamespaceIndex, vector: npt.NDArray[np.float32],
           n: int) -> tuple[list[int], list[float]]:
    """The top n by cosine, or every key when n covers the namespace."""
    return idx.search(vector, n) if n < len(idx) else idx.search_all(vector)


def _successors(idx: NamespaceIndex, keys: npt.NDArray[np.int64], present: list[int],
                order: npt.NDArray[np.intp], params: FusionParams
                ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.intp]]:
    """The memories written right after the top hits that are not candidates yet (the keys
    :func:`~walrus_mem._recall.ranking.successor_keys` names, as a set, ascending) and their
    slots: those the namespace holds. ``present``: the candidates' keys as a list."""
    depth = params.context_depth
    if params.context_weight <= 0.0 or params.context_expand <= 0 or depth <= 0:
        return _NO_KEYS, _NO_SLOTS
    top = keys[order[: params.context_expand]].tolist()
    wanted = {key + ahead for key in top for ahead in range(1, depth + 1)}
    wanted.difference_update(present)
    if not wanted:
        return _NO_KEYS, _NO_SLOTS
    following = np.fromiter(sorted(wanted), np.int64, len(wanted))
    found, slots = idx.find(following)
    if np.count_nonzero(found) < len(found):
        following, slots = following[found], slots[found]
    return following, slots


_NO_KEYS: Final = np.zeros(0, dtype=np.int64)
_NO_SLOTS: Final = np.zeros(0, dtype=np.intp)


def lexical_match(catalog: Catalog, ns: str, query: str, rows: int) -> str | None:
    """The FTS5 expression of the words recall scores for ``query``: its informative
    words (:func:`~walrus_mem._recall.lexical.informative_terms`), OR-joined."""
    return informative(catalog, ns, query, rows)[0]


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
    n = max(4 * k, MIN_CANDIDATES)
    # The ANN search first: what runs before it (tokenizing, SQLite) would take its
    # graph's pages out of the CPU caches.
    dense_keys, dense_sims = _dense(idx, vector, n)
    match, counts, from_postings = informative(catalog, ns, query, total)
    features = analyse(query, now=time.time())
    nan = math.nan
    while True:
        lexical = lexical_pass(catalog, ns, match, n, counts, from_postings)
        seen = set(dense_keys)
        extra = [key for key in lexical.top if key not in seen]
        keys = dense_keys + extra
        key_arr = np.asarray(keys, dtype=np.int64)
        found, at = idx.find(key_arr)
        if np.count_nonzero(found) < len(keys):
            if not found[: len(dense_keys)].all():  # USearch ahead of the rows: cannot happen
                dense_sims = list(compress(dense_sims, found))
                dense_keys = list(compress(dense_keys, found))
            keys, key_arr, at = list(compress(keys, found)), key_arr[found], at[found]
        full: dict[int, sqlite3.Row] = {}
        if predicate is not None:
            full = catalog.memories_by_keys(ns, keys)
            keep = np.fromiter((key in full for key in keys), bool, len(keys))
            keys, key_arr, at = list(compress(keys, keep)), key_arr[keep], at[keep]
        if not lexical.complete and match:
            # One pass with the full query scores the candidates and the successors the
            # context step below may add: a second pass would cost as much again.
            # (A successor outside the namespace is not in its postings: no match.)
            chosen = set(keys)
            wanted = keys + [key + ahead for key in keys
                             for ahead in range(1, params.context_depth + 1)
                             if key + ahead not in chosen]
            lexical = rescore(catalog, ns, match, lexical, counts, wanted)
        # Exact cosine: USearch's for dense candidates, the index's vector copies for
        # the keyword-only ones. Ranking needs created_at / importance / expires_at,
        # which the index also keeps: no catalog row is read before fusion unless a
        # filter has to look at whole records.
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

        lex = lexical.of(key_arr)
        priors = _priors(catalog, ns, features, keys, idx, params)
        prior = None if priors is None else np.array([priors.get(key, 1.0) for key in keys])
        created_at, importance = idx.created_at[at], idx.importance[at]
        order = fused_order(key_arr, dense, lex, created_at, importance, params, now=now,
                            prior=prior)
        # Conversational context: the memory written right after a top hit (the
        # answer after a question) joins as a candidate with its own signals.
        following, more = _successors(idx, key_arr, keys, order, params)
        if predicate is not None and len(following):
            full.update(catalog.memories_by_keys(ns, following.tolist()))
            known = np.fromiter((key in full for key in following.tolist()), bool,
                                len(following))
            following, more = following[known], more[known]
        if len(following):
            keys = keys + following.tolist()
            key_arr = np.concatenate([key_arr, following])
            at = np.concatenate([at, more])
            dense = np.concatenate([dense, idx.similarities_at(more, vector)])
            lex = np.concatenate([lex, lexical.of(following)])
            created_at, importance = idx.created_at[at], idx.importance[at]
            if priors is not None:
                prior = np.array([priors.get(key, 1.0) for key in keys])
        fused = fuse_arrays(key_arr, dense, lex, created_at, importance, params, now=now,
                            prior=prior)
        # Expiry and filters remove a candidate; the cutoff counts it as below.
        removed = None if include_expired else idx.expires_at[at] <= now  # NaN: never
        if predicate is not None:
            unwanted = np.fromiter(
                (not predicate(view_of_row(full[key])) for key in keys), bool, len(keys))
            removed = unwanted if removed is None else removed | unwanted
        filtered_out = 0 if removed is None else int(np.count_nonzero(removed))
        keep = fused.score >= cutoff  # the score is never NaN
        below = len(keys) - int(np.count_nonzero(keep))
        if filtered_out:
            assert removed is not None
            below -= int(np.count_nonzero(removed & ~keep))
            keep &= ~removed
        kept = fused.order[keep[fused.order]]
        winners = kept[:k].tolist()
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
            hits: list[RecallHit] = [
                _VALIDATE_HIT({  # RecallHit(...)'s validation without its Python frame
                    "record": record_from_row(full[keys[i]]),
                    "score": float(fused.score[i]),
                    "dense": float(dense[i]),
                    "lexical": None if math.isnan(fused.lexical[i]) else float(fused.lexical[i]),
                    "recency": float(fused.recency[i]),
                    "importance": float(fused.importance[i]),
                    "context": float(fused.context[i]),
                })
                for i in shown
            ]
            return RecallResult(hits, candidates=len(keys), filtered_out=filtered_out,
                                below_min_score=below)
        n *= 4  # filters removed too many: widen the candidate pool
        dense_keys, dense_sims = _dense(idx, vector, n)

