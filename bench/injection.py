"""Injection and secret detection figures on the walrus_mem corpora, layer by layer.

    python bench/injection.py            # figures for docs/security.md
    python bench/injection.py --json     # the same as JSON

Corpora: tests/data/attack_corpus.json and tests/data/benign_facts.json, each
item with a ``split`` fixed before tuning. Every tuning decision (patterns,
the semantic threshold) was made on ``tuning``; ``holdout`` is reported as is.
The semantic layer uses the default embedding model (all-MiniLM-L6-v2, the
one Memory uses) and the prototype bank of walrus_mem._safety.injection; its threshold
is chosen here on the tuning split only (highest detection with no tuning
false positive) and compared with the shipped one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from walrus_mem import safety  # noqa: E402
from walrus_mem._recall.embeddings import embed_checked, make_embedder  # noqa: E402
from walrus_mem._safety import injection, injection_concepts, injection_intents  # noqa: E402
from walrus_mem._safety.prompt_screen import SEMANTIC_THRESHOLDS  # noqa: E402
from walrus_mem._safety.secret_checks import normalised_view  # noqa: E402
from walrus_mem.config import DEFAULT_EMBEDDING_MODEL  # noqa: E402

DATA = ROOT / "tests" / "data"


def _layer_flags(text: str) -> dict[str, bool]:
    """Which text layers fire on ``text`` (each measured alone)."""
    raw = injection._base(text)
    all_views = injection.views(text)
    flags = {
        "patterns (raw view)": any(p.search(raw) for _, p in safety.INJECTION_PATTERNS),
        "lexicons": any(True for v in all_views for _ in injection.lexicon_hits(v)),
        "structural": any(True for v in all_views for _ in injection.structural_cues(v)),
        "concepts": any(True for v in all_views for _ in injection_concepts.concept_hits(v)),
        "intents (session 5)": any(True for v in all_views
                                   for _ in injection_intents.intent_hits(v)),
        "beyond raw patterns": bool(safety.detect_injection(text))
        and not any(p.search(raw) for _, p in safety.INJECTION_PATTERNS),
    }
    flags["all text layers"] = bool(safety.detect_injection(text))
    return flags


def _rate(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    attacks = json.loads((DATA / "attack_corpus.json").read_text(encoding="utf-8"))["payloads"]
    benign = json.loads((DATA / "benign_facts.json").read_text(encoding="utf-8"))["facts"]
    secrets = json.loads((DATA / "secret_formats.json").read_text(encoding="utf-8"))["cases"]
    started = time.perf_counter()
    embedder = make_embedder(DEFAULT_EMBEDDING_MODEL)
    bank = injection.PrototypeBank(lambda texts: embed_checked(embedder, texts, 32))
    texts = [a["text"] for a in attacks] + [b["text"] for b in benign]
    scores = bank.scores(embed_checked(embedder, texts, 32))
    attack_scores, benign_scores = scores[: len(attacks)], scores[len(attacks):]
    report: dict[str, Any] = {"n_attacks": len(attacks), "n_benign": len(benign)}
    # threshold chosen on tuning only: the lowest that flags no tuning benign fact
    tuning_benign = np.array([s for s, b in zip(benign_scores, benign, strict=True)
                              if b["split"] == "tuning"])
    chosen = float(np.nextafter(tuning_benign.max(), 1.0)) if len(tuning_benign) else 1.0
    shipped = SEMANTIC_THRESHOLDS[embedder.model_id]
    report["semantic_threshold"] = {"chosen_on_tuning": round(chosen, 4), "shipped": shipped}
    for split in ("tuning", "holdout"):
        a_idx = [i for i, a in enumerate(attacks) if a["split"] == split]
        b_idx = [i for i, b in enumerate(benign) if b["split"] == split]
        a_layers = [_layer_flags(attacks[i]["text"]) for i in a_idx]
        b_layers = [_layer_flags(benign[i]["text"]) for i in b_idx]
        layers: dict[str, dict[str, float]] = {}
        for name in a_layers[0]:
            layers[name] = {"detection": _rate([f[name] for f in a_layers]),
                            "false_positive": _rate([f[name] for f in b_layers])}
        sem_a = [bool(attack_scores[i] >= shipped) for i in a_idx]
        sem_b = [bool(benign_scores[i] >= shipped) for i in b_idx]
        layers["semantic alone"] = {"detection": _rate(sem_a), "false_positive": _rate(sem_b)}
        combined_a = [f["all text layers"] or s for f, s in zip(a_layers, sem_a, strict=True)]
        combined_b = [f["all text layers"] or s for f, s in zip(b_layers, sem_b, strict=True)]
        layers["all layers (shipped)"] = {"detection": _rate(combined_a),
                                          "false_positive": _rate(combined_b)}
        missed_families: dict[str, int] = {}
        for i, hit in zip(a_idx, combined_a, strict=True):
            if not hit:
                fam = attacks[i]["family"]
                missed_families[fam] = missed_families.get(fam, 0) + 1
        report[split] = {"attacks": len(a_idx), "benign": len(b_idx), "layers": layers,
                         "missed_by_family": missed_families}
    # session 4: a tuning set and a held-out set frozen before the concept layer existed
    for name, path in (("session-4 tuning (in-sample)", "injection_tuning_s4.json"),
                       ("session-4 held-out (frozen before tuning)", "injection_heldout_s4.json")):
        data = json.loads((DATA / path).read_text(encoding="utf-8"))
        atts = [a if isinstance(a, str) else a["text"] for a in data["attacks"]]
        fams = ["" if isinstance(a, str) else a["family"] for a in data["attacks"]]
        bens = list(data["benign"])
        sem = bank.scores(embed_checked(embedder, atts + bens, 32)) >= shipped
        a_layers = [_layer_flags(t) for t in atts]
        b_layers = [_layer_flags(t) for t in bens]
        layers = {key: {"detection": _rate([f[key] for f in a_layers]),
                        "false_positive": _rate([f[key] for f in b_layers])}
                  for key in a_layers[0]}
        layers["semantic alone"] = {"detection": _rate(list(sem[: len(atts)])),
                                    "false_positive": _rate(list(sem[len(atts):]))}
        all_a = [f["all text layers"] or bool(x) for f, x in zip(a_layers, sem, strict=False)]
        all_b = [f["all text layers"] or bool(x)
                 for f, x in zip(b_layers, sem[len(atts):], strict=True)]
        layers["all layers (shipped)"] = {"detection": _rate(all_a),
                                          "false_positive": _rate(all_b)}
        missed: dict[str, int] = {}
        for fam, hit in zip(fams, all_a, strict=True):
            if not hit:
                missed[fam] = missed.get(fam, 0) + 1
        report[name] = {"attacks": len(atts), "benign": len(bens), "layers": layers,
                        "missed_by_family": missed,
                        "benign_flagged": [b for b, f in zip(bens, all_b, strict=True) if f]}
    redacted_benign = [b["text"] for b in benign if safety.redact_secrets(b["text"])[1]]
    stored = 0
    for case in secrets:
        screened = safety.screen_fact(case["text"])
        squash = "".join(case["secret"].split())
        if screened.text is not None and squash in "".join(screened.text.split()):
            stored += 1
    report["secrets"] = {"formats": len({c["format"] for c in secrets}), "stored": stored,
                         "benign_redacted": len(redacted_benign),
                         "benign_redacted_rate": len(redacted_benign) / len(benign)}
    _ = normalised_view
    report["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"threshold chosen on tuning {chosen:.3f}, shipped {shipped:.3f}")
    for split in ("tuning", "holdout", "session-4 tuning (in-sample)",
                  "session-4 held-out (frozen before tuning)"):
        r = report[split]
        print(f"\n{split}: {r['attacks']} attacks, {r['benign']} benign")
        for name, figures in r["layers"].items():
            print(f"  {name:32s} detection {figures['detection']:6.1%}  "
                  f"false positives {figures['false_positive']:5.1%}")
        print(f"  missed by family: {r['missed_by_family']}")
    s = report["secrets"]
    print(f"\nsecrets: {s['formats']} formats, {s['stored']} stored; benign redacted "
          f"{s['benign_redacted']} ({s['benign_redacted_rate']:.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
