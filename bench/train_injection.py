"""Train the learned injection screen (walrus_mem._safety.classifier) and measure it.

    python bench/train_injection.py                      # retrain, write weights + card
    python bench/train_injection.py --data DIR           # public corpora elsewhere
    python bench/train_injection.py --eval-only          # measure the shipped weights

Needs scikit-learn (the dev extra). Public corpora are read from ``--data``
(default ../shared/data next to the repository; ``injection/`` with the S-Labs
and neuralchemy train and validation splits, ``locomo-dev.json``) and never
copied into the project: the card records their sha256 only.

Training data: the public train splits, the ``train``/``tuning`` halves of the
memory-style corpora in tests/data, and the probes (all tuned on before).
The threshold is chosen on a calibration fifth of that training data (split by
a hash of the text), then the model is refitted on all of it. Reported, never
trained or tuned on: the public validation splits, the held-out halves, and
every LoCoMo dev turn (benign). The public test splits are not in the data
directory; nothing here has seen them.

Writes walrus_mem/_safety/injection_classifier.npz (weights) and
injection_classifier.json (threshold, data hashes, weights hash, figures).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from walrus_mem._safety import classifier  # noqa: E402

TESTS = ROOT / "tests" / "data"
FP_TARGET = 0.005  # per calibration benign group; half the 1 % as margin
MEMORY_WEIGHT = 12.0  # memory-style rows are few and are what the screen sees
TARGET_RECALL = 0.9  # issue 26: >= 90 % of attacks at <= 1 % of benign flagged
C_GRID = (16.0, 64.0, 256.0)


@dataclass(frozen=True)
class Row:
    text: str
    label: int
    corpus: str
    split: str  # "train" (fitted), "eval" (reported only)
    lang: str = ""
    category: str = ""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _public(data: Path) -> tuple[list[Row], dict[str, str]]:
    inj = data / "injection"
    rows: list[Row] = []
    for name, split in (("slabs_train.csv", "train"), ("slabs_validation.csv", "eval")):
        with open(inj / name, newline="", encoding="utf-8") as fh:
            for rec in csv.DictReader(fh):
                rows.append(Row(rec["text"], int(rec["label"]), "slabs", split, "en"))
    for name, split in (("neuralchemy_core-train.jsonl", "train"),
                        ("neuralchemy_core-validation.jsonl", "eval")):
        for line in (inj / name).read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            rows.append(Row(rec["text"], int(rec["label"]), "neuralchemy", split, "en",
                            rec.get("category", "")))
    hashes = {f"injection/{p.name}": _sha256(p) for p in sorted(inj.iterdir())
              if p.suffix in {".csv", ".jsonl"}}
    return rows, hashes


def _texts(items: Iterable[Any]) -> Iterable[tuple[str, str, str]]:
    """(text, lang, family) of corpus items that are strings or dicts."""
    for item in items:
        if isinstance(item, str):
            yield item, "", ""
        else:
            yield item["text"], item.get("lang", ""), item.get("family", item.get("category", ""))


def _memory() -> list[Row]:
    """The project's memory-style corpora: train on tuning halves and probes, report held-out."""
    rows: list[Row] = []

    def add(corpus: str, split: str, attacks: Iterable[Any], benign: Iterable[Any]) -> None:
        for label, items in ((1, attacks), (0, benign)):
            for text, lang, family in _texts(items):
                rows.append(Row(text, label, corpus, split, lang or "en", family))

    own = json.loads((TESTS / "injection_memory_s26.json").read_text(encoding="utf-8"))
    for split, name in (("train", "train"), ("heldout", "eval")):
        add("memory_s26", name, [a for a in own["attacks"] if a["split"] == split],
            [b for b in own["benign"] if b["split"] == split])
    attacks = json.loads((TESTS / "attack_corpus.json").read_text(encoding="utf-8"))["payloads"]
    benign = json.loads((TESTS / "benign_facts.json").read_text(encoding="utf-8"))["facts"]
    for split, name in (("tuning", "train"), ("holdout", "eval")):
        add("corpus_s13", name, [a for a in attacks if a["split"] == split],
            [b for b in benign if b["split"] == split])
    old = json.loads((TESTS / "injection_corpus.json").read_text(encoding="utf-8"))
    add("injection_corpus", "train", old["dev"]["payloads"], old["dev"]["benign"])
    add("injection_corpus", "eval", old["holdout"]["payloads"], old["holdout"]["benign"])
    for stem, split in (("injection_tuning_s4", "train"), ("injection_tuning_s5", "train"),
                        ("injection_spaced_tuning_s5", "train"),
                        ("injection_heldout_s4", "eval"), ("injection_heldout_s5", "eval"),
                        ("injection_spaced_heldout_s5", "eval")):
        data = json.loads((TESTS / f"{stem}.json").read_text(encoding="utf-8"))
        add(stem.replace("injection_", ""), split, data["attacks"], data["benign"])
    fresh = json.loads((TESTS / "injection_fresh.json").read_text(encoding="utf-8"))
    add("fresh", "train", fresh["attacks"], fresh["benign_a"] + fresh["benign_b"])
    for path in sorted(TESTS.glob("injection_probe*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        add("probes", "train", data["attacks"], data["benign"])
    return rows


def _chat() -> list[Row]:
    """Benign chat lines in 20-odd languages (chatterbot-corpus, BSD-3-Clause, dev extra).

    The public corpora's benign rows are questions to an assistant; chat lines
    ("You got this, see you tomorrow!") teach that talking to someone is not an attack.
    A fifth (by a hash of the text) is held out and reported.
    """
    import chatterbot_corpus
    import yaml

    rows = []
    seen: set[str] = set()
    base = Path(chatterbot_corpus.__file__).parent / "data"
    for path in sorted(base.glob("*/*.yml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for convo in doc.get("conversations") or []:
            for line in convo or []:
                text = str(line).strip()
                if len(text) < 2 or text in seen:
                    continue
                seen.add(text)
                split = "eval" if hashlib.sha256(text.encode()).digest()[2] % 5 == 0 else "train"
                rows.append(Row(text, 0, "chat_bsd", split, path.parent.name))
    return rows


def _locomo(data: Path) -> list[Row]:
    rows = []
    for conv in json.loads((data / "locomo-dev.json").read_text(encoding="utf-8")):
        sessions = conv["conversation"]
        for key, turns in sessions.items():
            if key.startswith("session_") and isinstance(turns, list):
                rows.extend(Row(t["text"], 0, "locomo_dev", "eval", "en")
                            for t in turns if t.get("text", "").strip())
    return rows


def _matrix(texts: list[str]) -> Any:
    from scipy.sparse import csr_matrix

    indptr, indices, values = [0], [], []
    for text in texts:
        index, vals = classifier.features(classifier.normalise(text))
        indices.append(index)
        values.append(vals)
        indptr.append(indptr[-1] + len(index))
    return csr_matrix((np.concatenate(values), np.concatenate(indices), np.array(indptr)),
                      shape=(len(texts), 2 ** classifier.BITS))


def _fit(rows: list[Row], x: Any, c: float) -> classifier.Classifier:
    from sklearn.linear_model import LogisticRegression

    y = np.array([r.label for r in rows])
    weight = np.array([MEMORY_WEIGHT if r.corpus not in {"slabs", "neuralchemy", "chat_bsd"}
                       else 1.0 for r in rows])
    model = LogisticRegression(C=c, solver="liblinear", max_iter=2000, class_weight="balanced")
    model.fit(x, y, sample_weight=weight)
    return classifier.Classifier(model.coef_[0].astype(np.float32),
                                 float(model.intercept_[0]), 0.5)


def _is_calibration(text: str) -> bool:
    return hashlib.sha256(text.encode()).digest()[1] % 5 == 0


def _threshold(model: classifier.Classifier, calib: list[Row]) -> tuple[float, float]:
    """Lowest threshold keeping each calibration benign group under FP_TARGET; its recall."""
    groups: dict[str, list[float]] = defaultdict(list)
    attacks = []
    for row in calib:
        s = model.score(row.text)
        if row.label:
            attacks.append(s)
        else:
            groups[row.corpus if row.corpus in {"slabs", "neuralchemy", "chat_bsd"}
                   else "memory"].append(s)
    cut = 0.5
    for scores in groups.values():
        ranked = sorted(scores, reverse=True)
        allowed = int(FP_TARGET * len(ranked))  # benign rows that may score at or above
        cut = max(cut, float(np.nextafter(ranked[allowed], 1.0)) if allowed < len(ranked)
                  else cut)
    return cut, float(np.mean([s >= cut for s in attacks]))


def _rules_only() -> Any:
    """detect_injection with the learned layer switched off (the rules alone)."""
    from walrus_mem import safety

    def rules(text: str) -> bool:
        with classifier.disabled():
            return bool(safety.detect_injection(text))

    return rules


def _rates(flags: list[bool], labels: list[int]) -> dict[str, Any]:
    att = [f for f, y in zip(flags, labels, strict=True) if y]
    ben = [f for f, y in zip(flags, labels, strict=True) if not y]
    return {"attacks": len(att), "attacks_flagged": sum(att),
            "benign": len(ben), "benign_flagged": sum(ben)}


def evaluate(model: classifier.Classifier, rows: list[Row], with_rules: bool) -> dict[str, Any]:
    """Per corpus (and language, category): classifier, rules, and either (the screen)."""
    rules = _rules_only() if with_rules else None
    out: dict[str, Any] = {}
    by_corpus: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_corpus[row.corpus].append(row)
    for corpus, items in by_corpus.items():
        labels = [r.label for r in items]
        learned = [model.is_injection(r.text) for r in items]
        entry: dict[str, Any] = {"classifier": _rates(learned, labels)}
        if rules is not None:
            ruled = [rules(r.text) for r in items]
            entry["rules"] = _rates(ruled, labels)
            entry["screen"] = _rates([a or b for a, b in zip(learned, ruled, strict=True)],
                                     labels)
            entry["rules_only_catches"] = {
                "attacks": sum(1 for r, a, b in zip(items, learned, ruled, strict=True)
                               if r.label and b and not a),
                "benign": sum(1 for r, a, b in zip(items, learned, ruled, strict=True)
                              if not r.label and b and not a)}
        for key in ("lang", "category"):
            groups: dict[str, list[int]] = defaultdict(list)
            for i, r in enumerate(items):
                if getattr(r, key):
                    groups[getattr(r, key)].append(i)
            if len(groups) > 1:
                entry[f"by_{key}"] = {g: _rates([learned[i] for i in idx],
                                                [labels[i] for i in idx])
                                      for g, idx in sorted(groups.items())}
        out[corpus] = entry
    return out


def _timing(model: classifier.Classifier, texts: list[str]) -> float:
    start = time.perf_counter()
    for text in texts:
        model.score(text)
    return (time.perf_counter() - start) / len(texts) * 1e6


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.1f} %)" if d else "-"


def _print(figures: dict[str, Any]) -> None:
    for corpus, entry in figures.items():
        for layer in ("classifier", "rules", "screen"):
            if layer in entry:
                e = entry[layer]
                print(f"{corpus:24} {layer:10} "
                      f"attacks {_pct(e['attacks_flagged'], e['attacks']):>20}"
                      f"  benign {_pct(e['benign_flagged'], e['benign']):>20}")
        if "rules_only_catches" in entry:
            r = entry["rules_only_catches"]
            print(f"{'':24} rules add {r['attacks']} attacks, {r['benign']} benign flags")
        for key in ("by_lang", "by_category"):
            for group, e in entry.get(key, {}).items():
                print(f"{'':24}   {group:22} attacks {_pct(e['attacks_flagged'], e['attacks']):>18}"
                      f"  benign {_pct(e['benign_flagged'], e['benign']):>18}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--eval-only", action="store_true")
    parser.add_argument("--no-rules", action="store_true", help="skip measuring the rules")
    args = parser.parse_args()

    public, hashes = _public(args.data)
    rows = public + _memory() + _chat()
    locomo = _locomo(args.data)
    hashes["locomo-dev.json"] = _sha256(args.data / "locomo-dev.json")
    train = [r for r in rows if r.split == "train"]
    held = [r for r in rows if r.split == "eval"] + locomo

    if args.eval_only:
        model = classifier.load()
        card = json.loads(classifier.CARD.read_text(encoding="utf-8"))
    else:
        x = _matrix([r.text for r in train])
        mask = np.array([not _is_calibration(r.text) for r in train])
        fit = [r for r, m in zip(train, mask, strict=True) if m]
        calib = [r for r, m in zip(train, mask, strict=True) if not m]
        best: tuple[float, float, float] | None = None
        for c in C_GRID:
            cut, recall = _threshold(_fit(fit, x[mask], c), calib)
            print(f"C={c}: threshold {cut:.3f}, calibration recall {recall:.3f}")
            if best is None or recall > best[2]:
                best = (c, cut, recall)
        assert best is not None
        c, cut, recall = best
        final = _fit(train, x, c)
        model = classifier.Classifier(final.weights, final.bias, cut)
        np.savez_compressed(classifier.WEIGHTS, weights=model.weights.astype(np.float16),
                            bias=np.float32(model.bias))
        card = {
            "about": "Learned injection screen: see walrus_mem/_safety/classifier.py and "
                     "bench/train_injection.py. Trained in part on S-Labs "
                     "prompt-injection-dataset (MIT) and neuralchemy Prompt-injection-dataset "
                     "(Apache-2.0); the data is not shipped, its sha256 is below.",
            "threshold": cut, "C": c, "bits": classifier.BITS, "fp_target": FP_TARGET,
            "memory_weight": MEMORY_WEIGHT, "calibration_recall": recall,
            "train_rows": {"attacks": sum(r.label for r in train),
                           "benign": sum(1 - r.label for r in train)},
            "data_sha256": hashes,
        }
        model = classifier.Classifier(*_reload_weights(), cut)
    card["weights_sha256"] = _sha256(classifier.WEIGHTS)
    # The screen consults the model only if calibration (training data) meets the target.
    card["active"] = card["calibration_recall"] >= TARGET_RECALL
    figures = evaluate(model, held, with_rules=not args.no_rules)
    card["heldout"] = figures
    card["microseconds_per_fact_locomo"] = round(_timing(model, [r.text for r in locomo]), 1)
    _print(figures)
    print(f"threshold {card['threshold']:.3f}; {card['microseconds_per_fact_locomo']} µs per "
          "LoCoMo turn")
    classifier.CARD.write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n",
                               encoding="utf-8")


def _reload_weights() -> tuple[Any, float]:
    with np.load(classifier.WEIGHTS) as data:
        return data["weights"].astype(np.float32), float(data["bias"])


if __name__ == "__main__":
    main()
