"""_recall/recall.py's shortcuts give the same result as the plain computation."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import walrus_mem._recall.lexical as lexical_mod
import walrus_mem._recall.recall as recall_mod
from walrus_mem import Memory, Settings
from walrus_mem._catalog.catalog import fts_table
from walrus_mem._recall.index import NamespaceIndex
from walrus_mem._recall.ranking import (
    DEFAULT_PARAMS,
    Candidate,
    FusionParams,
    context_keys,
    fts_query,
    fuse,
    successor_keys,
)
from walrus_mem.testing import HashEmbedder

MASTER = "5a" * 32


def _first_pass(catalog: Any, ns: str, match: str | None, n: int) -> str | None:
    """The words that choose the lexical candidates (recall's rule, from FTS5's counts)."""
    if match is None:
        return None
    counts = catalog.fts_doc_counts(ns, match.split(" OR "))
    budget = max(lexical_mod.FTS_BUDGET_FACTOR * n, lexical_mod.POSTINGS_BUDGET)
    return " OR ".join(lexical_mod.kept_terms(counts, budget))


def test_common_words_are_pruned_from_the_first_pass_only(
    tmp_path: Path, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Words in most rows are dropped from candidate selection; scores still count them."""
    settings = Settings(data_dir=tmp_path / "m", use_keyring=False)
    with Memory(settings, embedder=fake_embedder, master_key=MASTER) as mem:
        texts = [f"common filler number {i}" for i in range(300)]
        texts += ["rare zebra sighting with common filler", "rare zebra sighting"]
        mem.remember_many(texts)
        ns = "default"
        monkeypatch.setattr(lexical_mod, "POSTINGS_BUDGET", 0)  # the n-based budget alone
        first = _first_pass(mem._catalog, ns, fts_query("zebra common filler"), 50)
        assert first == '"zebra" OR "common"'  # filler pushed the rows over the budget
        pruned = mem.recall("zebra common filler", k=10, min_score=0)
        monkeypatch.setattr(lexical_mod, "FTS_BUDGET_FACTOR", 10**9)  # no pruning
        mem._embedding.query_cache.clear()
        full = mem.recall("zebra common filler", k=10, min_score=0)
        zebras = {"rare zebra sighting with common filler", "rare zebra sighting"}
        assert zebras <= {h.record.text for h in pruned}
        assert zebras <= {h.record.text for h in full}
        scores = {h.record.id: (h.score, h.lexical) for h in full}
        for hit in pruned:  # every hit found both ways has the same scores
            if hit.record.id in scores:
                assert (hit.score, hit.lexical) == scores[hit.record.id]


# -- the engine against the plain computation -------------------------------------------

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango").split()
QUERIES = [
    "alpha bravo", "charlie", "mike november oscar", "what about tango and sierra",
    "papa quebec romeo sierra tango alpha", "zulu yankee", "golf", "hotel india juliet kilo",
    "the of and",  # no usable term: dense only
]
NOW = 1_800_000_000.0


def _corpus(rng: random.Random) -> list[dict[str, Any]]:
    items = []
    for i in range(420):
        # Zipf-like: the first words are in many rows, so common terms get pruned
        words = rng.choices(WORDS, weights=[1 / (r + 1) for r in range(len(WORDS))], k=6)
        item: dict[str, Any] = {"text": f"fact {i} " + " ".join(words),
                                "importance": round(rng.random(), 3)}
        if i % 37 == 0:
            item["expires_at"] = NOW - 10.0  # expired at recall time
        items.append(item)
    return items


def _plain_recall(mem: Memory, query: str, k: int, cutoff: float,
                  params: FusionParams) -> tuple[list[tuple[str, float]], int]:
    """Every signal from its source, the list-based fuse, context_keys, fuse again; and,
    as the engine does, a pool 4x wider when expiry removed candidates and fewer than k
    remain. Returns the hits and how many times the pool widened."""
    n = max(4 * k, recall_mod.MIN_CANDIDATES)
    widened = 0
    while True:
        out, expired, exhausted = _plain_pass(mem, query, n, cutoff, params)
        if len(out) >= k or not expired or exhausted:
            return out[:k], widened
        # HNSW is approximate: a wider search can find near neighbours the narrow one
        # missed, so the reference must widen exactly when the engine does.
        n *= 4
        widened += 1


