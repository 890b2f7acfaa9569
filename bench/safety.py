"""The injection screen per corpus and split, per language and attack class, and what each
rule family adds once the learned model is on (issue 26).

    python bench/safety.py                 # held-out splits (never trained or tuned on)
    python bench/safety.py --split train   # the training rows (in-sample, for comparison)
    python bench/safety.py --json out.json # the same figures as JSON

Rows come from bench/train_injection.py's loaders: the S-Labs and neuralchemy
train/validation splits (../shared/data/injection), the memory-style corpora
in tests/data (held-out halves as ``eval``), chatterbot-corpus chat lines,
LoCoMo dev turns and, when installed, bastioncorpus 0.6.0 (PyPI, MIT; never trained
on). The public *test* splits are not in ../shared/data: nothing here reports them.
Vectors are the cached MiniLM vectors of train_injection.

Layers: ``joint`` (the shipped learned model on text + vector), ``rules``
(detect_injection with the learned layer off: all a text without a vector of the
default model gets, e.g. a chat message before extraction, an old version in a
history, a memory of another embedding model), ``screen`` (either: what capture
refuses -- screen_fact's rules, then the joint model on the vector remember_many
computes, walrus_mem._safety.capture_screen -- and what recall withholds). The
semantic prototype layer is not counted.

Rule families: each family of detect_injection's rules (the pattern families,
multilingual lexicons, structural cues, concepts, intents) is switched off in turn;
a family's *unique* catches
are the held-out attacks flagged by the screen with it and not without it,
its *unique benign* the benign rows it alone flags. Printed for the screen (joint
model on: capture and recall), for the rules alone (texts without a vector) and
with the text model on.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import train_injection as ti  # noqa: E402

from walrus_mem._safety import (  # noqa: E402
    classifier,
    injection,
    injection_concepts,
    injection_intents,
)
from walrus_mem._safety.format_chars import reveal_format_chars  # noqa: E402
from walrus_mem._safety.injection_patterns import INJECTION_PATTERNS  # noqa: E402

FAMILIES = ("patterns", "lexicons", "cues", "concepts", "intents")
"""Rule families of detect_injection (walrus_mem.safety._labelled_hits), in its order."""


def _view_hits(view: str) -> Iterable[str]:
    if any(p.search(view) for _, p in INJECTION_PATTERNS):
        yield "patterns"
    if any(True for _ in injection.lexicon_hits(view)):
        yield "lexicons"
    if any(True for _ in injection.structural_cues(view)):
        yield "cues"
    if any(True for _ in injection_concepts.concept_hits(view)):
        yield "concepts"
    if any(True for _ in injection_intents.intent_hits(view)):
        yield "intents"


def family_hits(text: str) -> frozenset[str]:
    """The rule families that fire on ``text`` (any window, any view), as detect_injection."""
    if not text or not text.strip():
        return frozenset()
    text = reveal_format_chars(text)
    found: set[str] = set()
    for window in injection.windows(text):
        for view in injection.views(window):
            found.update(_view_hits(view))
            if len(found) == len(FAMILIES):
                return frozenset(found)
    return frozenset(found)


def _rates(flags: Iterable[bool], labels: Iterable[int]) -> dict[str, int]:
    out = {"attacks": 0, "attacks_flagged": 0, "benign": 0, "benign_flagged": 0}
    for f, y in zip(flags, labels, strict=True):
        kind = "attacks" if y else "benign"
        out[kind] += 1
        out[kind + "_flagged"] += bool(f)
    return out


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.1f} %)" if d else "-"


def _cell(e: dict[str, int]) -> str:
    return (f"A {_pct(e['attacks_flagged'], e['attacks']):>19}  "
            f"B {_pct(e['benign_flagged'], e['benign']):>19}")


def measure(rows: list[ti.Row], vectors: np.ndarray) -> dict[str, Any]:
    joint = classifier.load_joint()
    assert joint is not None, "the shipped weights hold no joint model"
    started = time.perf_counter()
    jflags = [joint.is_injection(r.text, v) for r, v in zip(rows, vectors, strict=True)]
    joint_us = (time.perf_counter() - started) / max(len(rows), 1) * 1e6
    started = time.perf_counter()
    hits = [family_hits(r.text) for r in rows]
    rules_ms = (time.perf_counter() - started) / max(len(rows), 1) * 1e3
    rflags = [bool(h) for h in hits]
    text = classifier.load()  # the text model (what capture would run were it active)
    tflags = [text.is_injection(r.text) for r in rows]
    out: dict[str, Any] = {"microseconds_per_fact_joint": round(joint_us, 1),
                           "milliseconds_per_fact_rules": round(rules_ms, 2), "corpora": {}}
    by_corpus: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_corpus[r.corpus].append(i)
    layers = {"joint": jflags, "rules": rflags,
              "screen": [a or b for a, b in zip(jflags, rflags, strict=True)]}
    for corpus, idx in by_corpus.items():
        labels = [rows[i].label for i in idx]
        entry: dict[str, Any] = {name: _rates([f[i] for i in idx], labels)
                                 for name, f in layers.items()}
        for key in ("lang", "category"):
            groups: dict[str, list[int]] = defaultdict(list)
            for i in idx:
                if getattr(rows[i], key):
                    groups[getattr(rows[i], key)].append(i)
            if len(groups) > 1:
                entry[f"by_{key}"] = {
                    g: {name: _rates([f[i] for i in sub], [rows[i].label for i in sub])
                        for name, f in layers.items()} for g, sub in sorted(groups.items())}
        out["corpora"][corpus] = entry
    out["families"] = _families(rows, hits, jflags, tflags)
    return out


def _families(rows: list[ti.Row], hits: list[frozenset[str]], jflags: list[bool],
              tflags: list[bool]) -> dict[str, Any]:
    """Per family: rows it alone flags, in three contexts: ``screen`` (joint model on:
    capture and recall), ``rules`` (rules alone: texts without a default-model vector) and
    ``text`` (the text model on). ``redundant``: the families that add nothing to the
    screen, removed together."""
    public = {"slabs", "neuralchemy", "chat_bsd", "bastion_mit"}  # written by others
    contexts = (("rules", [False] * len(rows)), ("screen", jflags), ("text", tflags))

    def unique(fams: frozenset[str]) -> dict[str, int]:
        e: dict[str, int] = defaultdict(int)
        for i, (r, h) in enumerate(zip(rows, hits, strict=True)):
            if not h & fams:
                continue
            e["fires_attacks" if r.label else "fires_benign"] += 1
            if not h <= fams:
                continue  # a family kept catches it too
            where = "public" if r.corpus in public else "memory"
            for ctx, other in contexts:
                if not other[i]:
                    e[f"{ctx}_unique_attacks_{where}" if r.label else f"{ctx}_unique_benign"] += 1
        return dict(e)

    out: dict[str, Any] = {fam: unique(frozenset({fam})) for fam in FAMILIES}
    spare = frozenset(f for f in FAMILIES
                      if not out[f].get("screen_unique_attacks_memory")
                      and not out[f].get("screen_unique_attacks_public"))
    if spare:
        out["redundant: " + "+".join(sorted(spare))] = unique(spare)
    return out


def _print(fig: dict[str, Any], split: str) -> None:
    print(f"split: {split}; joint model {fig['microseconds_per_fact_joint']} µs per fact "
          f"(vector given), rules {fig['milliseconds_per_fact_rules']} ms per fact")
    for corpus, entry in fig["corpora"].items():
        for layer in ("joint", "rules", "screen"):
            print(f"{corpus:26} {layer:7} {_cell(entry[layer])}")
        for key in ("by_lang", "by_category"):
            for group, layers in entry.get(key, {}).items():
                if layers["screen"]["attacks"] + layers["screen"]["benign"] < 3:
                    continue
                print(f"{'':28}{key[3:]} {group:18} screen {_cell(layers['screen'])}"
                      f"   (joint {layers['joint']['attacks_flagged']}, rules "
                      f"{layers['rules']['attacks_flagged']} attacks)")
    print("\nrule family: rows it alone flags (screen = the joint model on, capture and "
          "recall; rules = rules alone, texts without a vector; text = the text model on)")
    cols = [(ctx, w) for ctx in ("screen", "rules", "text")
            for w in ("attacks_memory", "attacks_public", "benign")]
    print(f"{'family':14} {'fires A/B':>10}  " + " ".join(
        f"{ctx[:6] + ':' + w.replace('attacks_', 'A ').replace('benign', 'B'):>12}"
        for ctx, w in cols))
    for fam, e in fig["families"].items():
        print(f"{fam[:40]:14} {e.get('fires_attacks', 0):>5}/{e.get('fires_benign', 0):<4}  "
              + " ".join(f"{e.get(f'{ctx}_unique_{w}', 0):>12}" for ctx, w in cols))


BASTION_SHA256 = "b1aaa009aad34df7fb2c4f499cdb936875b97da23a7452caaeb4b94aff2bfd12"


def bastion() -> list[ti.Row]:
    """bastioncorpus 0.6.0 (PyPI, MIT): 181 labelled injections and benign texts in en, de,
    fr, es, it, written by others, never trained or tuned on (``eval`` rows). Empty when the
    package is not installed (``pip install bastioncorpus==0.6.0``) or not that version."""
    import hashlib
    import importlib.resources
    import importlib.util

    if importlib.util.find_spec("bastioncorpus") is None:
        return []
    data = (importlib.resources.files("bastioncorpus") / "corpus" / "injections.jsonl").read_bytes()
    if hashlib.sha256(data).hexdigest() != BASTION_SHA256:
        print("bastioncorpus: not the 0.6.0 corpus, skipped", file=sys.stderr)
        return []
    rows = []
    for line in data.decode("utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            rows.append(ti.Row(rec["text"], int(rec["label"] == "malicious"), "bastion_mit",
                               "eval", rec.get("lang") or "en", rec.get("category", "")))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--split", choices=("eval", "train"), default="eval")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    public, _hashes = ti._public(args.data)
    rows = [r for r in public + ti._memory() + ti._chat() + ti._locomo(args.data) + bastion()
            if r.split == args.split]
    vectors = ti._embed([r.text for r in rows])
    fig = measure(rows, vectors)
    fig["split"] = args.split
    _print(fig, args.split)
    if args.json:
        args.json.write_text(json.dumps(fig, indent=1, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
