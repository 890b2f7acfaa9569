"""walrus_mem._recall.ranking: FTS5 query safety and score fusion properties (no model)."""

from __future__ import annotations

import math
import re
import sqlite3
import warnings
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from walrus_mem._recall.ranking import (
    DEFAULT_MIN_SCORE,
    DEFAULT_PARAMS,
    FTS_TOKENIZE,
    Candidate,
    FusionParams,
    Scores,
    context_keys,
    fts_query,
    fuse,
    fuse_arrays,
    fused_order,
    readable,
)
from walrus_mem.errors import ConfigError

NOW = 1_700_000_000.0
DAY = 86400.0
NO_CONTEXT = replace(DEFAULT_PARAMS, context_weight=0.0)


def cand(
    key: int,
    dense: float | None = None,
    lexical: float | None = None,
    *,
    created_at: float = NOW,
    importance: float = 0.5,
) -> Candidate:
    return Candidate(
        key=key,
        dense=dense,
        lexical=lexical,
        dense_rank=None,
        lexical_rank=None,
        created_at=created_at,
        importance=importance,
    )


def order(ranked: list[tuple[Candidate, Scores]]) -> list[int]:
    return [c.key for c, _ in ranked]


def scores_by_key(ranked: list[tuple[Candidate, Scores]]) -> dict[int, Scores]:
    return {c.key: s for c, s in ranked}


def relevance(score: float) -> float:
    """The internal relevance behind a readable score (inverse of ``readable``)."""
    return 1.0 - math.sqrt(1.0 - score)


# --------------------------------------------------------------------------- fts_query

DOCS = [
    "Melanie: I painted a sunrise over the lake last summer.",
    "Caroline: I went to a LGBTQ support group yesterday.",
    "Jon: NEAR the studio, title: opening night AND friends OR family",
    "Gina: café crème, naïve résumé — 東京 2023 _under_score",
]


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:")
    tokenize = FTS_TOKENIZE.replace("'", "''")
    db.execute(f"CREATE VIRTUAL TABLE fts USING fts5(text, tokenize = '{tokenize}')")
    db.executemany("INSERT INTO fts (rowid, text) VALUES (?, ?)", list(enumerate(DOCS)))
    yield db
    db.close()


def search(db: sqlite3.Connection, text: str) -> list[int]:
    match = fts_query(text)
    if match is None:
        return []
    rows = db.execute(
        "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts)", (match,)
    ).fetchall()
    return [int(r[0]) for r in rows]


QUERY_SHAPE = re.compile(r'"\w+"( OR "\w+")*')


# Arbitrary Unicode, and text dense in FTS5 syntax (quotes, operators, column filters, NUL).
FTS_NOISE = st.lists(
    st.sampled_from(['"', "'", "*", "^", ":", "(", ")", "{", "}", "+", "-", ",", "\x00",
                     "NEAR", "NEAR/2", "AND", "OR", "NOT", "text", "rowid", "fts", " ", "é"]),
    max_size=30,
).map("".join)
ANY_TEXT = st.one_of(st.text(), FTS_NOISE, st.lists(st.one_of(st.text(max_size=3), FTS_NOISE),
                                                   max_size=6).map(" ".join))


@given(ANY_TEXT)
@settings(max_examples=500, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fts_query_never_breaks_sqlite(fts: sqlite3.Connection, text: str) -> None:
    match = fts_query(text)
    if match is None:
        return
    assert QUERY_SHAPE.fullmatch(match), match
    fts.execute("SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH ?", (match,)).fetchall()


# Characters with FTS5 meaning: quotes, grouping, column filter, prefix, initial-token, +, -
SYNTAX = st.text(alphabet='"()*:^+-{},. \t\n\'', min_size=1, max_size=4)
WORDS = st.lists(st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), min_size=1, max_size=12)


@given(WORDS, st.data())
def test_syntax_characters_cannot_change_the_query(words: list[str], data: st.DataObject) -> None:
    plain = fts_query(" ".join(words))
    seps = data.draw(st.lists(SYNTAX, min_size=len(words) + 1, max_size=len(words) + 1))
    noisy = seps[0] + "".join(w + s for w, s in zip(words, seps[1:], strict=True))
    assert fts_query(noisy) == plain


