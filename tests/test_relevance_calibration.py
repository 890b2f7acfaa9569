"""The default relevance cutoff, calibrated with the real model on agent-memory cases.

tests/data/relevance_pairs.json holds 50 (prompt, relevant fact) pairs that share
few or no keywords and 45 prompts that no stored fact answers (each with a
distractor fact). Every fact is stored in one namespace, in one batch (so every
fact is "conversational context" of the next: the worst case for the context
signal), and each prompt is recalled through the public API.

Figures (docs/benchmarks.md, "Relevance cutoff calibration"): at
DEFAULT_MIN_SCORE = 0.25, 42/50 relevant facts come back in the top 5 above the
cutoff (46/50 are in the top 5 at all) and 37/45 unrelated prompts get nothing
above it. The asserted floors leave one case of slack for float noise.

These are exact figures: the same facts and prompts give the same hits on every
build and every embedder runtime. A fresh-clone run (main 0f71cc8) measured 0.88 in the top
5: USearch's multithreaded insert had left a stored fact unreachable by search (30
of 300 builds of this store gave 0.90, 5 gave 0.88); the index now inserts on one
thread (walrus_mem/_recall/index.py ``_add``) and
:func:`test_every_build_of_the_store_gives_the_same_hits` holds it. Mixing runtimes
(facts on numpy, prompts on onnxruntime or torch, as ``auto`` can once it switches)
changes no hit here: their vectors differ by at most 2e-7, far under the index's
float16 rounding.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from walrus_mem._recall.ranking import DEFAULT_MIN_SCORE
from walrus_mem.config import AgentConfig, Settings
from walrus_mem.hooks import MemoryHooks
from walrus_mem.memory import Memory

pytestmark = pytest.mark.model

DATA = json.loads((Path(__file__).parent / "data" / "relevance_pairs.json").read_text())
TOP_K = AgentConfig().max_recall_results  # what auto-recall injects at most
NS = "calibration"


@dataclass(frozen=True)
class Figures:
    relevant_in_top_k: float  # the fact is among the top k at all (cutoff 0)
    relevant_kept: float  # ... and scores at least DEFAULT_MIN_SCORE
    relevant_top1_kept: float
    unrelated_dropped: float  # the unrelated prompt's best hit scores below the cutoff
    context_noise: int  # hits above the cutoff carried by context with own cosine < 0.1


@pytest.fixture(scope="module")
def memory(real_embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    facts = [p["fact"] for p in DATA["relevant"] + DATA["unrelated"]]
    random.Random(0).shuffle(facts)
    data_dir = tmp_path_factory.mktemp("calibration")
    with Memory(Settings(data_dir=data_dir), embedder=real_embedder,  # type: ignore[call-arg]
                master_key="00" * 32) as mem:
        result = mem.remember_many(facts, namespace=NS)
        assert result.stored == len(facts)
        yield mem


@pytest.fixture(scope="module")
def figures(memory: Memory) -> Figures:
    kept = top1 = in_top = noise = 0
    for pair in DATA["relevant"]:
        hits = memory.recall(pair["query"], namespace=NS, k=TOP_K, min_score=0)
        texts = [h.text for h in hits]
        if pair["fact"] in texts:
            in_top += 1
            rank = texts.index(pair["fact"])
            kept += hits[rank].score >= DEFAULT_MIN_SCORE
            top1 += rank == 0 and hits[0].score >= DEFAULT_MIN_SCORE
        noise += sum(
            1 for h in hits
            if h.score >= DEFAULT_MIN_SCORE and h.context >= h.score and (h.dense or 0.0) < 0.1
        )
    dropped = 0
    for pair in DATA["unrelated"]:
        best = memory.recall(pair["query"], namespace=NS, k=1, min_score=0)
        dropped += not best or best[0].score < DEFAULT_MIN_SCORE
    n_rel, n_unrel = len(DATA["relevant"]), len(DATA["unrelated"])
    return Figures(in_top / n_rel, kept / n_rel, top1 / n_rel, dropped / n_unrel, noise)


def test_the_labelled_set_is_what_the_docs_describe() -> None:
    assert len(DATA["relevant"]) >= 40 and len(DATA["unrelated"]) >= 40
    facts = [p["fact"] for p in DATA["relevant"] + DATA["unrelated"]]
    assert len(set(facts)) == len(facts)


def test_default_cutoff_keeps_relevant_facts_and_drops_unrelated_hits(figures: Figures) -> None:
    assert figures.relevant_in_top_k >= 0.9  # measured 0.92: ranking, not the cutoff
    assert figures.relevant_kept >= 0.82  # measured 0.84
    assert figures.relevant_top1_kept >= 0.52  # measured 0.56
    assert figures.unrelated_dropped >= 0.8  # measured 0.82 (37/45)


def test_every_build_of_the_store_gives_the_same_hits(real_embedder: Any, tmp_path: Path) -> None:
    """The module's store built 12 times from the same vectors (each text embedded once,
    so only the index build can differ): every prompt gets the same hits and scores. With
    the all-cores insert, about 3 builds in 10 differed."""
    memo: dict[str, Any] = {}

    class Remembered:  # the real model's vectors, each text embedded once
        model_id = real_embedder.model_id
        dim = real_embedder.dim

        def embed(self, texts: list[str]) -> Any:
            todo = [t for t in dict.fromkeys(texts) if t not in memo]
            if todo:
                memo.update(zip(todo, real_embedder.embed(todo), strict=True))
            return np.stack([memo[t] for t in texts])

    def hits(mem: Memory) -> list[list[tuple[str, float]]]:
        return [[(h.text, round(h.score, 9))
                 for h in mem.recall(p["query"], namespace=NS, k=TOP_K, min_score=0)]
                for p in DATA["relevant"] + DATA["unrelated"]]

    facts = [p["fact"] for p in DATA["relevant"] + DATA["unrelated"]]
    random.Random(0).shuffle(facts)
    answers = []
    for build in range(12):
        with Memory(Settings(data_dir=tmp_path / str(build)),  # type: ignore[call-arg]
                    embedder=Remembered(), master_key="00" * 32) as mem:
            mem.remember_many(facts, namespace=NS)
            answers.append(hits(mem))
        assert answers[-1] == answers[0], f"build {build}"


def test_context_lifts_no_unrelated_fact_above_the_cutoff(figures: Figures) -> None:
    assert figures.context_noise == 0


def test_default_cutoff_is_one_value_for_recall_and_hooks() -> None:
    assert AgentConfig().min_relevance == DEFAULT_MIN_SCORE


def test_auto_recall_injects_a_semantic_match_and_not_its_batch_neighbour(
    real_embedder: Any, tmp_path: Path
) -> None:
    # The CLI/demo helper's two findings, through the hooks with default settings.
    facts = [
        "I'm allergic to peanuts",
        "My sister Ana lives in Lisbon and works as a nurse",
        "We deploy the billing service on Fridays only, after the 2pm freeze",
        "The staging database is called orca-staging",
        "I prefer window seats on long flights",
    ]
    with Memory(Settings(data_dir=tmp_path / "d"), embedder=real_embedder,  # type: ignore[call-arg]
                master_key="00" * 32) as mem:
        mem.remember_many(facts, namespace="default")
        hooks = MemoryHooks(mem, AgentConfig())
        try:
            allergy = hooks.before_prompt_build("What snacks should I avoid, given my allergies?")
            assert [m.text for m in allergy.memories][:1] == [facts[0]]
            ana = hooks.before_prompt_build("what does Ana do for a living")
            assert facts[1] in [m.text for m in ana.memories]
            assert facts[2] not in [m.text for m in ana.memories]  # was injected at 0.32
        finally:
            hooks.close()


def test_readme_hook_example_injects_the_allergy(real_embedder: Any, tmp_path: Path) -> None:
    """README's own example: the allergy scores under the cutoff but is a clear winner."""
    with Memory(Settings(data_dir=tmp_path / "d"), embedder=real_embedder,  # type: ignore[call-arg]
                master_key="00" * 32) as mem:
        mem.remember_many(["I'm allergic to peanuts and cashews", "My sister Ana lives in Lisbon",
                           "The staging database is orca-staging"], namespace="researcher")
        hooks = MemoryHooks(mem)
        try:
            ctx = hooks.before_prompt_build("What should I order for lunch today?",
                                            "agent:researcher:1")
            assert [m.text for m in ctx.memories] == ["I'm allergic to peanuts and cashews"]
            for unrelated in ("What is the capital of Australia?",
                              "Explain the CAP theorem in simple terms"):
                assert hooks.before_prompt_build(unrelated, "agent:researcher:1").memories == ()
        finally:
            hooks.close()


