"""Variants of the learned injection screen's joint model, measured as train_injection
chooses thresholds (issue 26 item 1: what was tried and why the shipped model stays).

    python bench/injection_variants.py            # about 15-25 minutes on two busy cores

Rows, vectors and the threshold rule are bench/train_injection.py's: every variant is
fitted on four fifths of the training rows and its threshold is the lowest that flags
at most 1 % of each benign group of the calibration fifth (split by a hash of the
text). Not refitted afterwards, so each threshold belongs to the weights it was chosen
for. Scores read the whole text (no 600-character windows): a few long rows differ
from what the screen would run. Reported on the held-out rows only (never fitted,
never used for a threshold), alone and together with the rules (detect_injection
without the learned layer, what the screen adds the model to).

The ``oracle`` lines are a diagnosis, not a candidate: the threshold is set on the
held-out rows themselves, as low as it can go while adding no benign flag beyond the
rules on the memory-style held-out halves and LoCoMo and at most one on bastioncorpus.
They show what each variant could give at the operating point the project needs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import safety as bench_safety  # noqa: E402
import train_injection as ti  # noqa: E402

MEMORY_STYLE = {"memory_s26", "corpus_s13", "injection_corpus", "heldout_s4", "heldout_s5",
                "spaced_heldout_s5", "hard_negatives_s26"}
C = 64.0
SEEDS = (0, 1, 2)


class Data:
    def __init__(self) -> None:
        data = ROOT.parent / "shared" / "data"
        public, _ = ti._public(data)
        self.rows = (public + ti._memory() + ti._chat() + ti._locomo(data)
                     + bench_safety.bastion())
        rows = self.rows
        self.v = ti._embed([r.text for r in rows])
        self.x = ti._matrix([r.text for r in rows]).tocsr()
        self.y = np.array([r.label for r in rows])
        self.corpus = np.array([r.corpus for r in rows])
        self.group = np.array([ti._group(r) for r in rows])
        train = np.array([r.split == "train" for r in rows])
        self.eval = ~train
        self.calib = train & np.array([ti._is_calibration(r.text) for r in rows])
        self.fit = train & ~self.calib
        self.weight = np.array([ti._weight(r) for r in rows])
        self.rules = np.array([bool(bench_safety.family_hits(r.text)) if r.split == "eval"
                               else False for r in rows])


def _lr(d: Data, mask: np.ndarray, x: Any, weight: np.ndarray) -> Any:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=C, solver="liblinear", max_iter=3000,
                               class_weight="balanced", random_state=0)
    return model.fit(x[mask], d.y[mask], sample_weight=weight[mask])


def joint_lr(d: Data, weight: np.ndarray | None = None) -> np.ndarray:
    from scipy.sparse import csr_matrix, hstack

    x = hstack([d.x, csr_matrix(d.v)]).tocsr()
    return np.asarray(_lr(d, d.fit, x, d.weight if weight is None else weight)
                      .decision_function(x))


def network(d: Data) -> np.ndarray:
    """Three one-hidden-layer networks (256 ReLU) on [embedding, n-gram margin / 4],
    the margin out-of-fold on the fitted rows; their logits averaged."""
    from sklearn.neural_network import MLPClassifier

    margin = np.zeros(len(d.rows))
    fit = np.where(d.fit)[0]
    fold = np.random.RandomState(0).randint(0, 5, len(fit))
    for k in range(5):
        mask = np.zeros(len(d.rows), bool)
        mask[fit[fold != k]] = True
        margin[fit[fold == k]] = _lr(d, mask, d.x, d.weight).decision_function(
            d.x[fit[fold == k]])
    rest = ~d.fit
    margin[rest] = _lr(d, d.fit, d.x, d.weight).decision_function(d.x[rest])
    features = np.hstack([d.v, (margin / 4.0)[:, None]]).astype(np.float32)
    weight = d.weight.copy()
    for label in (0, 1):  # both classes weigh the same in total
        weight[d.y == label] *= 0.5 * d.weight[d.fit].sum() / d.weight[
            d.fit & (d.y == label)].sum()
    logits = []
    for seed in SEEDS:
        net = MLPClassifier(hidden_layer_sizes=(256,), alpha=1e-3, max_iter=200,
                            random_state=seed)
        net.fit(features[d.fit], d.y[d.fit], sample_weight=weight[d.fit])
        p = np.clip(net.predict_proba(features)[:, 1], 1e-7, 1 - 1e-7)
        logits.append(np.log(p) - np.log1p(-p))
    return np.asarray(np.mean(logits, axis=0))


def calibrated_cut(d: Data, scores: np.ndarray) -> tuple[float, dict[str, float]]:
    """train_injection's rule: at most 1 % of each calibration benign group flagged."""
    attacks = scores[d.calib & (d.y == 1)]
    cut, recall = -np.inf, {}
    for group in sorted(set(d.group[d.calib & (d.y == 0)])):
        ranked = np.sort(scores[d.calib & (d.y == 0) & (d.group == group)])[::-1]
        allowed = int(ti.FP_TARGET * len(ranked))
        if allowed < len(ranked):
            at = float(np.nextafter(ranked[allowed], np.inf))
            recall[str(group)] = round(float(np.mean(attacks >= at)), 3)
            cut = max(cut, at)
    return cut, recall