@pytest.mark.parametrize(
    "text",
    [
        'text:secret',
        'NEAR(studio night, 2)',
        'studio NEAR night',
        '"opening" AND "night"',
        'opening OR NOT night',
        '^Jon',
        'open*',
        '{text}: studio',
        '- studio + night',
        'a"b"c',
        '"unterminated',
        "\x00studio\x00",
        ")(",
        "*",
    ],
)
def test_operator_text_is_quoted_words(fts: sqlite3.Connection, text: str) -> None:
    match = fts_query(text)
    assert match is None or QUERY_SHAPE.fullmatch(match)
    search(fts, text)  # must not raise


def test_operator_words_are_plain_terms(fts: sqlite3.Connection) -> None:
    # "near" and "title" are matched as words in the document, not used as syntax
    assert fts_query("NEAR title") == '"near" OR "title"'
    assert search(fts, "NEAR title") == [2]


def test_stopwords_and_repeats_dropped() -> None:
    assert fts_query("When did Caroline go to the LGBTQ support group?") == (
        '"caroline" OR "go" OR "lgbtq" OR "support" OR "group"'
    )
    assert fts_query("the THE the caroline Caroline") == '"caroline"'


@pytest.mark.parametrize("text", ["", "   ", "?!", "what is it?", "the and or not", "\x00"])
def test_no_usable_terms_gives_none(text: str) -> None:
    assert fts_query(text) is None


def test_term_count_is_bounded() -> None:
    match = fts_query(" ".join(f"word{i}" for i in range(500)))
    assert match is not None
    assert match.count(" OR ") + 1 == 32


def test_porter_stemming_and_diacritics_match(fts: sqlite3.Connection) -> None:
    assert search(fts, "Who paints sunrises?") == [0]
    assert search(fts, "cafe creme") == [3]  # remove_diacritics 2 folds both sides
    assert search(fts, "東京") == [3]


def test_ranks_more_matching_terms_first(fts: sqlite3.Connection) -> None:
    hits = search(fts, "When did Caroline go to the support group?")
    assert hits[0] == 1


# --------------------------------------------------------------------------- fuse

signal = st.one_of(st.none(), st.floats(-1.0, 1.0))
lexical_signal = st.one_of(st.none(), st.floats(0.0, 40.0))


@st.composite
def candidate_lists(draw: st.DrawFn, min_size: int = 1) -> list[Candidate]:
    n = draw(st.integers(min_size, 12))
    keys = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n, unique=True))
    return [
        cand(
            k,
            draw(signal),
            draw(lexical_signal),
            created_at=NOW - draw(st.floats(0.0, 400 * DAY)),
            importance=draw(st.floats(0.0, 1.0)),
        )
        for k in keys
    ]


any_params = st.builds(
    FusionParams,
    dense_weight=st.floats(0.0, 1.0),
    lexical_floor=st.floats(0.0, 20.0),
    lexical_gate=st.floats(0.0, 1.0),
    context_weight=st.floats(0.0, 1.0),
    context_gate=st.floats(0.0, 1.0),
    context_window_s=st.floats(0.0, 1e6),
    recency_weight=st.floats(0.0, 1.0),
    recency_half_life_days=st.floats(0.01, 1000.0),
    importance_weight=st.floats(0.0, 1.0),
    context_depth=st.integers(0, 3),
)


@given(candidate_lists(), any_params)
def test_scores_in_unit_range_and_sorted(cands: list[Candidate], params: FusionParams) -> None:
    ranked = fuse(cands, params, now=NOW)
    assert sorted(order(ranked)) == sorted(c.key for c in cands)
    scores = [s.score for _, s in ranked]
    assert all(0.0 <= x <= 1.0 for x in scores)
    assert scores == sorted(scores, reverse=True)
    for c, s in ranked:
        assert s.dense == c.dense
        assert (s.lexical is None) == (c.lexical is None)
        assert s.lexical is None or 0.0 <= s.lexical <= 1.0
        assert 0.0 <= s.recency <= 1.0 and 0.0 <= s.context <= 1.0


