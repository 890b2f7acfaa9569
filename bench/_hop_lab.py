"""Issue 26 item 6: multi-hop and open-domain recall without an LLM, leave one conversation out.

Not a benchmark (bench/locomo.py is). Every variant re-ranks the engine's
recall (:func:`bench.locomo.hybrid_rank` over the standalone signals, the
defaults of :data:`walrus_mem._recall.ranking.DEFAULT_PARAMS`) with one idea
added, over a small grid of that idea's own settings whose first point is
"off" (the defaults exactly). For each conversation the grid point with the
best R@5 (categories 1-4) on the *other* conversations is scored on it
(:func:`bench.locomo.leave_one_out`), and the held-out outcomes are compared
with the defaults question by question: the gain is the mean paired
difference of R@5 with its standard error (sd / sqrt(n)), per category.

    python bench/_hop_lab.py /work/shared/data/locomo-dev.json
    python bench/_hop_lab.py PATH --only second-hop,entity-prior
    python bench/_hop_lab.py PATH --baseline      # the defaults, pooled and LOCO over LOCO_GRID

Variants (``VARIANTS``):

* ``second-hop``: the capitalised words (names, places, titles) of the top m
  first hits that the question does not hold and no turn starts with are
  searched again (bm25), and beta x that bm25 is added to each row's keyword
  evidence; the engine's fusion runs again.
* ``neighbour-hop``: rows close to the top m hits (turn-to-turn cosine of their
  stored vectors) inherit gamma x sim x the hit's relevance, like context
  inherits from the turn before (optionally gated by their own cosine).
* ``subject-split``: a question naming two or more people is ranked once per
  person (the subject prior with that name only); the lists are merged
  round-robin or by RRF with the full ranking.
* ``and-split``: "A and B" questions become sub-questions ("Which city have
  Jean visited?", "... John visited?"; or the two clauses), each embedded and
  searched on its own; their rankings and the full one merged by RRF.
* ``entity-prior``: candidates that mention a named thing (a capitalised word
  inside a sentence that is no speaker and not in the question) rank above
  those that do not, like the "when" prior (others x (1 - w)); for what /
  which / where / who questions, or for every question.
* ``short-prior``: turns of fewer than n words ("See ya!") x (1 - w).
* ``noname-dense``: the cosine to the question without its names (the subject
  prior handles the names), mixed alpha : 1 - alpha with the full one.
* ``list-diversity``: for questions asking for a list ("How many ...", "What
  books ...", "Which cities ..."), each earlier hit of the same session scales
  a hit by (1 - lambda), within the top 20.
* ``list-dense``: a separate ``dense_weight`` for those list questions.

Embeddings are the real MiniLM (:class:`bench.locomo.CachedEmbedder`; ``--cache``
sets its file). Results and what was kept: docs/benchmarks.md, "Issue 26 item 6".
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import locomo
from walrus_mem._recall import ranking
from walrus_mem._recall.query_features import QueryFeatures, analyse, candidate_prior, starts_with

PARAMS = ranking.DEFAULT_PARAMS
TOP = 20  # rows kept per question (R@5 is read from them)
CATEGORY_GROUPS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("1-4", (1, 2, 3, 4)), ("1", (1,)), ("2", (2,)), ("3", (3,)), ("4", (4,)), ("5", (5,)))

_CAP = re.compile(r"\b[A-Z][\w'-]*")
_PRONOUNS = frozenset({"i", "i'm", "i've", "i'll", "i'd"})


def body(text: str) -> str:
    """A turn without its "Speaker: " prefix."""
    head, sep, rest = text.partition(": ")
    return rest if sep and len(head) <= 40 else text


def entities(text: str, exclude: frozenset[str] = frozenset()) -> list[str]:
    """Capitalised words *inside* a sentence of ``text`` (not after . ! ? or a quote),
    lower-cased, without "'s", in order, once each: names, places, titles."""
    text = body(text)
    out: list[str] = []
    for m in _CAP.finditer(text):
        before = text[: m.start()].rstrip()
        if not before or before[-1] in '.!?"(':
            continue
        word = m.group(0).lower()
        if word in _PRONOUNS:
            continue
        word = word.split("'")[0]
        if len(word) > 1 and word not in exclude and word not in out:
            out.append(word)
    return out


_LIST_HEAD = re.compile(r"^\W*(?:what|which)\s+(?:(?:kinds?|types?|sorts?)\s+of\s+)?(\w+)\b",
                        re.IGNORECASE)
_NOT_PLURAL = frozenset({"is", "was", "does", "has", "this", "his", "causes", "always"})


def asks_for_list(question: str) -> bool:
    """"How many ...", "What books ...", "Which cities ...", "... both ...": several answers."""
    if re.match(r"^\W*how many\b", question, re.IGNORECASE):
        return True
    m = _LIST_HEAD.match(question)
    if m and m.group(1).lower().endswith("s") and m.group(1).lower() not in _NOT_PLURAL:
        return True
    return re.search(r"\b(?:both|activities|things)\b", question, re.IGNORECASE) is not None


def subqueries(question: str) -> list[str]:
    """"A and B" questions as two: the names A / B in turn, else the two clauses."""
    m = re.search(r"\b([A-Z]\w+) and ([A-Z]\w+)\b", question)
    if m:
        head, tail = question[: m.start()], question[m.end():]
        return [head + m.group(1) + tail, head + m.group(2) + tail]
    if " and " in question:
        left, right = question.split(" and ", 1)
        if len(re.findall(r"\w+", left)) >= 3 and len(re.findall(r"\w+", right)) >= 2:
            return [left.rstrip(",") + "?", right]
    return []


def rrf(lists: Sequence[tuple[float, Sequence[int]]], k0: float, top: int = TOP) -> list[int]:
    """Weighted reciprocal-rank fusion of ranked row lists."""
    score: dict[int, float] = {}
    for weight, rows in lists:
        for rank, row in enumerate(rows):
            score[row] = score.get(row, 0.0) + weight / (k0 + rank)
    return sorted(score, key=lambda row: (-score[row], row))[:top]


# --------------------------------------------------------------------------- the variants


@dataclass
class Lab:
    """The signals of every question plus what a second hop needs (the store, vectors)."""

    sigs: list[locomo.QuestionSignals]
    store: locomo.StandaloneStore
    embedder: locomo.EmbedderLike
    _dense: dict[tuple[str, str], Any] | None = None

    def speakers(self, s: locomo.QuestionSignals) -> frozenset[str]:
        return frozenset(t.partition(":")[0].lower() for t in s.texts)

    def vectors(self, s: locomo.QuestionSignals) -> Any:
        return self.store.namespaces[s.sample_id][1]

    def query_signals(self, s: locomo.QuestionSignals, text: str) -> tuple[Any, dict[int, float]]:
        """Cosine and bm25 of another query text over the question's conversation (cached)."""
        if self._dense is None:
            self._dense = {}
        key = (s.sample_id, text)
        if key not in self._dense:
            qvec = self.embedder.embed([text])[0]
            self._dense[key] = self.store.signals(s.sample_id, text, qvec)
        return self._dense[key]


