"""recall.py's shortcuts give the same result as the plain computation."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import walrus_mem.recall as recall_mod
from walrus_mem import Memory, Settings
from walrus_mem.ranking import DEFAULT_PARAMS, Candidate, FusionParams, fts_query, fuse
from walrus_mem.recall import with_successors

MASTER = "5a" * 32


def _cand(rng: random.Random, key: int) -> Candidate:
    return Candidate(
        key=key,
        dense=rng.uniform(-0.2, 0.9),
        lexical=None if rng.random() < 0.4 else rng.uniform(0.5, 30.0),
        dense_rank=None, lexical_rank=None,
        created_at=1_000_000.0 + key * rng.choice([1.0, 10.0, 5000.0]),
        importance=rng.random(),
    )


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("params", [DEFAULT_PARAMS,
                                    FusionParams(recency_weight=0.3, importance_weight=0.5)])
def test_with_successors_equals_a_full_fuse(seed: int, params: FusionParams) -> None:
    rng = random.Random(seed)
    keys = rng.sample(range(1, 400), 120)
    first = [_cand(rng, key) for key in keys]
    ranked = fuse(first, params, now=2_000_000.0)
    present = set(keys)
    following = [cand.key + 1 for cand, _ in ranked[:20] if cand.key + 1 not in present]
    extra = [_cand(rng, key) for key in dict.fromkeys(following)]
    if seed % 3 == 0 and extra:  # a successor with the best bm25 of all moves the scale
        extra[0] = Candidate(extra[0].key, 0.5, 99.0, None, None, extra[0].created_at, 0.5)
    expected = fuse(first + extra, params, now=2_000_000.0)
    got = with_successors(ranked, extra, params, now=2_000_000.0)
    assert [(c.key, s) for c, s in got] == [(c.key, s) for c, s in expected]


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
        first = recall_mod._first_pass(mem._catalog, ns, fts_query("zebra common filler"), 50)
        assert first == '"zebra" OR "common"'  # filler pushed the rows over the budget
        pruned = mem.recall("zebra common filler", k=10, min_score=0)
        monkeypatch.setattr(recall_mod, "_first_pass", lambda _c, _ns, match, _n: match)
        mem._query_cache.clear()
        full = mem.recall("zebra common filler", k=10, min_score=0)
        zebras = {"rare zebra sighting with common filler", "rare zebra sighting"}
        assert zebras <= {h.record.text for h in pruned}
        assert zebras <= {h.record.text for h in full}
        scores = {h.record.id: (h.score, h.lexical) for h in full}
        for hit in pruned:  # every hit found both ways has the same scores
            if hit.record.id in scores:
                assert (hit.score, hit.lexical) == scores[hit.record.id]