def oracle_cut(d: Data, scores: np.ndarray) -> float:
    memory = d.eval & np.isin(d.corpus, list(MEMORY_STYLE)) & (d.y == 0) & ~d.rules
    locomo = d.eval & (d.corpus == "locomo_heldout")
    bastion = d.eval & (d.corpus == "bastion_mit") & (d.y == 0)
    limits = [scores[memory].max(), scores[locomo].max()]
    if bastion.sum() > 1:
        limits.append(np.sort(scores[bastion])[-2])
    return float(np.nextafter(max(limits), np.inf))


def report(d: Data, name: str, scores: np.ndarray, cut: float) -> None:
    flag = scores >= cut
    cells = []
    for corpus in ("slabs", "neuralchemy", "bastion_mit", "multilingual_s26"):
        m = d.eval & (d.corpus == corpus)
        a, b = m & (d.y == 1), m & (d.y == 0)
        both = flag | d.rules
        cells.append(f"{corpus[:11]} {100 * flag[a].mean():.1f}/{100 * flag[b].mean():.1f}"
                     f" [{100 * both[a].mean():.1f}/{100 * both[b].mean():.1f}]")
    m = d.eval & np.isin(d.corpus, list(MEMORY_STYLE))
    a, b = m & (d.y == 1), m & (d.y == 0)
    cells.append(f"memory-style A {flag[a].sum()}/{a.sum()} B {flag[b].sum()}/{b.sum()} "
                 f"(beyond rules {(flag & ~d.rules)[b].sum()})")
    for corpus in ("chat_bsd", "locomo_heldout"):
        b = d.eval & (d.corpus == corpus)
        cells.append(f"{corpus} B {flag[b].sum()}/{b.sum()}")
    print(f"{name}\n    " + "\n    ".join(cells), flush=True)


def binding_rows(d: Data, scores: np.ndarray, group: str, n: int = 6) -> None:
    idx = np.where(d.calib & (d.y == 0) & (d.group == group))[0]
    idx = idx[np.argsort(-scores[idx])]
    print(f"highest-scoring calibration benign rows of {group} ({len(idx)}; 1 % = "
          f"{int(ti.FP_TARGET * len(idx))} may score above the threshold):")
    for i in idx[:n]:
        print(f"    {scores[i]:6.2f}  {d.rows[i].text[:110]!r}")


def main() -> None:
    started = time.time()
    d = Data()
    lr = joint_lr(d)
    weight = d.weight.copy()
    weight[(d.y == 0) & (d.group == "neuralchemy")] *= 4.0
    variants = {"joint LR (the shipped kind, not refitted)": lr,
                "joint LR, neuralchemy benign rows weighted 4x": joint_lr(d, weight)}
    net = network(d)
    variants["network: 3 x MLP(256) on [embedding, n-gram margin]"] = net
    variants["0.7 joint LR + 0.3 network (logits)"] = 0.7 * lr + 0.3 * net
    print("attacks / benign flagged in %, [with the rules]\n")
    for name, scores in variants.items():
        cut, recall = calibrated_cut(d, scores)
        report(d, f"{name}: threshold {cut:.2f}, calibration recall per group {recall}",
               scores, cut)
        report(d, f"  oracle threshold {oracle_cut(d, scores):.2f}", scores,
               oracle_cut(d, scores))
    binding_rows(d, lr, "neuralchemy")
    print(f"\n{time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
