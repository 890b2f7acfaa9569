"""The query-level relevance gate of auto-recall (walrus_mem._recall.relevance_gate).

The gate's weights are calibrated for the real model (tests/test_relevance_calibration.py,
bench/recall_calibration.py); here its parts and its wiring, with the fake embedder and
weights set for the test.
"""

from __future__ import annotations

import pytest

from tests.helpers_agents import make_memory
from walrus_mem._recall import relevance_gate
from walrus_mem._recall.embeddings import SentenceTransformerEmbedder
from walrus_mem._recall.relevance_gate import (
    GATES,
    GateParams,
    content_overlap,
    content_words,
    personal_cue,
    query_verdict,
)
from walrus_mem._safety import prompt_screen
from walrus_mem.config import AgentConfig
from walrus_mem.hooks import MemoryHooks


@pytest.fixture
def memory(tmp_path, master_hex):
    mem = make_memory(tmp_path, master_hex)
    yield mem
    mem.close()


def test_calibrations_are_keyed_by_the_default_embedders_model_id():
    # The shipped embedder names itself "sentence-transformers/all-MiniLM-L6-v2";
    # calibrations keyed by the short config name were silently never used.
    model_id = SentenceTransformerEmbedder("all-MiniLM-L6-v2").model_id  # lazy: no model load
    assert model_id in GATES
    assert model_id in prompt_screen.SEMANTIC_THRESHOLDS


def test_content_words_drop_stopwords_and_fold_simple_endings():
    assert content_words("What's the name of our staging clusters?") == {"name", "stag",
                                                                          "cluster"}
    assert content_overlap("Which football club?", ["Tomás has football practice",
                                                    "I'm a lifelong Benfica supporter"]) == 1
    assert content_overlap("Why is the sky blue?", ["I prefer dark mode"]) == 0


@pytest.mark.parametrize(("prompt", "personal"), [
    ("What should I order for lunch today?", True),
    ("Help me plan meals for the week", True),
    ("What's our sprint length?", True),
    ("What do I usually eat for breakfast?", True),
    ("How do I reverse a list in Python?", False),  # a generic how-to
    ("How do I reset my router?", True),  # ... unless it names something of theirs
    ("What is the capital of Canada?", False),
    ("Write a poem about the sea.", False),
])
def test_personal_cue(prompt, personal):
    assert personal_cue(prompt) is personal


def test_verdict_combines_the_signals():
    params = GateParams(dense=2.0, overlap=1.0, personal=3.0, intent=2.0, bias=-3.0,
                        threshold=0.5)
    hits = [("I'm allergic to peanuts", 0.3), ("My sister lives in Lisbon", 0.1)]
    yes = query_verdict(params, "What should I order for lunch?", 0.1, hits)
    no = query_verdict(params, "What is the capital of Canada?", -0.2, hits)
    assert yes.passed and yes.personal and yes.dense == pytest.approx(0.3)
    assert not no.passed and no.probability < 0.5
    assert not query_verdict(params, "What should I order for lunch?", 0.1, []).passed


def test_hooks_inject_nothing_for_a_prompt_the_gate_rejects(memory, monkeypatch):
    memory.remember("User likes hiking in the Alps every summer.", namespace="default")
    # weights for the fake embedder: only the personal cue decides
    monkeypatch.setitem(GATES, memory.embedder.model_id,
                        GateParams(dense=0.0, overlap=0.0, personal=10.0, intent=0.0, bias=-5.0,
                                   threshold=0.5))
    monkeypatch.setattr(relevance_gate.IntentBank, "intent", lambda self, vector: 0.0)
    # the fake embedder's cosines are not on the real scale: no strong-hit override here
    gated = MemoryHooks(memory, AgentConfig(min_relevance=0.0, strong_relevance=1.0))
    ungated = MemoryHooks(memory, AgentConfig(min_relevance=0.0, query_gate=False))
    try:
        general = "Hiking in the Alps: which summer is best?"
        ctx = gated.before_prompt_build(general)
        assert ctx.memories == () and ctx.prepend_context == ""
        assert ctx.trace and {t.reason for t in ctx.trace} == {"below_query_relevance"}
        assert ungated.before_prompt_build(general).memories  # the per-hit cutoff alone lets it in
        mine = gated.before_prompt_build("Do I like hiking in the Alps in summer?")
        assert [m.text for m in mine.memories] == ["User likes hiking in the Alps every summer."]
    finally:
        gated.close()
        ungated.close()