def prior_for(s: locomo.QuestionSignals, params: ranking.FusionParams,
              features: QueryFeatures) -> locomo.Prior:
    times = s.times if s.times is not None else np.full(len(s.texts), math.nan)

    def of(rows: list[int]) -> dict[int, float] | None:
        factor = candidate_prior(features, [s.texts[i] for i in rows],
                                 lambda: [float(times[i]) for i in rows], params)
        return None if factor is None else dict(zip(rows, factor.tolist(), strict=True))

    return of


def ranked(s: locomo.QuestionSignals, params: ranking.FusionParams = PARAMS, *, k: int = TOP,
           cos: Any = None, lex: dict[int, float] | None = None,
           prior: locomo.Prior | None | str = "question") -> list[tuple[int, float]]:
    """The engine's recall of ``s`` (optionally with other signals or another prior)."""
    return locomo.hybrid_rank(s.cos if cos is None else cos, s.lex if lex is None else lex, k,
                              params, prior=s.prior(params) if prior == "question" else prior)


def rows_of(hits: list[tuple[int, float]]) -> list[int]:
    return [i for i, _ in hits]


def relevance(score: float) -> float:
    """The fused relevance back from the readable score (1 - (1 - r)^2)."""
    return 1.0 - math.sqrt(max(1.0 - score, 0.0))