def test_query_gate_keeps_unrelated_prompts_out_and_answers_questions(
    real_embedder: Any, tmp_path: Path
) -> None:
    """tests/data/recall_calibration.json through the hooks, defaults (bench/recall_calibration.py).

    Measured on the held-out half: 45/54 questions of both corpora answered and
    3/115 unrelated prompts injecting (before the gate: 48/54 and 32/115). Here the
    new corpus alone, with one case of slack each.
    """
    data = json.loads((Path(__file__).parent / "data" / "recall_calibration.json").read_text())
    facts = [p["fact"] for p in data["relevant"]] + data["extra_facts"]
    random.Random(0).shuffle(facts)
    with Memory(Settings(data_dir=tmp_path / "d"), embedder=real_embedder,  # type: ignore[call-arg]
                master_key="00" * 32) as mem:
        mem.remember_many(facts, namespace="cal")
        hooks = MemoryHooks(mem, AgentConfig())
        ungated = MemoryHooks(mem, AgentConfig(query_gate=False))
        try:
            def injected(h: MemoryHooks, prompt: str) -> list[str]:
                return [m.text for m in h.before_prompt_build(prompt, "agent:cal").memories]

            answered = sum(p["fact"] in injected(hooks, p["query"]) for p in data["relevant"])
            leaking = [q for q in data["unrelated"] if injected(hooks, q)]
            leaking_before = [q for q in data["unrelated"] if injected(ungated, q)]
        finally:
            hooks.close()
            ungated.close()
    assert len(data["relevant"]) >= 50 and len(data["unrelated"]) >= 100
    assert answered >= 57  # measured 58/63
    assert len(leaking) <= 2, leaking  # measured 1/121
    assert len(leaking_before) >= 30  # the per-hit cutoff alone: 36/121
