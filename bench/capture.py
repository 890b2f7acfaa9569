"""Capture figures (issue 26 item 4): which facts auto-capture stores from chat turns.

    python bench/capture.py            # dev and held-out figures (held-out: totals only)
    python bench/capture.py --misses   # also list the DEV half's misses

Each turn of ``tests/data/capture_turns.json`` goes through the real capture path
(:meth:`MemoryHooks.capture_now`: should_capture, whole-message redaction, the
heuristic extractor, screen_fact) into a memory stub that records what would be
stored. A stored fact is correct when it holds every keyword of an expected fact;
a secret is leaked when its value (letters and digits only) is in anything stored.
Turns are split dev / held-out by sha256 of the text; tuning looks at dev only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from walrus_mem.hooks import MemoryHooks  # noqa: E402

DATA = ROOT / "tests" / "data" / "capture_turns.json"


class RecordingMemory:
    """Just enough of Memory for a synchronous capture: remember_many records the texts."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def remember_many(self, items: list[dict[str, Any]], **_: Any) -> SimpleNamespace:
        self.texts.extend(item["text"] for item in items)
        return SimpleNamespace(records=[], stored=len(items), deduplicated=0, failed=[],
                               replayed=False)


def split_of(text: str) -> str:
    return "dev" if hashlib.sha256(text.encode("utf-8")).digest()[0] % 2 == 0 else "heldout"


def load_turns() -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))["turns"]
    return turns


def stored_facts(text: str) -> list[str]:
    memory = RecordingMemory()
    hooks = MemoryHooks(memory)
    try:
        hooks.capture_now([{"role": "user", "content": text}])
    finally:
        hooks.close()
    return memory.texts


def _squash(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def score_turn(turn: dict[str, Any], stored: list[str]) -> dict[str, Any]:
    expected = [[k.lower() for k in keys] for keys in turn["facts"]]
    matched = {i for i, keys in enumerate(expected)
               if any(all(k in fact.lower() for k in keys) for fact in stored)}
    correct = sum(1 for fact in stored
                  if any(all(k in fact.lower() for k in keys) for keys in expected))
    everything = _squash(" ".join(stored))
    leaked = [s for s in turn["secrets"] if _squash(s) in everything]
    return {"stored": len(stored), "correct": correct, "expected": len(expected),
            "found": len(matched), "leaked": len(leaked), "secrets": len(turn["secrets"])}


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    total = Counter[str]()
    for row in rows:
        total.update({k: v for k, v in row.items() if isinstance(v, int)})
    precision = total["correct"] / total["stored"] if total["stored"] else 1.0
    recall = total["found"] / total["expected"] if total["expected"] else 1.0
    return {"turns": len(rows), "precision": precision, "recall": recall,
            "stored": total["stored"], "correct": total["correct"],
            "expected": total["expected"], "found": total["found"],
            "leaked": total["leaked"], "secrets": total["secrets"]}


def evaluate(turns: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Per split: figures over all turns, per kind, plus the scored rows."""
    rows = []
    for turn in turns if turns is not None else load_turns():
        stored = stored_facts(turn["text"])
        rows.append({**turn, **score_turn(turn, stored), "split": split_of(turn["text"]),
                     "stored_texts": stored})
    out: dict[str, Any] = {}
    for split in ("dev", "heldout"):
        part = [r for r in rows if r["split"] == split]
        kinds = sorted({r["kind"] for r in part})
        out[split] = {"all": figures(part),
                      "by_kind": {k: figures([r for r in part if r["kind"] == k]) for k in kinds},
                      "rows": part}
    return out


def _line(name: str, f: dict[str, Any]) -> str:
    return (f"  {name:<18} turns {f['turns']:>3}  precision {f['precision']:.2f} "
            f"({f['correct']}/{f['stored']})  recall {f['recall']:.2f} "
            f"({f['found']}/{f['expected']})  secrets leaked {f['leaked']}/{f['secrets']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--misses", action="store_true", help="list the dev half's misses")
    args = parser.parse_args()
    result = evaluate()
    for split in ("dev", "heldout"):
        print(f"capture, {split} half ({DATA.name})")
        print(_line("all", result[split]["all"]))
        for kind, f in result[split]["by_kind"].items():
            print(_line(kind, f))
    if args.misses:
        print("dev misses:")
        for row in result["dev"]["rows"]:
            if row["correct"] < row["stored"] or row["found"] < row["expected"] or row["leaked"]:
                print(f"  [{row['kind']}] {row['text']!r} -> {row['stored_texts']!r}")


if __name__ == "__main__":
    main()
