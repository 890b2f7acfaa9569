"""Train the learned injection screen (walrus_mem._safety.classifier) and measure it.

    python bench/train_injection.py                      # retrain, write weights + card
    python bench/train_injection.py --data DIR           # public corpora elsewhere
    python bench/train_injection.py --eval-only          # measure the shipped weights

Needs scikit-learn, scipy, chatterbot-corpus and pyyaml (the dev extra). Public
corpora are read from ``--data`` (default ../shared/data next to the repository;
``injection/`` with the S-Labs and neuralchemy train and validation splits,
``locomo-dev.json``) and never copied into the project: the card records their
sha256 only. The MiniLM vectors of the texts are cached under /tmp (``_embed``).

Two models (walrus_mem._safety.classifier): the text model (n-grams) and the joint
model (n-grams + the default embedding). Training data: the public train splits,
the ``train``/``tuning`` halves of the memory-style corpora in tests/data, the
probes (all tuned on before), chat lines, and the turns of the LoCoMo dev
conversations in LOCOMO_TRAIN. Each threshold is chosen on a calibration fifth of
that training data (split by a hash of the text), then the model is refitted on all
of it. Reported, never trained or tuned on: the public validation splits, the
held-out halves, tests/data/injection_multilingual_s26.json (both halves), the other
LoCoMo dev conversations (benign). The public test
splits are not in the data directory; nothing here has seen them. Whether each
model is consulted is decided by ``_activation`` from the held-out figures (a
rule fixed before them: docs/security.md).

Writes walrus_mem/_safety/injection_classifier.npz (weights) and
injection_classifier.json (thresholds, data hashes, weights hash, figures).
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from walrus_mem._safety import classifier  # noqa: E402

TESTS = ROOT / "tests" / "data"
FP_TARGET = 0.01  # per calibration benign group: the 1 % (held-out figures show the margin)
MEMORY_WEIGHT = 12.0  # memory-style rows are few and are what the screen sees
TARGET_RECALL = 0.9  # issue 26: >= 90 % of attacks at <= 1 % of benign flagged
C_GRID = (64.0, 256.0)
LOCOMO_WEIGHT = 4.0  # benign chat turns of the training conversations
EMBED_SCALE = 1.0  # the embedding columns are multiplied by this before fitting
REFIT = True  # refit on all training rows after the threshold is chosen (docs/security.md)
WINDOWS = False  # score a long text as a whole, not by its worst 600-character window
PUBLIC = frozenset({"slabs", "neuralchemy", "chat_bsd"})
PUBLIC_ATTACKS = ("slabs", "neuralchemy")
# Switched on only if, on every held-out benign set of memory-style text, the model flags
# at most 1 % beyond what the rules already flag, and it adds >= 20 points of attacks
# caught on both public validation splits (issue 26; the rules alone catch 10-20 %).
MAX_ADDED_BENIGN = 0.01
MIN_PUBLIC_GAIN = 0.20


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
    # Reported whole, never trained on: with its train half in training the joint model
    # caught fewer held-out attacks (S-Labs 75 % against 78 %, this corpus's held-out
    # half 6/36 against 8/36; bench/safety.py, docs/security.md).
    multi = json.loads((TESTS / "injection_multilingual_s26.json").read_text(encoding="utf-8"))
    add("multilingual_s26", "eval", multi["attacks"], multi["benign"])
    hard = json.loads((TESTS / "injection_hard_negatives_s26.json").read_text(encoding="utf-8"))
    for split, name in (("train", "train"), ("heldout", "eval")):
        add("hard_negatives_s26", name, [], [b for b in hard["benign"] if b["split"] == split])
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


LOCOMO_TRAIN = ("conv-42", "conv-43")  # trained on; the other three dev conversations reported


def _locomo(data: Path) -> list[Row]:
    """LoCoMo dev turns (benign chat), split by conversation, never by row."""
    rows = []
    for conv in json.loads((data / "locomo-dev.json").read_text(encoding="utf-8")):
        train = conv.get("sample_id") in LOCOMO_TRAIN
        corpus, split = ("locomo_train", "train") if train else ("locomo_heldout", "eval")
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                rows.extend(Row(t["text"], 0, corpus, split, "en")
                            for t in turns if t.get("text", "").strip())
    return rows


EMBED_CACHE = Path("/tmp/walrus_mem_injection_embeddings")


def _embed(texts: list[str]) -> np.ndarray:
    """MiniLM vectors of ``texts`` (the default embedder, what every fact gets anyway).

    Cached per text under /tmp (never in the repository): a retrain embeds only new texts.
    """
    from walrus_mem._recall.embeddings import DEFAULT_MODEL_ID, embed_checked, make_embedder

    EMBED_CACHE.mkdir(parents=True, exist_ok=True)
    path = EMBED_CACHE / "minilm.npz"
    known: dict[str, np.ndarray] = {}
    if path.exists():
        with np.load(path) as data:
            known = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    def key(text: str) -> str:
        return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()

    # Sorted by length: batches of like lengths waste little on padding.
    missing = sorted(dict.fromkeys(t for t in texts if key(t) not in known), key=len)
    if missing:
        embedder = make_embedder(DEFAULT_MODEL_ID, backend="onnx", threads=2)
        for start in range(0, len(missing), 2048):
            chunk = missing[start:start + 2048]
            vectors = embed_checked(embedder, chunk, 256)
            known.update(zip((key(t) for t in chunk), vectors, strict=True))
            print(f"embedded {start + len(chunk)}/{len(missing)}", flush=True)
            np.savez(path, keys=np.array(list(known)), vectors=np.stack(list(known.values())))
    return np.stack([known[key(t)] for t in texts]).astype(np.float32)


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


def _weight(row: Row) -> float:
    if row.corpus in PUBLIC:
        return 1.0
    return LOCOMO_WEIGHT if row.corpus.startswith("locomo") else MEMORY_WEIGHT


def _fit(rows: list[Row], x: Any, c: float, joint: bool) -> classifier.Classifier:
    """Logistic regression on the n-grams (text model) or n-grams + embedding (joint)."""
    from sklearn.linear_model import LogisticRegression

    y = np.array([r.label for r in rows])
    model = LogisticRegression(C=c, solver="liblinear", max_iter=3000, class_weight="balanced",
                               random_state=0)  # liblinear shuffles: same weights every run
    model.fit(x, y, sample_weight=np.array([_weight(r) for r in rows]))
    coef = model.coef_[0].astype(np.float32)
    bits = 2 ** classifier.BITS
    return classifier.Classifier(coef[:bits], float(model.intercept_[0]), 0.5,
                                 embedding_weights=coef[bits:] * EMBED_SCALE if joint else None,
                                 windowed=WINDOWS)


def _is_calibration(text: str) -> bool:
    return hashlib.sha256(text.encode()).digest()[1] % 5 == 0


def _group(row: Row) -> str:
    if row.corpus in PUBLIC:
        return row.corpus
    return "locomo" if row.corpus.startswith("locomo") else "memory"


def _scores(model: classifier.Classifier, rows: list[Row], vectors: np.ndarray) -> list[float]:
    return [model.score(r.text, v) for r, v in zip(rows, vectors, strict=True)]


def _threshold(scores: list[float], calib: list[Row]) -> tuple[float, float]:
    """Lowest threshold keeping each calibration benign group under FP_TARGET; its recall."""
    groups: dict[str, list[float]] = defaultdict(list)
    attacks = []
    for row, s in zip(calib, scores, strict=True):
        if row.label:
            attacks.append(s)
        else:
            groups[_group(row)].append(s)
    cut = 0.5
    for values in groups.values():
        ranked = sorted(values, reverse=True)
        allowed = int(FP_TARGET * len(ranked))  # benign rows that may score at or above
        if allowed < len(ranked):
            cut = max(cut, float(np.nextafter(ranked[allowed], 1.0)))
    return cut, float(np.mean([s >= cut for s in attacks]))


def _train(train: list[Row], x: Any, vectors: np.ndarray, joint: bool
           ) -> tuple[classifier.Classifier, float, float]:
    """Pick C and the threshold on the calibration fifth, refit on all training rows."""
    from scipy.sparse import csr_matrix, hstack

    if joint:
        x = hstack([x, csr_matrix(vectors * EMBED_SCALE)]).tocsr()
    mask = np.array([not _is_calibration(r.text) for r in train])
    fit = [r for r, m in zip(train, mask, strict=True) if m]
    calib = [r for r, m in zip(train, mask, strict=True) if not m]
    best: tuple[float, float, float, classifier.Classifier] | None = None
    for c in C_GRID:
        model = _fit(fit, x[mask], c, joint)
        cut, recall = _threshold(_scores(model, calib, vectors[~mask]), calib)
        print(f"{'joint' if joint else 'text'} C={c}: threshold {cut:.4f}, "
              f"calibration recall {recall:.3f}", flush=True)
        if best is None or recall > best[2]:
            best = (c, cut, recall, model)
    assert best is not None
    c, cut, recall, model = best
    final = _fit(train, x, c, joint) if REFIT else model
    return replace(final, threshold=cut), c, recall


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


LAYERS = ("text", "joint", "rules", "rules_text", "screen")
"""text / joint: each model alone; rules: detect_injection without the learned layer (what a
text without a default-model vector gets); rules_text: rules or the text model (what
screen_fact would refuse with the text model on); screen: rules or the joint model (what
capture refuses -- screen_fact, then the joint model on the vector remember_many computes --
and screen_records withholds at recall; the semantic prototype layer is not counted)."""


def evaluate(text: classifier.Classifier, joint: classifier.Classifier, rows: list[Row],
             vectors: np.ndarray, with_rules: bool) -> dict[str, Any]:
    """Per corpus (and language, category): each layer's attacks and benign flagged."""
    rules = _rules_only() if with_rules else (lambda _text: False)
    out: dict[str, Any] = {}
    by_corpus: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        by_corpus[row.corpus].append(i)
    for corpus, idx in by_corpus.items():
        items = [rows[i] for i in idx]
        labels = [r.label for r in items]
        flags: dict[str, list[bool]] = {
            "text": [text.is_injection(r.text) for r in items],
            "joint": [joint.is_injection(r.text, vectors[i]) for r, i in zip(items, idx,
                                                                             strict=True)],
            "rules": [rules(r.text) for r in items]}
        flags["rules_text"] = [a or b for a, b in zip(flags["text"], flags["rules"],
                                                      strict=True)]
        flags["screen"] = [a or b for a, b in zip(flags["rules"], flags["joint"], strict=True)]
        entry: dict[str, Any] = {layer: _rates(flags[layer], labels) for layer in LAYERS
                                 if with_rules or layer in {"text", "joint"}}
        for key in ("lang", "category"):
            groups: dict[str, list[int]] = defaultdict(list)
            for j, r in enumerate(items):
                if getattr(r, key):
                    groups[getattr(r, key)].append(j)
            if len(groups) > 1:
                entry[f"by_{key}"] = {
                    g: {layer: _rates([flags[layer][j] for j in sub], [labels[j] for j in sub])
                        for layer in ("joint", "rules", "screen") if layer in entry}
                    for g, sub in sorted(groups.items())}
        out[corpus] = entry
    return out