def _loop_fuse(cands: list[Candidate], p: FusionParams, now: float,
               prior: list[float] | None = None) -> list[tuple[int, float]]:
    """The module docstring's formula, one candidate at a time in plain Python (the oracle)."""

    def clip(x: float) -> float:
        return x if 0.0 <= x <= 1.0 else (1.0 if x > 1.0 else 0.0)

    best = max((c.lexical for c in cands if c.lexical is not None and c.lexical > 0), default=0.0)
    scale = max(best, p.lexical_floor, 1e-12)
    cosine = {c.key: clip(c.dense or 0.0) for c in cands}
    own = {}
    for c in cands:
        lex = 0.0 if c.lexical is None else clip(c.lexical / scale)
        gate = 1.0 if p.lexical_gate == 0 else min(cosine[c.key] / p.lexical_gate, 1.0)
        own[c.key] = p.dense_weight * cosine[c.key] + (1 - p.dense_weight) * lex * gate
    by_key = {c.key: c for c in cands}
    out = []
    for pos, c in enumerate(cands):
        context = 0.0
        for back in range(1, p.context_depth + 1):
            prev = by_key.get(c.key - back)
            close = prev is not None and abs(c.created_at - prev.created_at) <= p.context_window_s
            if p.context_weight > 0 and prev is not None and close:
                gate = 1.0 if p.context_gate == 0 else min(cosine[c.key] / p.context_gate, 1.0)
                context = max(context, p.context_weight * own[prev.key] * gate)
        score = max(own[c.key], context)
        recency = math.exp(-math.log(2) * max(now - c.created_at, 0.0)
                           / (p.recency_half_life_days * DAY))
        score *= 1 - p.recency_weight * (1 - recency)
        score *= 1 - p.importance_weight * (1 - clip(c.importance))
        if prior is not None:
            score *= clip(prior[pos])
        out.append((c.key, readable(score)))
    return sorted(out, key=lambda pair: (-pair[1], pair[0]))


@st.composite
def conversation_lists(draw: st.DrawFn) -> list[Candidate]:
    """Mostly consecutive keys written seconds apart: context applies often."""
    keys = draw(st.lists(st.integers(0, 16), min_size=1, max_size=14, unique=True))
    return [
        cand(k, draw(signal), draw(lexical_signal),
             created_at=NOW - k * draw(st.sampled_from([1.0, 60.0, 5000.0])) - draw(
                 st.floats(0.0, 400 * DAY)) * draw(st.sampled_from([0.0, 1.0])),
             importance=draw(st.floats(0.0, 1.0)))
        for k in keys
    ]


@settings(max_examples=300)
@given(st.one_of(candidate_lists(), conversation_lists()), any_params, st.data())
def test_fuse_matches_the_formula_computed_one_candidate_at_a_time(
    cands: list[Candidate], params: FusionParams, data: st.DataObject
) -> None:
    """fuse (numpy over arrays) agrees with a per-candidate loop of the documented formula."""
    prior = data.draw(st.none() | st.lists(st.floats(0.0, 1.0), min_size=len(cands),
                                           max_size=len(cands)))
    got = [(c.key, s.score) for c, s in fuse(cands, params, now=NOW, prior=prior)]
    want = _loop_fuse(cands, params, NOW, prior)
    assert [score for _, score in got] == pytest.approx([score for _, score in want], abs=1e-9)
    # same order, except among scores equal up to rounding
    for (key_got, score_got), (key_want, _) in zip(got, want, strict=True):
        if key_got != key_want:
            assert score_got == pytest.approx(dict(want)[key_got], abs=1e-9)


