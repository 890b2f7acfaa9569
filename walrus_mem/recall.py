"""Hybrid recall: gather ANN and FTS5 candidates, fuse them, filter and cut.

Called by :meth:`walrus_mem.Memory.recall` under the engine lock with the
namespace's caught-up index. Local only: no network.

1. top N by cosine from USearch and top N by bm25 from the namespace's FTS5
   table (N = max(4k, 50));
2. exact cosine for FTS-only candidates from the vectors the index holds; bm25
   for dense-only candidates (and for the successors the context step may add)
   in one FTS5 pass, skipped when the bm25 list is short (it then holds every
   match);
3. :func:`walrus_mem.ranking.fuse`, then :func:`~walrus_mem.ranking.context_keys`
   successors joined and fused again;
4. expiry, metadata filters and the ``min_score`` cutoff, counted; full rows
   are read for the k winners only (or for all candidates when a filter must
   see whole records). A filter that removed too many candidates widens N x4
   and starts over.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Final

import numpy as np
import numpy.typing as npt

from .catalog import Catalog
from .filters import Predicate
from .index import NamespaceIndex
from .models import RecallHit, RecallResult
from .ranking import Candidate, FusionParams, Scores, context_keys, fts_query, fuse
from .rows import record_from_row, view_of_row

__all__ = ["FTS_BUDGET_FACTOR", "MIN_CANDIDATES", "hybrid_recall", "with_successors"]

MIN_CANDIDATES: Final = 50
FTS_BUDGET_FACTOR: Final = 10
"""The first FTS5 pass scores at most about this many rows per candidate (see _first_pass)."""


def with_successors(
    ranked: list[tuple[Candidate, Scores]],
    extra: list[Candidate],
    params: FusionParams,
    *,
    now: float,
) -> list[tuple[Candidate, Scores]]:
    """``fuse(ranked candidates + extra)``, re-scoring only what ``extra`` changes.

    A candidate's score depends on its own signals, on the *own* relevance
    of the memory just before it and on the best bm25 of the whole list.
    Adding successors changes the scores of the successors themselves and
    of the candidates right after them, nothing else. Those are fused again
    together with what they depend on (their predecessors and the best
    keyword match); every other candidate keeps its first score. A successor
    with a better keyword match than all candidates changes the scale of
    every keyword score: then everything is fused again.
    """
    by_key = {cand.key: cand for cand, _ in ranked}
    best = max((cand for cand in by_key.values() if cand.lexical is not None),
               key=lambda cand: cand.lexical or 0.0, default=None)
    top = -1.0 if best is None or best.lexical is None else best.lexical
    if any(cand.lexical is not None and not cand.lexical <= top for cand in extra):
        # a better keyword match moves every candidate's keyword score
        return fuse([cand for cand, _ in ranked] + extra, params, now=now)
    changed = {cand.key for cand in extra}
    changed |= {key + 1 for key in changed if key + 1 in by_key}
    needed = {key - 1 for key in changed if key - 1 in by_key}
    if best is not None:
        needed.add(best.key)
    subset = [*extra, *(by_key[key] for key in (changed | needed) if key in by_key)]
    rescored = [pair for pair in fuse(subset, params, now=now) if pair[0].key in changed]
    merged = [pair for pair in ranked if pair[0].key not in changed] + rescored
    merged.sort(key=lambda pair: (-pair[1].score, pair[0].key))
    return merged


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
    budget = FTS_BUDGET_FACTOR * n
    if len(terms) < 2:
        return match
    counts = catalog.fts_doc_counts(ns, terms)
    if sum(counts.values()) <= budget:
        return match
    kept: list[str] = []
    used = 0
    for term in sorted(terms, key=lambda t: counts[t]):
        if kept and used + counts[term] > budget:
            break
        kept.append(term)
        used += counts[term]
    return " OR ".join(kept)


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
    match = fts_query(query)
    n = max(4 * k, MIN_CANDIDATES)
    while True:
        dense_keys, dense_sims = idx.search(vector, min(n, total))
        first = _first_pass(catalog, ns, match, n)
        lexical = catalog.fts_search(ns, first, n) if first else []
        union = list(dict.fromkeys([*dense_keys, *(key for key, _ in lexical)]))
        # Ranking needs created_at / importance / expires_at, which the index keeps
        # beside the vectors: no catalog row is read before fusion unless a filter
        # has to look at whole records.
        attrs = idx.attrs
        full: dict[int, sqlite3.Row] = {}
        if predicate is not None:
            full = catalog.memories_by_keys(ns, union)
        keys = [key for key in union if key in attrs and (predicate is None or key in full)]
        dense = dict(zip(dense_keys, dense_sims, strict=True))
        fts_only = [key for key in keys if key not in dense]
        if fts_only:  # exact cosine from the stored vectors (the index holds them)
            dense.update(zip(fts_only, idx.similarities(fts_only, vector), strict=True))
        bm25 = {key: -score for key, score in lexical}
        # A short lexical list holds every matching row: the others do not match.
        # After a pruned first pass, every candidate gets the full query's bm25.
        if first != match and match:
            chosen = set(keys)
            wanted = keys + [key + 1 for key in keys if key + 1 in attrs and key + 1 not in chosen]
            bm25 = {key: -score for key, score in catalog.fts_scores(ns, match, wanted).items()}
        elif match and len(lexical) >= n:
            # One pass over the matches also scores the successors the context step
            # below may add: a second FTS query would cost as much as this one.
            chosen = set(keys)
            wanted = [key for key in keys if key not in bm25]
            wanted += [key + 1 for key in keys if key + 1 in attrs and key + 1 not in chosen]
            if wanted:
                more = catalog.fts_scores(ns, match, wanted)
                bm25.update({key: -score for key, score in more.items()})
        dense_rank = {key: r for r, key in enumerate(dense_keys)}
        lexical_rank = {key: r for r, (key, _) in enumerate(lexical)}
        candidates = [
            Candidate(
                key=key,
                dense=dense[key],
                lexical=bm25.get(key),
                dense_rank=dense_rank.get(key),
                lexical_rank=lexical_rank.get(key),
                created_at=attrs[key][0],
                importance=attrs[key][1],
            )
            for key in keys
        ]
        now = time.time()
        ranked = fuse(candidates, params, now=now)
        # Conversational context: the memory written right after a top hit (the
        # answer after a question) joins as a candidate with its own signals.
        following = [key for key in context_keys(ranked, params) if key in attrs]
        if predicate is not None and following:
            full.update(catalog.memories_by_keys(ns, following))
            following = [key for key in following if key in full]
        if following:
            sims = idx.similarities(following, vector)
            extra = [
                Candidate(key=key, dense=sim, lexical=bm25.get(key),
                          dense_rank=None, lexical_rank=None,
                          created_at=attrs[key][0], importance=attrs[key][1])
                for key, sim in zip(following, sims, strict=True)
            ]
            candidates += extra
            ranked = with_successors(ranked, extra, params, now=now)
        winners: list[tuple[int, Scores]] = []
        filtered_out = below = 0
        for cand, scores in ranked:
            expires_at = attrs[cand.key][2]
            if not include_expired and expires_at is not None and expires_at <= now:
                filtered_out += 1
                continue
            if predicate is not None and not predicate(view_of_row(full[cand.key])):
                filtered_out += 1
                continue
            if scores.score < cutoff:
                below += 1
                continue
            if len(winners) < k:
                winners.append((cand.key, scores))
        exhausted = n >= total and len(lexical) < n
        if len(winners) >= k or not filtered_out or exhausted:
            if predicate is None:
                full = catalog.memories_by_keys(ns, [key for key, _ in winners])
            hits = [
                RecallHit(record=record_from_row(full[key]), score=sc.score, dense=sc.dense,
                          lexical=sc.lexical, recency=sc.recency, importance=sc.importance,
                          context=sc.context)
                for key, sc in winners if key in full
            ]
            return RecallResult(hits, candidates=len(candidates),
                                filtered_out=filtered_out, below_min_score=below)
        n *= 4  # filters removed too many: widen the candidate pool