def _activation(figures: dict[str, Any], layer: str, model: str) -> dict[str, Any]:
    """Whether switching ``model`` on is worth it, from the held-out figures (module doc)."""
    added = {}
    for corpus, entry in figures.items():
        if corpus in PUBLIC_ATTACKS or not entry["text"]["benign"]:
            continue
        with_model, rules = entry[layer]["benign_flagged"], entry["rules"]["benign_flagged"]
        added[corpus] = (with_model - rules) / entry[layer]["benign"]
    gain = {c: (figures[c][layer]["attacks_flagged"] - figures[c]["rules"]["attacks_flagged"])
            / figures[c]["rules"]["attacks"] for c in PUBLIC_ATTACKS}
    active = max(added.values()) <= MAX_ADDED_BENIGN and min(gain.values()) >= MIN_PUBLIC_GAIN
    return {"active": active, "benign_added_over_rules": added, "public_attack_gain": gain,
            "model": model}


def _timing(model: classifier.Classifier, rows: list[Row], vectors: np.ndarray) -> float:
    start = time.perf_counter()
    for row, vector in zip(rows, vectors, strict=True):
        model.score(row.text, vector)
    return (time.perf_counter() - start) / len(rows) * 1e6


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.1f} %)" if d else "-"


def _print(figures: dict[str, Any]) -> None:
    for corpus, entry in figures.items():
        for layer in LAYERS:
            if layer in entry:
                e = entry[layer]
                print(f"{corpus:24} {layer:8} "
                      f"attacks {_pct(e['attacks_flagged'], e['attacks']):>20}"
                      f"  benign {_pct(e['benign_flagged'], e['benign']):>20}")
        for key in ("by_lang", "by_category"):
            for group, layers in entry.get(key, {}).items():
                cells = "  ".join(
                    f"{layer} A {_pct(e['attacks_flagged'], e['attacks'])} "
                    f"B {_pct(e['benign_flagged'], e['benign'])}" for layer, e in layers.items())
                print(f"{'':24}   {group:20} {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--eval-only", action="store_true")
    parser.add_argument("--no-rules", action="store_true", help="skip measuring the rules")
    parser.add_argument("--no-refit", action="store_true",
                        help="ship the models fitted on four fifths, whose thresholds were "
                             "chosen on the last fifth")
    args = parser.parse_args()
    global REFIT
    REFIT = REFIT and not args.no_refit

    public, hashes = _public(args.data)
    rows = public + _memory() + _chat() + _locomo(args.data)
    hashes["locomo-dev.json"] = _sha256(args.data / "locomo-dev.json")
    for name in ("injection_memory_s26.json", "injection_hard_negatives_s26.json",
                 "injection_multilingual_s26.json"):
        hashes[f"tests/data/{name}"] = _sha256(TESTS / name)
    train = [r for r in rows if r.split == "train"]
    held = [r for r in rows if r.split == "eval"]
    held_vectors = _embed([r.text for r in held])

    if args.eval_only:
        text, joint = classifier.load(), classifier.load_joint()
        assert joint is not None, "the shipped weights hold no joint model"
        card = json.loads(classifier.CARD.read_text(encoding="utf-8"))
        card["data_sha256"].update(hashes)  # the files these figures come from
    else:
        x = _matrix([r.text for r in train])
        vectors = _embed([r.text for r in train])
        text, c_text, recall_text = _train(train, x, vectors, joint=False)
        joint, c_joint, recall_joint = _train(train, x, vectors, joint=True)
        assert joint.embedding_weights is not None
        np.savez_compressed(classifier.WEIGHTS, weights=text.weights.astype(np.float16),
                            bias=np.float32(text.bias),
                            joint_weights=joint.weights.astype(np.float16),
                            joint_embedding=joint.embedding_weights.astype(np.float32),
                            joint_bias=np.float32(joint.bias))
        card = {
            "about": "Learned injection screen: see walrus_mem/_safety/classifier.py and "
                     "bench/train_injection.py. Trained in part on S-Labs "
                     "prompt-injection-dataset (MIT) and neuralchemy Prompt-injection-dataset "
                     "(Apache-2.0); the data is not shipped, its sha256 is below.",
            "threshold": text.threshold, "C": c_text, "calibration_recall": recall_text,
            "joint": {"threshold": joint.threshold, "C": c_joint,
                      "calibration_recall": recall_joint, "embedding_scale": EMBED_SCALE,
                      "embedding_model": "sentence-transformers/all-MiniLM-L6-v2"},
            "bits": classifier.BITS, "fp_target": FP_TARGET, "refit": REFIT,
            "windows": WINDOWS,
            "memory_weight": MEMORY_WEIGHT,
            "locomo_weight": LOCOMO_WEIGHT, "locomo_train": list(LOCOMO_TRAIN),
            "train_rows": {"attacks": sum(r.label for r in train),
                           "benign": sum(1 - r.label for r in train)},
            "data_sha256": hashes,
        }
        # What the screen will run: the weights as stored (float16), re-read.
        classifier._LOADED.clear()
        text, joint = _reread(text.threshold), _reread(joint.threshold, joint=True)
    card["weights_sha256"] = _sha256(classifier.WEIGHTS)
    figures = evaluate(text, joint, held, held_vectors, with_rules=not args.no_rules)
    card["heldout"] = figures
    if not args.no_rules:
        card["activation"] = {"text": _activation(figures, "rules_text", "text"),
                              "joint": _activation(figures, "screen", "joint")}
        card["active"] = card["activation"]["text"]["active"]
        card["joint"]["active"] = card["activation"]["joint"]["active"]
    locomo = [(r, v) for r, v in zip(held, held_vectors, strict=True)
              if r.corpus == "locomo_heldout"]
    lrows, lvecs = [r for r, _ in locomo], np.stack([v for _, v in locomo])
    card["microseconds_per_fact_locomo"] = {"text": round(_timing(text, lrows, lvecs), 1),
                                            "joint": round(_timing(joint, lrows, lvecs), 1)}
    _print(figures)
    print(json.dumps({k: card[k] for k in ("activation", "microseconds_per_fact_locomo")
                      if k in card}, indent=1))
    classifier.CARD.write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n",
                               encoding="utf-8")


def _reread(threshold: float, joint: bool = False) -> classifier.Classifier:
    with np.load(classifier.WEIGHTS) as data:
        if joint:
            return classifier.Classifier(data["joint_weights"].astype(np.float32),
                                         float(data["joint_bias"]), threshold,
                                         embedding_weights=data["joint_embedding"],
                                         windowed=WINDOWS)
        return classifier.Classifier(data["weights"].astype(np.float32), float(data["bias"]),
                                     threshold, windowed=WINDOWS)


if __name__ == "__main__":
    main()