@given(candidate_lists(), st.floats(0.0, 1.0), st.floats(0.0, 40.0))
def test_better_on_both_signals_ranks_first(
    others: list[Candidate], margin_dense: float, margin_lex: float
) -> None:
    best_dense = max((c.dense or 0.0 for c in others), default=0.0)
    best_lex = max((c.lexical or 0.0 for c in others), default=0.0)
    top = cand(
        100,
        min(max(best_dense, 0.0) + 0.01 + margin_dense, 1.0),
        best_lex + 0.01 + margin_lex,
    )
    others = [replace(c, created_at=NOW) for c in others]
    ranked = fuse([*others, top], now=NOW)  # default params, context on
    assert order(ranked)[0] == 100


@given(candidate_lists(min_size=2), st.data())
def test_raising_a_signal_never_lowers_rank(cands: list[Candidate], data: st.DataObject) -> None:
    cands = [replace(c, created_at=NOW) for c in cands]
    i = data.draw(st.integers(0, len(cands) - 1))
    target = cands[i]
    before = order(fuse(cands, now=NOW)).index(target.key)
    if data.draw(st.booleans()):
        raised = replace(target, dense=min((target.dense or 0.0) + data.draw(st.floats(0, 1)), 1.0))
    else:
        raised = replace(target, lexical=(target.lexical or 0.0) + data.draw(st.floats(0, 20)))
    after = order(fuse([*cands[:i], raised, *cands[i + 1 :]], now=NOW)).index(target.key)
    assert after <= before


def test_none_components_count_as_no_evidence() -> None:
    cands = [cand(1, None, None), cand(2, 0.5, None), cand(3, None, 15.0), cand(4, 0.5, 15.0)]
    ranked = fuse(cands, NO_CONTEXT, now=NOW)
    s = scores_by_key(ranked)
    assert order(ranked) == [4, 2, 1, 3]
    assert s[1].score == 0.0 and s[1].dense is None and s[1].lexical is None
    assert s[2].score == pytest.approx(readable(0.25)) and s[2].lexical is None
    # a missing cosine is no evidence of meaning, so the keyword gate closes ...
    assert s[3].score == 0.0 and s[3].lexical == pytest.approx(1.0)
    assert s[4].score == pytest.approx(readable(0.75))
    # ... unless the gate is off
    s = scores_by_key(fuse(cands, replace(NO_CONTEXT, lexical_gate=0.0), now=NOW))
    assert s[3].score == pytest.approx(readable(0.5))


def test_dense_only_hit_scores_about_its_cosine() -> None:
    (_, s), = fuse([cand(1, 0.55, None)], now=NOW)
    assert s.score == pytest.approx(readable(0.275)) == pytest.approx(0.474, abs=1e-3)


def test_readable_scale_is_monotone_and_keeps_the_ends() -> None:
    xs = [i / 1000 for i in range(1001)]
    ys = [readable(x) for x in xs]
    assert ys[0] == 0.0 and ys[-1] == 1.0
    assert all(a < b for a, b in zip(ys, ys[1:], strict=False))  # strictly: no ranking changes
    assert readable(0.05) == pytest.approx(0.0975)  # unrelated stays low (cosine 0.1)
    assert readable(-1.0) == 0.0 and readable(2.0) == 1.0 and readable(float("nan")) == 0.0


def test_lexical_is_relative_to_best_match_with_floor() -> None:
    s = scores_by_key(fuse([cand(1, 0.5, 16.0), cand(2, 0.5, 4.0)], NO_CONTEXT, now=NOW))
    assert s[1].lexical == pytest.approx(1.0) and s[2].lexical == pytest.approx(0.25)
    # a weak best match (below the floor) is not promoted to a full keyword match
    weak = scores_by_key(fuse([cand(1, 0.5, 1e-6), cand(2, 0.5, 2.0)], NO_CONTEXT, now=NOW))
    assert weak[2].lexical == pytest.approx(2.0 / DEFAULT_PARAMS.lexical_floor)
    assert weak[1].lexical == pytest.approx(1e-6 / DEFAULT_PARAMS.lexical_floor)