def _plain_pass(mem: Memory, query: str, n: int, cutoff: float,
                params: FusionParams) -> tuple[list[tuple[str, float]], int, bool]:
    ns = "default"
    idx = mem._indexes.get(ns, mem.embedder.model_id, mem.embedder.dim)
    vector = mem._embedding.embed_query(query)
    dense_keys, dense_sims = (idx.search(vector, n) if n < len(idx)
                              else idx.search_all(vector))
    # The documented query: words in over half the rows left out (bm25 weight <= 2.2e-6;
    # test_words_in_over_half_the_rows_never_reach_fts5 compares with the full query).
    match = recall_mod.lexical_match(mem._catalog, ns, query, len(idx))
    table = fts_table(ns)
    conn = mem._catalog.conn
    lexical: list[int] = []
    bm25: dict[int, float] = {}
    if match:
        first = _first_pass(mem._catalog, ns, match, n)
        lexical = [r[0] for r in conn.execute(
            f"SELECT rowid, bm25({table}) AS s FROM {table} WHERE {table} MATCH ? "
            "ORDER BY s, rowid LIMIT ?", (first, n))]
        bm25 = {r[0]: -r[1] for r in conn.execute(
            f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ?", (match,))}
    attrs = {r[0]: (r[1], r[2], r[3]) for r in conn.execute(
        "SELECT key, created_at, importance, expires_at FROM memories WHERE namespace = ?",
        (ns,))}
    dense = dict(zip(dense_keys, dense_sims, strict=True))

    def candidate(key: int) -> Candidate:
        sim = dense[key] if key in dense else idx.similarities([key], vector)[0]
        return Candidate(key, sim, bm25.get(key), None, None, attrs[key][0], attrs[key][1])

    cands = [candidate(key) for key in dict.fromkeys(dense_keys + lexical)]
    ranked = fuse(cands, params, now=NOW)
    extra = [candidate(key) for key in context_keys(ranked, params) if key in attrs]
    ranked = fuse(cands + extra, params, now=NOW)
    ids = {r[0]: r[1] for r in conn.execute("SELECT key, id FROM memories")}
    out = []
    expired = 0
    for cand, scores in ranked:
        expires = attrs[cand.key][2]
        if expires is not None and expires <= NOW:
            expired += 1
        elif scores.score >= cutoff:
            out.append((ids[cand.key], scores.score))
    return out, expired, n >= len(idx) and len(lexical) < n


# (FTS_BUDGET_FACTOR, POSTINGS_BUDGET): the default (every word chooses), then with the
# postings' cap off: complete, pruned, one word over the budget
@pytest.mark.parametrize("budgets", [(10, lexical_mod.POSTINGS_BUDGET), (10, 0), (2, 0), (1, 0)])
@pytest.mark.parametrize("params", [DEFAULT_PARAMS,
                                    FusionParams(recency_weight=0.4, importance_weight=0.6)])
def test_recall_equals_the_plain_computation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budgets: tuple[int, int],
    params: FusionParams
) -> None:
    """hybrid_recall's postings, array fusion and index copies change no hit or score:
    FTS5's own bm25 and the list-based fusion give the same, to the last bit."""
    settings = Settings(data_dir=tmp_path / "m", use_keyring=False)
    with Memory(settings, embedder=HashEmbedder(dim=32), master_key=MASTER) as mem:
        mem.remember_many(_corpus(random.Random(7)))
        monkeypatch.setattr(lexical_mod, "FTS_BUDGET_FACTOR", budgets[0])
        monkeypatch.setattr(lexical_mod, "POSTINGS_BUDGET", budgets[1])
        compared = widened = 0
        for query in QUERIES:
            for k, cutoff in ((5, 0.0), (12, 0.3)):
                with monkeypatch.context() as m:
                    m.setattr(recall_mod.time, "time", lambda: NOW)
                    got = mem.recall(query, k=k, min_score=cutoff, params=params)
                want, wider = _plain_recall(mem, query, k, cutoff, params)
                assert [(h.id, h.score) for h in got] == want, query
                compared += len(want)
                widened += wider
        assert compared > 50  # the cases above are not all empty
        assert widened  # expiry + the cutoff leave fewer than k: the widened pool is compared


def test_words_in_over_half_the_rows_never_reach_fts5(
    tmp_path: Path, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """"user" in every fact: neither FTS5 nor the postings read its rows, and no score
    changes."""
    settings = Settings(data_dir=tmp_path / "m", use_keyring=False)
    with Memory(settings, embedder=fake_embedder, master_key=MASTER) as mem:
        texts = [f"User noted item {i} about the garden" for i in range(120)]
        texts[7] = "User is allergic to peanuts"
        texts[9] = "User likes peanuts roasted"
        mem.remember_many(texts)
        assert recall_mod.informative_terms({'"user"': 120, '"peanuts"': 2, '"half"': 60},
                                            120) == {'"peanuts"': 2, '"half"': 60}
        cat = mem._catalog
        seen: list[str] = []
        for name in ("fts_matches", "fts_search", "fts_scores", "lexicon_postings",
                     "lexicon_postings_many", "lexicon_postings_at"):
            real = getattr(cat, name)

            def spy(ns, match, *rest, _real=real):  # type: ignore[no-untyped-def]
                seen.append(match)
                return _real(ns, match, *rest)

            monkeypatch.setattr(cat, name, spy)
        hits = mem.recall("what does the user say about peanuts", k=5, min_score=0)
        assert seen and all('"user"' not in m for m in seen), seen
        assert {h.record.text for h in hits[:2]} == {texts[7], texts[9]}
        assert all(h.lexical is None for h in hits[2:])  # "user" alone is no keyword match
        # Keyword scores as FTS5 gives them for the full query, "user" included.
        table = fts_table("default")
        full = {r[0]: -r[1] for r in cat.conn.execute(
            f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ?",
            ('"user" OR "say" OR "peanuts"',))}
        keys = dict(cat.conn.execute("SELECT id, key FROM memories"))
        a, b = (full[keys[h.record.id]] for h in hits[:2])
        assert hits[0].lexical and hits[1].lexical  # keyword signal: bm25 / scale
        assert hits[0].lexical / hits[1].lexical == pytest.approx(a / b, rel=1e-5)
        # Only common words: dense recall, no FTS5 call at all.
        seen.clear()
        mem._embedding.query_cache.clear()
        assert len(mem.recall("user user garden item", k=3, min_score=0)) == 3
        assert seen == []


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_successors_are_the_rankings_successor_keys_the_index_holds(
    tmp_path: Path, data: st.DataObject
) -> None:
    """recall's numpy successor step names exactly ranking.successor_keys' keys (those
    the namespace holds), whatever the candidates, their order and the parameters."""
    held = data.draw(st.lists(st.integers(0, 120), unique=True, max_size=90))
    idx = NamespaceIndex("ns", tmp_path, "m", 4)
    if held:
        idx.set_rows(held, np.ones((len(held), 4), dtype=np.float32),
                     [(1.0, 0.5, None)] * len(held))
    keys = data.draw(st.lists(st.integers(0, 120), unique=True, max_size=40))
    order = data.draw(st.permutations(range(len(keys))))
    params = FusionParams(context_expand=data.draw(st.integers(0, 25)),
                          context_depth=data.draw(st.integers(0, 4)),
                          context_weight=data.draw(st.sampled_from([0.0, 0.8])))
    key_arr = np.asarray(keys, dtype=np.int64)
    following, slots = recall_mod._successors(idx, key_arr, keys,
                                              np.asarray(order, dtype=np.intp), params)
    want = [key for key in successor_keys([keys[i] for i in order], params)
            if key in idx.slots]
    assert sorted(following) == sorted(want) and len(following) == len(set(following))
    assert slots.tolist() == [idx.slots[key] for key in following]
