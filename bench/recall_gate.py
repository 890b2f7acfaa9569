"""Auto-recall's gate, measured on an agent-facing set (issue 26, item 3).

    python bench/recall_gate.py [--data ../shared/data/locomo-dev.json]

Answerable prompts: LoCoMo dev questions (categories 1-4, with evidence turns);
each conversation's turns are stored as memories (one per distinct turn text,
bench/locomo.py's documents) and a question counts as answered when one of its
evidence turns is among the memories ``MemoryHooks.before_prompt_build``
injects. Unanswerable prompts: tests/data/recall_gate_unanswerable.json (100
prompts no memory answers: small talk, unrelated tasks, world facts, maths,
writing, in 19 languages), each asked against every conversation of its half;
it counts against us when anything is injected.

Halves, fixed before measuring: questions by conversation (dev: conv-26 and
conv-30; held-out: conv-41 and conv-42), unanswerable prompts by a hash of their
text. Every prompt goes through the hooks with the real model (all-MiniLM-L6-v2,
loaded once), default options except the ones compared: the gate off, the gate
alone (``strong_relevance = 1.0``, the behaviour before) and the gate with the
strong-hit override (a hit whose cosine to the prompt reaches ``strong_relevance``
passes a rejecting gate) at each value of a grid.

The override's default is chosen on dev only: the lowest value that lets no
more dev unanswerable prompts through than the gate alone. Held-out figures are
reported for the gate off, the gate alone and the chosen value.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import locomo  # noqa: E402
from walrus_mem._recall.embeddings import make_embedder  # noqa: E402
from walrus_mem._recall.ranking import STRONG_HIT_COSINE  # noqa: E402
from walrus_mem.config import AgentConfig, Settings  # noqa: E402
from walrus_mem.hooks import MemoryHooks  # noqa: E402
from walrus_mem.memory import Memory  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
UNANSWERABLE = ROOT / "tests" / "data" / "recall_gate_unanswerable.json"
HALVES: dict[str, tuple[str, ...]] = {"dev": ("conv-26", "conv-30"),
                                      "held-out": ("conv-41", "conv-42")}
GRID = (0.45, 0.50, 0.55, 0.60, 0.65, 0.70)  # cosine of a hit to the prompt


def prompt_half(text: str) -> str:
    return "held-out" if hashlib.blake2b(text.encode(), digest_size=2).digest()[0] % 2 \
        else "dev"


def configs(half: str, chosen: float | None) -> dict[str, AgentConfig]:
    out = {"gate off": AgentConfig(query_gate=False),
           "gate alone": AgentConfig(strong_relevance=1.0)}
    values = GRID if half == "dev" else sorted({STRONG_HIT_COSINE, chosen or STRONG_HIT_COSINE})
    out.update({f"gate + strong {v:.2f}": AgentConfig(strong_relevance=v) for v in values})
    return out


def injected_ids(hooks: MemoryHooks, prompt: str, ns: str) -> set[str]:
    ctx = hooks.before_prompt_build(prompt, f"agent:{ns}")
    return {i for m in ctx.memories for i in locomo.hit_dia_ids(m.record.metadata)}


def measure(mem: Memory, half: str, convs: list[locomo.Conversation],
            unanswerable: list[str], chosen: float | None) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for name, options in configs(half, chosen).items():
        hooks = MemoryHooks(mem, options)
        answered = asked = junk = pairs = 0
        try:
            for conv in convs:
                for q in conv.questions:
                    if q.category not in (1, 2, 3, 4) or not q.evidence:
                        continue
                    asked += 1
                    answered += bool(injected_ids(hooks, q.text, conv.sample_id)
                                     & set(q.evidence))
                for prompt in unanswerable:
                    pairs += 1
                    junk += bool(injected_ids(hooks, prompt, conv.sample_id))
        finally:
            hooks.close()
        table[name] = {"answered": answered, "asked": asked, "junk": junk, "pairs": pairs}
        print(f"{half:8s} {name:20s} evidence injected {answered}/{asked} "
              f"({answered / asked:.1%}), unanswerable injecting {junk}/{pairs} "
              f"({junk / pairs:.1%})", flush=True)
    return table


def choose(dev: dict[str, dict[str, Any]]) -> float:
    """The lowest grid value that lets no more dev unanswerable prompts in than the gate."""
    base = dev["gate alone"]["junk"]
    ok = [v for v in GRID if dev[f"gate + strong {v:.2f}"]["junk"] <= base]
    return min(ok) if ok else 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    convs = {c.sample_id: c for c in locomo.load_locomo(args.data)}
    prompts = json.loads(UNANSWERABLE.read_text(encoding="utf-8"))["prompts"]
    embedder = make_embedder("all-MiniLM-L6-v2")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="walrus-gate-") as tmp:
        settings = Settings(config_file=None, data_dir=Path(tmp), publisher_url=None,
                            aggregator_urls=[], use_keyring=False)
        with Memory(settings, embedder=embedder, master_key=locomo.BENCH_MASTER_KEY) as mem:
            for ids in HALVES.values():
                for sid in ids:
                    docs = convs[sid].documents()
                    mem.remember_many([{"text": d.text, "metadata": d.metadata()}
                                       for d in docs], namespace=sid)
            print(f"stored {sum(len(convs[s].documents()) for h in HALVES.values() for s in h)}"
                  f" turns in {time.perf_counter() - started:.0f} s", flush=True)
            dev = measure(mem, "dev", [convs[s] for s in HALVES["dev"]],
                          [p for p in prompts if prompt_half(p) == "dev"], None)
            chosen = choose(dev)
            print(f"chosen on dev: strong_relevance {chosen:.2f} "
                  f"(shipped {STRONG_HIT_COSINE:.2f})", flush=True)
            measure(mem, "held-out", [convs[s] for s in HALVES["held-out"]],
                    [p for p in prompts if prompt_half(p) == "held-out"], chosen)
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