def test_keyword_gate_needs_some_semantic_relation() -> None:
    # "What did the earnings report say?" vs "Anything you want to say?": keyword, no meaning
    s = scores_by_key(fuse([cand(1, 0.02, 15.0), cand(2, 0.3, 15.0)], NO_CONTEXT, now=NOW))
    assert s[1].score == pytest.approx(readable(0.5 * 0.02 + 0.5 * 0.1))
    assert s[2].score == pytest.approx(readable(0.5 * 0.3 + 0.5))
    ungated = replace(NO_CONTEXT, lexical_gate=0.0)
    assert scores_by_key(fuse([cand(1, 0.02, 15.0)], ungated, now=NOW))[1].score == pytest.approx(
        readable(0.51)
    )


def test_negative_and_nan_signals_are_clamped() -> None:
    ranked = fuse([cand(1, -0.9, float("nan")), cand(2, float("nan"), -3.0)], now=NOW)
    assert all(s.score == 0.0 for _, s in ranked)
    assert order(ranked) == [1, 2]  # ties broken by key


def test_empty_candidates() -> None:
    assert fuse([], now=NOW) == []
    assert context_keys([]) == []


# --------------------------------------------------------------------------- context


def test_successor_inherits_part_of_its_predecessors_relevance() -> None:
    question = cand(10, 0.7, 9.0)  # "Caroline: What concert was it?"
    answer = cand(11, 0.4, None)  # "Melanie: It was Matt Patterson!" (the names relate them)
    unrelated = cand(30, 0.5, 2.0)
    ranked = fuse([unrelated, answer, question], now=NOW)
    assert order(ranked) == [10, 11, 30]
    s = scores_by_key(ranked)
    assert relevance(s[11].context) == pytest.approx(0.8 * relevance(s[10].score))
    assert s[11].score == pytest.approx(s[11].context)
    assert s[11].score < s[10].score  # never above its source


def test_context_is_gated_by_the_memorys_own_cosine() -> None:
    # "My sister Ana ... works as a nurse", then "We deploy the billing service on Fridays"
    # (written in the same batch): the second must not ride on the first.
    source = cand(10, 0.6, 9.0)
    unrelated = cand(11, 0.005, None)
    loosely = cand(21, 0.2, None)
    related = cand(31, 0.45, None)
    sources = [source, replace(source, key=20), replace(source, key=30)]
    s = scores_by_key(fuse([*sources, unrelated, loosely, related], now=NOW))
    full = 0.8 * relevance(s[10].score)
    gate = DEFAULT_PARAMS.context_gate
    assert relevance(s[11].context) == pytest.approx(full * 0.005 / gate)
    assert s[11].score < 0.02 < DEFAULT_MIN_SCORE  # was 0.8 x the source's score, ungated
    assert relevance(s[21].context) == pytest.approx(full * 0.2 / gate)  # in proportion
    assert relevance(s[31].context) == pytest.approx(full)  # from the gate up: in full
    ungated = scores_by_key(fuse([source, unrelated], replace(DEFAULT_PARAMS, context_gate=0.0),
                                 now=NOW))
    assert relevance(ungated[11].score) == pytest.approx(full)


def test_context_only_from_the_previous_key_written_close_in_time() -> None:
    source = cand(10, 0.8, 9.0)
    before = cand(9, 0.0, None)
    later = cand(11, 0.5, None, created_at=NOW + 2 * DAY)
    s = scores_by_key(fuse([source, before, later], now=NOW + 3 * DAY))
    assert s[9].context == 0.0 and s[9].score == 0.0  # context flows forward only
    assert s[11].context == 0.0  # written two days later: not the same conversation
    assert s[11].score == pytest.approx(readable(0.25))  # its own relevance only
    s = scores_by_key(fuse([source, replace(later, created_at=NOW + 60)], now=NOW))
    assert s[11].context > 0.0


def test_context_off() -> None:
    s = scores_by_key(fuse([cand(10, 0.8, 9.0), cand(11, 0.0, None)], NO_CONTEXT, now=NOW))
    assert s[11].score == 0.0 and s[11].context == 0.0
    assert context_keys(fuse([cand(10, 0.8, 9.0)], now=NOW), NO_CONTEXT) == []