def test_models_without_weights_skip_the_gate(memory):
    assert memory.embedder.model_id not in GATES
    memory.remember("User likes hiking in the Alps every summer.", namespace="default")
    hooks = MemoryHooks(memory, AgentConfig(min_relevance=0.0))
    try:
        ctx = hooks.before_prompt_build("Hiking in the Alps: which summer is best?")
        assert ctx.memories
    finally:
        hooks.close()


def _gate_says_no(memory, monkeypatch):
    monkeypatch.setitem(GATES, memory.embedder.model_id,
                        GateParams(dense=0.0, overlap=0.0, personal=0.0, intent=0.0, bias=-5.0,
                                   threshold=0.5))
    monkeypatch.setattr(relevance_gate.IntentBank, "intent", lambda self, vector: 0.0)


def test_a_strong_hit_is_never_dropped_by_the_gate_alone(memory, monkeypatch):
    fact = "We decided to ship the v2 API on March 3."
    memory.remember_many([fact, "User likes hiking in the Alps every summer."],
                         namespace="default")
    _gate_says_no(memory, monkeypatch)  # the gate rejects every prompt
    prompt = "We decided to ship the v2 API on March 3?"  # the fake embedder: same words
    top = memory.recall(prompt, namespace="default", k=2, min_score=0)
    assert top[0].text == fact and (top[1].dense or 0.0) < (top[0].dense or 0.0)
    strong = min(0.99, float(top[0].dense or 0.0))  # the cosine, not the fused score
    hooks = MemoryHooks(memory, AgentConfig(min_relevance=0.0, strong_relevance=strong))
    off = MemoryHooks(memory, AgentConfig(min_relevance=0.0, strong_relevance=1.0))
    try:
        ctx = hooks.before_prompt_build(prompt)
        assert [m.text for m in ctx.memories] == [fact]  # only the strong hit gets through
        assert {t.reason for t in ctx.trace if not t.included} == {"below_query_relevance"}
        assert off.before_prompt_build(prompt).memories == ()  # override off: the gate decides
    finally:
        hooks.close()
        off.close()


def test_the_gate_threshold_is_a_setting(memory, monkeypatch):
    memory.remember("User likes hiking in the Alps every summer.", namespace="default")
    _gate_says_no(memory, monkeypatch)  # probability 1/(1+e^5) = 0.0067
    prompt = "Do I like hiking in the Alps in summer?"
    hooks = MemoryHooks(memory, AgentConfig(min_relevance=0.0, strong_relevance=1.0,
                                            query_gate_threshold=0.005))
    strict = MemoryHooks(memory, AgentConfig(min_relevance=0.0, strong_relevance=1.0))
    try:
        assert hooks.before_prompt_build(prompt).memories
        assert strict.before_prompt_build(prompt).memories == ()
    finally:
        hooks.close()
        strict.close()


def test_clear_winner_floor_and_ratio_are_settings(memory):
    memory.remember_many(["User likes hiking in the Alps every summer.",
                          "The staging database is orca-staging."], namespace="default")
    prompt = "Which summer hike in the Alps?"
    scores = [float(h.score) for h in memory.recall(prompt, namespace="default", k=2,
                                                    min_score=0)]
    assert scores[0] > scores[1]
    above = min(0.99, scores[0] + 0.01)  # min_relevance over the top hit: only the rule injects
    ratio = scores[0] / max(scores[1], 1e-9)
    lets_in = AgentConfig(min_relevance=above, clear_winner_floor=0.0,
                          clear_winner_ratio=max(1.0, ratio * 0.9))
    too_far = AgentConfig(min_relevance=above, clear_winner_floor=0.0,
                          clear_winner_ratio=ratio * 1.1)
    too_low = AgentConfig(min_relevance=above, clear_winner_floor=above,
                          clear_winner_ratio=1.0)
    for options, injected in ((lets_in, True), (too_far, False), (too_low, False)):
        hooks = MemoryHooks(memory, options)
        try:
            assert bool(hooks.before_prompt_build(prompt).memories) is injected, options
        finally:
            hooks.close()