def with_factor(s: locomo.QuestionSignals, params: ranking.FusionParams,
                factor: Callable[[int], float]) -> locomo.Prior:
    """The question's prior times ``factor(row)`` (for priors like the "when" prior)."""
    base = s.prior(params)

    def of(rows: list[int]) -> dict[int, float]:
        got = (base(rows) if base is not None else None) or {}
        return {i: got.get(i, 1.0) * factor(i) for i in rows}

    return of


def relative(rows_hit: dict[int, bool], w: float) -> Callable[[int], float]:
    """1 for rows that hit, 1 - w for those that do not, when some but not all hit."""
    mixed = any(rows_hit.values()) and not all(rows_hit.values())
    return lambda i: 1.0 if (not mixed or rows_hit.get(i, True)) else 1.0 - w


def second_hop(lab: Lab, s: locomo.QuestionSignals, m: int = 5, beta: float = 0.0) -> list[int]:
    first = rows_of(ranked(s, k=m))
    if beta == 0.0:
        return rows_of(ranked(s))
    exclude = lab.speakers(s) | {w.lower() for w in re.findall(r"\w+", s.question)}
    terms = list(dict.fromkeys(e for i in first for e in entities(s.texts[i], exclude)))[:16]
    match = " OR ".join(f'"{t}"' for t in terms) or None
    extra = lab.store.lexical(s.sample_id, lab.store.informative(s.sample_id, match))
    if not extra:
        return rows_of(ranked(s))
    lex = dict(s.lex)
    for i, v in extra.items():
        lex[i] = lex.get(i, 0.0) + beta * v
    return rows_of(ranked(s, lex=lex))


def neighbour_hop(lab: Lab, s: locomo.QuestionSignals, m: int = 3, gamma: float = 0.0,
                  gate: float = 0.0) -> list[int]:
    hits = ranked(s)
    if gamma == 0.0:
        return rows_of(hits)
    rel = np.zeros(len(s.cos))
    for i, score in hits:
        rel[i] = relevance(score)
    top = rows_of(hits)[:m]
    vecs = lab.vectors(s)
    inherited = (gamma * (vecs @ vecs[top].T) * rel[top][None, :]).max(axis=1)
    inherited[top] = 0.0
    if gate > 0.0:
        inherited *= np.minimum(np.maximum(s.cos, 0.0) / gate, 1.0)
    if s.features.subjects:
        own = np.array([starts_with(t, frozenset(s.features.subjects)) for t in s.texts])
        if own.any():
            inherited[~own] *= 1.0 - PARAMS.subject_weight
    final = np.maximum(rel, inherited)
    return np.argsort(-final, kind="stable")[:TOP].tolist()


def subject_split(lab: Lab, s: locomo.QuestionSignals, how: str = "off",
                  k0: float = 60.0) -> list[int]:
    names = s.features.subjects
    if how == "off" or len(names) < 2:
        return rows_of(ranked(s))
    lists = [rows_of(ranked(s, prior=prior_for(s, PARAMS, replace(s.features, subjects=(n,)))))
             for n in names]
    if how == "round-robin":
        out: list[int] = []
        for tier in zip(*lists, strict=False):
            out += [i for i in tier if i not in out]
        return out[:TOP]
    return rrf([(1.0, rows) for rows in [*lists, rows_of(ranked(s))]], k0)


def and_split(lab: Lab, s: locomo.QuestionSignals, k0: float = 0.0,
              w_full: float = 1.0) -> list[int]:
    subs = subqueries(s.question) if k0 > 0 else []
    full = rows_of(ranked(s))
    if not subs:
        return full
    lists: list[tuple[float, Sequence[int]]] = [(w_full, full)]
    for sub in subs:
        cos, lex = lab.query_signals(s, sub)
        lists.append((1.0, rows_of(ranked(s, cos=cos, lex=lex,
                                          prior=prior_for(s, PARAMS, analyse(sub))))))
    return rrf(lists, k0)


_ASKS_THING = re.compile(r"^\W*(?:what|which|where|who)\b", re.IGNORECASE)