def test_context_keys_asks_for_missing_successors_of_top_hits() -> None:
    cands = [cand(k, d, None) for k, d in [(5, 0.9), (6, 0.1), (20, 0.8), (40, 0.2), (41, 0.1)]]
    ranked = fuse(cands, now=NOW)
    assert order(ranked) == [5, 20, 40, 6, 41]
    one_back = replace(DEFAULT_PARAMS, context_depth=1)
    assert context_keys(ranked, one_back) == [21, 7, 42]  # 6 and 41 are present already
    assert context_keys(ranked, replace(one_back, context_expand=2)) == [21]
    # two back (the default): the two memories after each top hit
    assert context_keys(ranked) == [7, 21, 22, 42, 8, 43]
    assert context_keys(ranked, replace(DEFAULT_PARAMS, context_depth=0)) == []


def test_a_memory_inherits_from_the_best_of_the_previous_two() -> None:
    question = cand(10, 0.9, 12.0)
    aside = cand(11, 0.1, None)  # the other speaker's turn in between
    answer = cand(12, 0.45, None)  # own cosine above the context gate
    s = scores_by_key(fuse([question, aside, answer], now=NOW))
    own = readable(0.5 * 0.45)
    assert s[12].score > own
    assert s[12].context == pytest.approx(readable(0.8 * (0.5 * 0.9 + 0.5 * 1.0)))
    one_back = scores_by_key(fuse([question, aside, answer],
                                  replace(DEFAULT_PARAMS, context_depth=1), now=NOW))
    assert one_back[12].score == pytest.approx(own)


def test_prior_scales_relevance_and_can_only_lower_it() -> None:
    cands = [cand(1, 0.6, 10.0), cand(2, 0.5, 12.0)]
    plain = scores_by_key(fuse(cands, NO_CONTEXT, now=NOW))
    lowered = scores_by_key(fuse(cands, NO_CONTEXT, now=NOW, prior=[1.0, 0.5]))
    assert lowered[1].score == plain[1].score
    assert lowered[2].score < plain[2].score
    raised = scores_by_key(fuse(cands, NO_CONTEXT, now=NOW, prior=[3.0, 1.0]))
    assert raised == plain  # clamped to 1


# --------------------------------------------------------------------------- recency / importance


def test_recency_and_importance_are_off_by_default() -> None:
    old = cand(1, 0.6, 5.0, created_at=NOW - 365 * DAY, importance=0.0)
    new = cand(2, 0.6, 5.0, created_at=NOW, importance=1.0)
    s = scores_by_key(fuse([old, new], NO_CONTEXT, now=NOW))
    assert s[1].score == s[2].score
    assert s[1].recency < 0.01 and s[2].recency == 1.0


def test_recency_weight_prefers_newer_equal_memories_and_halves_on_schedule() -> None:
    params = replace(NO_CONTEXT, recency_weight=1.0, recency_half_life_days=30.0)
    old = cand(1, 0.6, 5.0, created_at=NOW - 30 * DAY)
    new = cand(2, 0.6, 5.0, created_at=NOW - DAY)
    ranked = fuse([old, new], params, now=NOW)
    assert order(ranked) == [2, 1]
    s = scores_by_key(ranked)
    plain = scores_by_key(fuse([old, new], NO_CONTEXT, now=NOW))
    assert s[1].recency == pytest.approx(0.5)
    assert relevance(s[1].score) == pytest.approx(0.5 * relevance(plain[1].score))
    half = scores_by_key(fuse([old], replace(params, recency_weight=0.5), now=NOW))
    assert relevance(half[1].score) == pytest.approx(0.75 * relevance(plain[1].score))


def test_small_recency_weight_does_not_override_relevance() -> None:
    params = replace(NO_CONTEXT, recency_weight=0.2)
    relevant_old = cand(1, 0.7, 9.0, created_at=NOW - 400 * DAY)
    vague_new = cand(2, 0.3, 1.0, created_at=NOW)
    assert order(fuse([relevant_old, vague_new], params, now=NOW)) == [1, 2]


def test_recency_never_lifts_an_irrelevant_memory() -> None:
    params = replace(NO_CONTEXT, recency_weight=1.0, importance_weight=1.0)
    s = scores_by_key(fuse([cand(1, None, None, importance=1.0)], params, now=NOW))
    assert s[1].score == 0.0


def test_importance_weight() -> None:
    params = replace(NO_CONTEXT, importance_weight=0.5)
    low = cand(1, 0.6, 5.0, importance=0.0)
    high = cand(2, 0.6, 5.0, importance=1.0)
    ranked = fuse([low, high], params, now=NOW)
    assert order(ranked) == [2, 1]
    s = scores_by_key(ranked)
    assert relevance(s[1].score) == pytest.approx(0.5 * relevance(s[2].score))


# --------------------------------------------------------------------------- min score, params


def test_default_min_score_separates_supported_from_unsupported_hits() -> None:
    ranked = fuse(
        [
            cand(1, 0.12, None),  # unrelated chatter
            cand(2, 0.05, 9.0),  # shares a word, means something else
            cand(3, 0.45, None),  # related by meaning
            cand(4, 0.3, 9.0),  # keyword match in a related text
            cand(5, 0.22, None),  # as close as MiniLM puts unrelated facts
            cand(6, 0.3, None),  # loosely related by meaning only
        ],
        NO_CONTEXT,
        now=NOW,
    )
    kept = {c.key for c, s in ranked if s.score >= DEFAULT_MIN_SCORE}
    assert kept == {3, 4, 6}
    assert 0.0 < DEFAULT_MIN_SCORE < 0.5


@pytest.mark.parametrize(
    "field, value",
    [
        ("dense_weight", 1.5),
        ("dense_weight", float("nan")),
        ("context_weight", -0.1),
        ("recency_weight", 2.0),
        ("importance_weight", -1.0),
        ("lexical_floor", -1.0),
        ("lexical_gate", -0.5),
        ("context_gate", -0.1),
        ("context_window_s", float("nan")),
        ("recency_half_life_days", 0.0),
        ("context_expand", -1),
        ("context_depth", -1),
        ("context_depth", 17),
        ("subject_weight", 1.5),
        ("time_weight", -0.1),
        ("when_weight", float("nan")),
    ],
)
def test_bad_params_raise_config_error(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field):
        replace(DEFAULT_PARAMS, **{field: value})  # type: ignore[arg-type]


def test_defaults_are_documented_choices() -> None:
    assert DEFAULT_PARAMS == FusionParams()
    assert DEFAULT_PARAMS.recency_weight == 0.0 and DEFAULT_PARAMS.importance_weight == 0.0
    assert "porter" in FTS_TOKENIZE