def entity_prior(lab: Lab, s: locomo.QuestionSignals, w: float = 0.0,
                 scope: str = "wh") -> list[int]:
    if w == 0.0 or (scope == "wh" and not _ASKS_THING.match(s.question)):
        return rows_of(ranked(s))
    exclude = lab.speakers(s) | {x.lower() for x in re.findall(r"\w+", s.question)}
    names = {i: bool(entities(t, exclude)) for i, t in enumerate(s.texts)}
    return rows_of(ranked(s, prior=with_factor(s, PARAMS, relative(names, w))))


def short_prior(lab: Lab, s: locomo.QuestionSignals, w: float = 0.0,
                words: int = 6) -> list[int]:
    if w == 0.0:
        return rows_of(ranked(s))
    long = {i: len(re.findall(r"\w+", body(t))) >= words for i, t in enumerate(s.texts)}
    return rows_of(ranked(s, prior=with_factor(s, PARAMS, relative(long, w))))


def noname_dense(lab: Lab, s: locomo.QuestionSignals, alpha: float = 0.0) -> list[int]:
    if alpha == 0.0 or not s.features.subjects:
        return rows_of(ranked(s))
    text = s.question
    for name in s.features.subjects:
        text = re.sub(rf"\b{re.escape(name)}(?:'s)?\b", "", text, flags=re.IGNORECASE)
    cos, _ = lab.query_signals(s, re.sub(r"\s+", " ", text).strip())
    return rows_of(ranked(s, cos=((1 - alpha) * s.cos + alpha * cos).astype(np.float32)))


def list_diversity(lab: Lab, s: locomo.QuestionSignals, lam: float = 0.0) -> list[int]:
    hits = ranked(s)
    if lam == 0.0 or not asks_for_list(s.question):
        return rows_of(hits)
    score = dict(hits)
    pool, out, seen = rows_of(hits), [], Counter[str]()
    while pool:
        best = max(pool, key=lambda i: score[i] * (1 - lam) ** seen[s.hit_ids[i][0].split(":")[0]])
        out.append(best)
        pool.remove(best)
        seen[s.hit_ids[best][0].split(":")[0]] += 1
    return out


def list_dense(lab: Lab, s: locomo.QuestionSignals, dense_weight: float = 0.5) -> list[int]:
    if not asks_for_list(s.question):
        return rows_of(ranked(s))
    return rows_of(ranked(s, replace(PARAMS, dense_weight=dense_weight)))


Variant = Callable[..., list[int]]
VARIANTS: dict[str, tuple[Variant, list[dict[str, Any]]]] = {
    "second-hop": (second_hop, [{"beta": 0.0}] + [{"m": m, "beta": b} for m in (3, 5)
                                                  for b in (0.1, 0.25, 0.5)]),
    "neighbour-hop": (neighbour_hop, [{"gamma": 0.0}] + [
        {"m": m, "gamma": g, "gate": gate} for m in (1, 3, 5) for g in (0.5, 0.7, 0.9)
        for gate in (0.0, 0.4)]),
    "subject-split": (subject_split, [{"how": "off"}, {"how": "round-robin"}] + [
        {"how": "rrf", "k0": k0} for k0 in (5.0, 20.0, 60.0)]),
    "and-split": (and_split, [{"k0": 0.0}] + [
        {"k0": k0, "w_full": w} for k0 in (1.0, 5.0, 20.0, 60.0) for w in (1.0, 2.0)]),
    "entity-prior": (entity_prior, [{"w": 0.0}] + [{"w": w, "scope": sc} for sc in ("wh", "all")
                                                   for w in (0.1, 0.2, 0.3)]),
    "short-prior": (short_prior, [{"w": 0.0}] + [{"w": w, "words": n} for w in (0.1, 0.2, 0.3)
                                                 for n in (4, 6, 8)]),
    "noname-dense": (noname_dense, [{"alpha": a} for a in (0.0, 0.25, 0.5, 1.0)]),
    "list-diversity": (list_diversity, [{"lam": x} for x in (0.0, 0.1, 0.2, 0.3, 0.5)]),
    "list-dense": (list_dense, [{"dense_weight": x} for x in (0.5, 0.3, 0.4, 0.6, 0.7)]),
}