def _plain_fuse(keys, dense, lexical, created_at, importance, params, *, now, prior=None):
    """fuse_arrays as first written: one numpy line per step of the formula (the
    rewrite for fewer numpy calls must give the same floats)."""
    def _clip(x):
        return np.fmin(np.fmax(x, 0.0), 1.0)

    _LN2 = math.log(2.0)
    has_lexical = ~np.isnan(lexical)
    positive = lexical[lexical > 0.0]  # NaN compares False
    best_lexical = float(positive.max()) if positive.size else 0.0
    scale = max(best_lexical, params.lexical_floor, 1e-12)
    lex = np.where(has_lexical, _clip(lexical / scale), np.nan)
    # a missing cosine counts as 0 (no evidence of meaning), which also gates keywords
    cosine = _clip(dense)
    w_dense = params.dense_weight
    w_lex = 1.0 - w_dense
    if params.lexical_gate == 0.0:
        own = w_dense * cosine + w_lex * np.where(has_lexical, lex, 0.0)
    else:
        gate = np.minimum(cosine * (1.0 / params.lexical_gate), 1.0)
        own = w_dense * cosine + w_lex * np.where(has_lexical, lex, 0.0) * gate

    context = np.zeros(len(keys))
    w_ctx = params.context_weight
    if w_ctx > 0.0 and len(keys) > 1 and params.context_depth > 0:
        # the best of the previous memories (key - 1 ... key - depth) among the
        # candidates that were written close in time to this one
        sorter = np.argsort(keys, kind="stable")
        ordered = keys[sorter]
        best_prev = np.zeros(len(keys))
        for back in range(1, params.context_depth + 1):
            at = np.minimum(np.searchsorted(ordered, keys - back), len(keys) - 1)
            prev = sorter[at]
            close = (ordered[at] == keys - back) & (
                np.abs(created_at - created_at[prev]) <= params.context_window_s
            )
            best_prev = np.where(close, np.fmax(best_prev, own[prev]), best_prev)
        if (best_prev > 0.0).any():
            # gated by this memory's own cosine, like keywords: an unrelated fact
            # written right after a relevant one inherits (almost) nothing
            inherited = w_ctx * best_prev
            if params.context_gate != 0.0:
                inherited = inherited * np.minimum(cosine * (1.0 / params.context_gate), 1.0)
            context = inherited
    relevance = np.where(own >= context, own, context)

    age = now - created_at
    age = np.where(age > 0.0, age, 0.0)  # future timestamps and NaN count as brand new
    recency = np.exp(-(_LN2 / (params.recency_half_life_days * 86400.0)) * age)
    importance = _clip(importance)
    score = relevance
    if params.recency_weight:
        score = score * (1.0 - params.recency_weight * (1.0 - recency))
    if params.importance_weight:
        score = score * (1.0 - params.importance_weight * (1.0 - importance))
    if prior is not None:
        score = score * _clip(prior)
    score = _clip(score)
    score = score * (2.0 - score)  # readable()
    context = _clip(context)
    context = context * (2.0 - context)
    order = np.lexsort((keys, -score))
    return order, score, lex, context, recency, importance


@st.composite
def candidate_arrays(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    cands = draw(st.one_of(candidate_lists(), conversation_lists()))
    keys = np.array([c.key for c in cands], dtype=np.int64)
    dense = np.array([math.nan if c.dense is None else c.dense for c in cands])
    lexical = np.array([math.nan if c.lexical is None else c.lexical for c in cands])
    created = np.array([c.created_at for c in cands])
    importance = np.array([c.importance for c in cands])
    return keys, dense, lexical, created, importance


@settings(max_examples=300)
@given(candidate_arrays(), any_params | st.just(DEFAULT_PARAMS), st.data())
def test_fuse_arrays_gives_the_plain_formulas_floats_and_fused_order_its_order(
    arrays: tuple[np.ndarray, ...], params: FusionParams, data: st.DataObject
) -> None:
    """Bit for bit: the rewritten fusion, its order-only variant, the plain numpy one."""
    prior = data.draw(st.none() | st.lists(st.floats(0.0, 1.0), min_size=len(arrays[0]),
                                           max_size=len(arrays[0])).map(np.array))
    with np.errstate(all="ignore"):
        want = _plain_fuse(*arrays, params, now=NOW, prior=prior)
    got = fuse_arrays(*arrays, params, now=NOW, prior=prior)
    order = fused_order(*arrays, params, now=NOW, prior=prior)
    assert got.order.tolist() == want[0].tolist() == order.tolist()
    for mine, plain in zip((got.score, got.lexical, got.context, got.recency, got.importance),
                           want[1:], strict=True):
        np.testing.assert_array_equal(mine, plain)  # NaN where NaN, else equal floats


def test_fusion_with_a_subnormal_gate_stays_in_range_without_warnings() -> None:
    params = FusionParams(lexical_gate=5e-324, context_gate=5e-324)
    keys = np.array([1, 2, 3], dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = fuse_arrays(keys, np.array([0.0, 0.5, math.nan]), np.array([3.0, math.nan, 1.0]),
                          np.full(3, NOW), np.full(3, 0.5), params, now=NOW)
        order = fused_order(keys, np.array([0.0, 0.5, math.nan]),
                            np.array([3.0, math.nan, 1.0]), np.full(3, NOW), np.full(3, 0.5),
                            params, now=NOW)
    assert got.order.tolist() == order.tolist()
    assert ((got.score >= 0.0) & (got.score <= 1.0)).all()