# --------------------------------------------------------------------------- measuring


def outcomes(lab: Lab, fn: Variant, **settings: Any) -> list[locomo.Outcome]:
    return [s.outcome(fn(lab, s, **settings)) for s in lab.sigs]


def r5(o: locomo.Outcome) -> float:
    return locomo.evidence_recall(o.retrieved, o.evidence, 5)


@dataclass(frozen=True)
class Row:
    label: str
    r5: dict[str, float]  # category group -> R@5
    gain: dict[str, tuple[float, float]]  # category group -> (paired gain, its SE)


def compare(label: str, before: Sequence[locomo.Outcome], after: Sequence[locomo.Outcome]) -> Row:
    r, g = {}, {}
    for name, cats in CATEGORY_GROUPS:
        got = [r5(o) for o in after if o.category in cats]
        r[name] = float(np.mean(got)) if got else math.nan
        g[name] = locomo.paired_gain(before, after, categories=cats)
    return Row(label, r, g)


def format_row(row: Row) -> str:
    return f"{row.label:<44}" + "".join(
        f"{row.r5[n]:>7.3f} {row.gain[n][0]:+.3f}±{row.gain[n][1]:.3f}" for n, _ in CATEGORY_GROUPS)


def run_variant(lab: Lab, name: str, base: Sequence[locomo.Outcome],
                verbose: bool = True) -> tuple[Row, dict[str, dict[str, Any]]]:
    """The variant's grid pooled (printed) and its leave-one-conversation-out row."""
    fn, grid = VARIANTS[name]
    per_point = [outcomes(lab, fn, **settings) for settings in grid]
    if verbose:
        for settings, got in zip(grid, per_point, strict=True):
            print(format_row(compare(f"  pooled {settings}", base, got)))
    loco = locomo.leave_one_out(per_point)
    return compare(f"{name}: LOCO", base, loco.outcomes), {
        conv: grid[j] for conv, j in loco.picks.items()}


def baseline(path: Path, cache: Path | None) -> None:
    """The defaults pooled and leave-one-conversation-out over LOCO_GRID, per category."""
    convs = locomo.load_locomo(path)
    sigs = locomo.question_signals(convs, locomo.CachedEmbedder(cache))
    pooled = locomo.summarize(locomo.rank_all(sigs, PARAMS))
    loco = locomo.leave_one_out([locomo.rank_all(sigs, p)
                                 for p in locomo.grid_points(locomo.LOCO_GRID)])
    print(locomo.format_side_by_side(pooled, locomo.summarize(loco.outcomes)))


def load(path: Path, cache: Path | None,
         embedder: locomo.EmbedderLike | None = None) -> Lab:
    """The signals of every question of ``path`` (the real MiniLM unless ``embedder``)."""
    embedder = embedder if embedder is not None else locomo.CachedEmbedder(cache)
    convs = locomo.load_locomo(path)
    sigs = locomo.question_signals(convs, embedder)
    store = locomo.StandaloneStore()
    for conv in convs:
        texts = [d.text for d in conv.documents()]
        store.add(conv.sample_id, texts, embedder.embed(texts))
    return Lab(sigs, store, embedder)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--only", default="", help="comma-separated variant names")
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache file")
    parser.add_argument("--baseline", action="store_true",
                        help="the defaults, pooled and LOCO over bench.locomo.LOCO_GRID")
    args = parser.parse_args(argv)
    if args.baseline:
        baseline(args.path, args.cache)
        return 0
    lab = load(args.path, args.cache)
    base = outcomes(lab, lambda lab, s: rows_of(ranked(s)))
    print(f"{'R@5 (paired gain ± SE vs defaults)':<44}"
          + "".join(f"{n:>22}" for n, _ in CATEGORY_GROUPS))
    print(format_row(compare("defaults", base, base)))
    wanted = [n for n in args.only.split(",") if n] or list(VARIANTS)
    for name in wanted:
        started = time.perf_counter()
        row, picks = run_variant(lab, name, base)
        print(format_row(row))
        print(f"  picked: {picks}  ({time.perf_counter() - started:.0f} s)", flush=True)
    if isinstance(lab.embedder, locomo.CachedEmbedder):
        lab.embedder.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
