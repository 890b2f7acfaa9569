"""Hybrid recall ranking: FTS5 query building and dense + lexical score fusion.

The engine gathers candidates (ANN neighbours plus FTS5 matches), computes the
exact cosine similarity of every candidate and SQLite's bm25 for those that
match :func:`fts_query`, then calls :func:`fuse_arrays` to order them (and, for
conversational context, :func:`successor_keys` + :func:`fuse_arrays` once
more). :func:`fuse` and :func:`context_keys` are the same for lists of
:class:`Candidate`.

The score scale (what ``min_score`` and agent ``min_relevance`` cut on)
-----------------------------------------------------------------------
Every hit gets a score in [0, 1]::

    cos       = max(cosine, 0)
    keywords  = bm25 / max(best bm25 among the candidates, lexical_floor)    (0: no match)
    own       = w * cos + (1 - w) * keywords * min(cos / lexical_gate, 1)
    inherited = context_weight * max(own(previous memories)) * min(cos / context_gate, 1)
    relevance = max(own, inherited) * recency factor * importance factor * prior
    score     = readable(relevance) = 1 - (1 - relevance)**2

* ``w = dense_weight = 0.5``: meaning and keywords count equally in the
  relevance; a strong keyword match adds up to 0.5.
* ``readable`` is strictly increasing, so it changes no ranking; it only makes
  the number read like a similarity: a hit found by meaning alone scores
  about its cosine (0.3 -> 0.28, 0.55 -> 0.47, 0.8 -> 0.64) instead of half of
  it, and unrelated hits stay low (cosine 0.1 -> 0.10).
* ``keywords`` is bm25 relative to the best keyword match of this query, so
  rankings do not depend on corpus size; ``lexical_floor`` (12, two or three
  distinctive words) keeps a weak best match, such as one shared word in a
  small namespace, from counting as a full one.
* The keyword gate: keyword overlap counts fully only when the texts are at
  least loosely related (cosine >= 0.2). "What did the earnings report *say*?"
  must not match "Anything you want to *say*?" at 0.5.
* Conversational context: a memory written right after another one in the
  same namespace (consecutive catalog keys, created within
  ``context_window_s``) inherits ``context_weight`` (0.8) of that memory's
  relevance when that is higher than its own; the "previous memories" are
  the ``context_depth`` (2) written just before it, so in a two-person
  conversation a turn also inherits from its speaker's previous turn.
  Answers follow questions: "What concert was it?" -> "It was Matt
  Patterson!". The inheritance is gated by
  the memory's *own* cosine like keywords are (full from ``context_gate`` =
  0.4): an unrelated fact remembered right after a relevant one ("We deploy
  the billing service on Fridays", cosine 0.005 to "what does Ana do for a
  living") inherits almost nothing. The inherited part is below its source,
  so the source stays ranked above.
* Recency and importance are multiplicative and off by default: with weight
  ``r`` a relevance is scaled by ``1 - r * (1 - recency)``, where recency
  halves every ``recency_half_life_days``; the same shape for importance in
  [0, 1]. They can only lower a score, so an irrelevant memory never climbs.
* The prior (:mod:`walrus_mem._recall.query_features`) is 1 unless the query names
  someone or a time: then the candidates that do not start with the name
  are scaled by ``1 - subject_weight``, those whose own date misses the
  time by ``1 - time_weight``, and for a "when" question those that mention
  no time by ``1 - when_weight``. It too only lowers scores.

Defaults were chosen on LoCoMo (bench/locomo.py, figures in
docs/benchmarks.md): ``dense_weight``, ``context_weight`` and
``lexical_floor`` hold up when tuned on one conversation and tested on the
other; the gates cost nothing there and keep unrelated facts low.
:data:`DEFAULT_MIN_SCORE` is calibrated on labelled agent-memory cases
(tests/data/relevance_pairs.json).
"""

from __future__ import annotations

import contextlib
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError

__all__ = [
    "CLEAR_WINNER_FLOOR",
    "CLEAR_WINNER_RATIO",
    "DEFAULT_MIN_SCORE",
    "STRONG_HIT_COSINE",
    "DEFAULT_PARAMS",
    "FTS_TOKENIZE",
    "Candidate",
    "Fused",
    "FusionParams",
    "Scores",
    "context_keys",
    "fts_query",
    "fuse",
    "fuse_arrays",
    "fused_order",
    "readable",
    "successor_keys",
]

FTS_TOKENIZE: Final = "porter unicode61 remove_diacritics 2"
"""Tokenizer spec for the engine's FTS5 table (``tokenize=...``).

Porter stemming lifts bm25 alone from R@5 0.51 to 0.54 on LoCoMo ("painted"
matches "paint")."""

_WORD: Final = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS: Final = 32

# English function words plus question words: they carry no topic, and in a
# question ("When did Caroline go ...?") they only add noise to bm25.
_STOPWORDS: Final = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t d ll m re ve don
    """.split()
)


def fts_query(text: str) -> str | None:
    """Build a safe FTS5 MATCH expression from free user text.

    Words (Unicode ``\\w+`` runs, lower-cased, NFC) become double-quoted FTS5
    strings, so quotes, ``AND``/``OR``/``NOT``/``NEAR``, column filters, ``^``
    and prefix stars in the user's text are plain words, never syntax.
    Stopwords and repeats are dropped, at most 32 terms are kept, and the terms
    are OR-joined (bm25 rewards rows matching more and rarer terms). Returns
    ``None`` when no usable term remains. Never raises.
    """
    terms: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(unicodedata.normalize("NFC", text).lower()):
        if word in _STOPWORDS or word in seen:
            continue
        seen.add(word)
        terms.append(f'"{word}"')  # \w+ holds no '"', so no escaping is needed
        if len(terms) >= _MAX_TERMS:
            break
    return " OR ".join(terms) if terms else None


@dataclass(frozen=True, slots=True)
class Candidate:
    """One recall candidate with its raw signals.

    ``key`` is the catalog key (allocated in write order). ``dense`` is the
    cosine similarity in [-1, 1]; ``lexical`` is ``-bm25`` (higher is better,
    ``None`` when the row does not match the FTS query); ranks are 0-based
    positions in each candidate list, ``None`` if absent. ``created_at`` is a
    POSIX timestamp; ``importance`` is in [0, 1].
    """

    key: int
    dense: float | None
    lexical: float | None
    dense_rank: int | None
    lexical_rank: int | None
    created_at: float
    importance: float


MAX_CONTEXT_DEPTH: Final = 16


@dataclass(frozen=True)
class FusionParams:
    """Knobs of :func:`fuse` (see the module docstring for the formula)."""

    dense_weight: float = 0.5
    """Share of cosine in a memory's own relevance; the rest is keyword evidence."""
    lexical_floor: float = 12.0
    """bm25 a best keyword match must reach to count fully (two or three distinctive words)."""
    lexical_gate: float = 0.2
    """Cosine from which keyword evidence counts fully; below, in proportion (0 = no gate)."""
    context_weight: float = 0.8
    """Share of the previous memory's relevance a memory may inherit (0 = off)."""
    context_gate: float = 0.4
    """Cosine from which a memory inherits context fully; below, in proportion (0 = no gate)."""
    context_window_s: float = 3600.0
    """Consecutive memories created further apart than this are not context."""
    context_expand: int = 20
    """How many top hits :func:`context_keys` asks the engine to add successors for."""
    context_depth: int = 2
    """How many memories back a memory may inherit from (1 = only the one just before)."""
    subject_weight: float = 0.25
    """When the query names someone and some candidates start with that name ("Ana: ...",
    "Ana works ..."), the others' relevance is scaled by ``1 - subject_weight`` (0 = off)."""
    time_weight: float = 0.5
    """When the query names a time ("in May 2023") and some candidates' own dates match it,
    the others' relevance is scaled by ``1 - time_weight`` (0 = off;
    :mod:`walrus_mem._recall.temporal`)."""
    when_weight: float = 0.3
    """When the query asks when ("When did ...?") and some candidates mention a time
    ("yesterday", "last week", ...), the others' relevance is scaled by ``1 - when_weight``."""
    recency_weight: float = 0.0
    """0 = off; at 1 an old memory's score decays fully with age."""
    recency_half_life_days: float = 30.0
    importance_weight: float = 0.0
    """0 = off; at 1 a memory of importance 0 scores 0."""

    def __post_init__(self) -> None:
        for name in ("dense_weight", "context_weight", "recency_weight", "importance_weight",
                     "subject_weight", "time_weight", "when_weight"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:  # also rejects NaN
                raise ConfigError(f"FusionParams.{name} must be in [0, 1], got {value!r}")
        for name in (
            "lexical_floor", "lexical_gate", "context_gate", "context_window_s",
            "recency_half_life_days",
        ):
            value = getattr(self, name)
            if not value >= 0.0:
                raise ConfigError(f"FusionParams.{name} must be >= 0, got {value!r}")
        if self.recency_half_life_days == 0.0:
            raise ConfigError("FusionParams.recency_half_life_days must be > 0")
        for name in ("context_expand", "context_depth"):
            if getattr(self, name) < 0:
                raise ConfigError(f"FusionParams.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.context_depth > MAX_CONTEXT_DEPTH:  # each step is a pass over the candidates
            raise ConfigError(f"FusionParams.context_depth must be <= {MAX_CONTEXT_DEPTH}, "
                              f"got {self.context_depth!r}")


DEFAULT_PARAMS: Final = FusionParams()

DEFAULT_MIN_SCORE: Final = 0.25
"""Cutoff applied by recall when ``min_score=None``, and agents' default ``min_relevance``.

0.25 is what a memory found by meaning alone scores at cosine 0.27. Calibrated
with the real MiniLM model on 50 (prompt, relevant fact) pairs sharing few
keywords and 45 prompts no stored fact answers (tests/data/relevance_pairs.json,
tests/test_relevance_calibration.py): it is the lowest cutoff that drops at
least 80 % of the unrelated prompts' best hits (82 %), and it keeps 84 % of the
relevant facts in the top 5 (92 % are in the top 5 at all). On LoCoMo it keeps
every evidence hit found in the top 20 (docs/benchmarks.md)."""

CLEAR_WINNER_FLOOR: Final = 0.15
"""Auto-recall injects a top hit under ``min_relevance`` when it scores at least this
and :data:`CLEAR_WINNER_RATIO` times the runner-up (agents' ``clear_winner_floor``).

One memory that stands out is the answer: README's "What should I order for lunch
today?" scores 0.246 against the peanut allergy, 0.038 against the next fact. The most
conservative values that change nothing on the tuning half of
tests/data/relevance_pairs.json (bench/relevance_cutoff.py, docs/benchmarks.md)."""

CLEAR_WINNER_RATIO: Final = 2.5
"""How far the top hit must stand above the runner-up to be a clear winner
(agents' ``clear_winner_ratio``)."""

STRONG_HIT_COSINE: Final = 0.55
"""A hit whose cosine to the prompt is at least this is injected even when the query gate
rejects the prompt (agents' ``strong_relevance``): the gate judges the prompt, and a hit
this close in meaning is itself the evidence that memory answers it. "When is the v2
launch?" has cosine 0.65 (score 0.63) to "We decided to ship the v2 API on March 3." and
the gate alone dropped it. The cosine, not the fused score: on LoCoMo turns prompts no
memory answers reach scores of 0.6-0.7 through one shared word ("Como faço um loop for em
Go?" -> "Go get 'em, Jon!", score 0.63, cosine 0.17), cosines of at most 0.53. Chosen on
the dev half of bench/recall_gate.py (figures in docs/benchmarks.md)."""


@dataclass(frozen=True, slots=True)
class Scores:
    """Final score and the components it was made of.

    ``score`` is on the readable scale (:func:`readable`). ``dense`` is the raw
    cosine (``None`` if unknown); ``lexical`` is the normalised keyword score
    in [0, 1] (``None`` if the memory did not match); ``context`` is the score
    inherited from the previous memory, on the same scale as ``score`` and
    before recency and importance (0 if none); ``recency`` and ``importance``
    are the factors' inputs in [0, 1].
    """

    score: float
    dense: float | None
    lexical: float | None
    recency: float
    importance: float
    context: float = 0.0


def _clip01(x: float) -> float:
    """x clamped to [0, 1]; NaN -> 0."""
    if 0.0 <= x <= 1.0:
        return x
    return 1.0 if x > 1.0 else 0.0


_LN2: Final = math.log(2.0)


def readable(relevance: float) -> float:
    """The score shown for an internal relevance in [0, 1]: ``1 - (1 - r)**2``.

    Strictly increasing on [0, 1] (rankings are those of the relevance), 0 and
    1 fixed, slope 2 at 0: a hit found by meaning only (relevance = half its
    cosine) scores close to its cosine (0.55 -> 0.47) instead of half of it.
    Out-of-range input is clamped; NaN gives 0.
    """
    r = _clip01(relevance)
    return r * (2.0 - r)


@dataclass(frozen=True, slots=True)
class Fused:
    """:func:`fuse_arrays` output: per-candidate arrays (input positions) and the order.

    ``lexical`` is the normalised keyword score (NaN: no match); ``score`` and
    ``context`` are on the readable scale; ``order`` lists input positions
    best first (ties: lower key first).
    """

    order: npt.NDArray[np.intp]
    score: npt.NDArray[np.float64]
    lexical: npt.NDArray[np.float64]
    context: npt.NDArray[np.float64]
    recency: npt.NDArray[np.float64]
    importance: npt.NDArray[np.float64]


def _clip01_array(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Elementwise :func:`_clip01` (NaN -> 0)."""
    return np.fmin(np.fmax(x, 0.0), 1.0)  # fmax/fmin drop NaN in favour of the bound


def _quiet(params: FusionParams) -> contextlib.AbstractContextManager[object]:
    """Extreme parameters (a subnormal gate) overflow to inf and 0 * inf to NaN, which
    the clamps turn into 0 or 1: no warning wanted for that. Other parameters raise
    none, and entering np.errstate costs a few microseconds a recall."""
    for gate in (params.lexical_gate, params.context_gate):
        if gate != 0.0 and math.isinf(1.0 / gate):
            return np.errstate(all="ignore")
    return contextlib.nullcontext()


def fuse_arrays(
    keys: npt.NDArray[np.int64],
    dense: npt.NDArray[np.float64],
    lexical: npt.NDArray[np.float64],
    created_at: npt.NDArray[np.float64],
    importance: npt.NDArray[np.float64],
    params: FusionParams = DEFAULT_PARAMS,
    *,
    now: float,
    prior: npt.NDArray[np.float64] | None = None,
) -> Fused:
    """The fusion of the module docstring over candidate arrays (NaN: signal missing).

    ``prior`` (per candidate, in [0, 1]; default 1) scales each relevance like
    recency and importance do: the query-understanding factors of
    :func:`walrus_mem._recall.query_features.candidate_prior`. ``keys`` must be distinct.
    The engine calls this on every recall; it costs
    a few dozen numpy operations whatever the candidate count, where a
    per-candidate Python loop cost several microseconds per candidate.
    :func:`fuse` is the same computation for :class:`Candidate` lists.
    """
    with _quiet(params):
        relevance, context, has_lexical, lex_or_0, sorter = _relevance(keys, dense, lexical,
                                                                       created_at, params)
        recency = _recency(created_at, params, now)
        importance = _clip01_array(importance)
        score = _score(relevance, recency, importance, params, prior)
        context = _clip01_array(context)
        context = context * (2.0 - context)
        lex = np.where(has_lexical, lex_or_0, np.nan)
        return Fused(_order(keys, score, sorter), score, lex, context, recency, importance)


def fused_order(
    keys: npt.NDArray[np.int64],
    dense: npt.NDArray[np.float64],
    lexical: npt.NDArray[np.float64],
    created_at: npt.NDArray[np.float64],
    importance: npt.NDArray[np.float64],
    params: FusionParams = DEFAULT_PARAMS,
    *,
    now: float,
    prior: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.intp]:
    """``fuse_arrays(...).order`` alone, with the same floats: what the engine needs to
    pick the top hits whose successors join before the final fusion."""
    with _quiet(params):
        relevance, _, _, _, sorter = _relevance(keys, dense, lexical, created_at, params)
        recency = _recency(created_at, params, now) if params.recency_weight else relevance
        if params.importance_weight:
            importance = _clip01_array(importance)
        return _order(keys, _score(relevance, recency, importance, params, prior), sorter)


def _order(keys: npt.NDArray[np.int64], score: npt.NDArray[np.float64],
           sorter: npt.NDArray[np.intp] | None) -> npt.NDArray[np.intp]:
    """Positions best first, ties by lower key: ``np.lexsort((keys, -score))``, or a
    stable sort of the scores in key order when that order is known (one sort, not two)."""
    if sorter is None:
        order: npt.NDArray[np.intp] = np.lexsort((keys, -score))
        return order
    by_score: npt.NDArray[np.intp] = sorter[(-score[sorter]).argsort(kind="stable")]
    return by_score


def _relevance(
    keys: npt.NDArray[np.int64],
    dense: npt.NDArray[np.float64],
    lexical: npt.NDArray[np.float64],
    created_at: npt.NDArray[np.float64],
    params: FusionParams,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_],
           npt.NDArray[np.float64], npt.NDArray[np.intp] | None]:
    """Relevance, inherited context (both before the factors), which candidates matched
    keywords, their keyword score (0: none), and the key order when it was needed.
    Written for few numpy calls (each costs ~1 us on ~100 candidates, whatever the
    work): the same floats as the formula."""
    has_lexical = lexical == lexical  # not NaN
    best_lexical = float(np.fmax.reduce(lexical, initial=0.0))  # NaN ignored
    scale = max(best_lexical, params.lexical_floor, 1e-12)
    lex_or_0 = _clip01_array(lexical / scale)  # NaN -> 0
    # a missing cosine counts as 0 (no evidence of meaning), which also gates keywords
    cosine = _clip01_array(dense)
    w_dense = params.dense_weight
    w_lex = 1.0 - w_dense
    if params.lexical_gate == 0.0:
        own = w_dense * cosine + w_lex * lex_or_0
    else:
        gate = np.minimum(cosine * (1.0 / params.lexical_gate), 1.0)
        own = w_dense * cosine + w_lex * lex_or_0 * gate

    context = _NO_CONTEXT
    sorter: npt.NDArray[np.intp] | None = None
    if params.context_weight > 0.0 and len(keys) > 1 and params.context_depth > 0:
        # keys are distinct: some candidate has a previous one among them only if two
        # sorted keys lie within the depth (often none before the successors join)
        sorter = keys.argsort(kind="stable")
        ordered = keys[sorter]
        if np.count_nonzero(ordered[1:] - ordered[:-1] <= params.context_depth):
            context = _inherited(sorter, ordered, created_at, own, cosine, params)
    if context is _NO_CONTEXT:  # own, not where(own >= 0, own, 0): they differ on NaN
        # only (extreme gates), which the score's clamp turns into 0 either way
        return own, np.zeros(len(keys)), has_lexical, lex_or_0, sorter
    relevance = np.where(own >= context, own, context)
    return relevance, context, has_lexical, lex_or_0, sorter


_NO_CONTEXT: Final = np.zeros(0)


def _inherited(sorter: npt.NDArray[np.intp], ordered: npt.NDArray[np.int64],
               created_at: npt.NDArray[np.float64], own: npt.NDArray[np.float64],
               cosine: npt.NDArray[np.float64], params: FusionParams) -> npt.NDArray[np.float64]:
    """What each candidate inherits from its previous memories among the candidates.

    In key order, with distinct keys, ``key - 1 ... key - depth`` can only sit at the
    ``depth`` places before ``key``: one shifted comparison per place instead of a
    search. ``fmax`` from 0 keeps the best of them in any order (NaN ignored)."""
    depth = params.context_depth
    made = created_at[sorter]
    owned = own[sorter]
    best = np.zeros(len(ordered))
    for back in range(1, min(depth, len(ordered) - 1) + 1):
        close = (ordered[back:] - ordered[:-back] <= depth) & (
            np.abs(made[back:] - made[:-back]) <= params.context_window_s)
        best[back:] = np.where(close, np.fmax(best[back:], owned[:-back]), best[back:])
    if not np.count_nonzero(best):  # best >= 0 (fmax from 0): nothing to inherit
        return _NO_CONTEXT
    # gated by this memory's own cosine, like keywords: an unrelated fact
    # written right after a relevant one inherits (almost) nothing
    inherited = np.empty(len(ordered))
    inherited[sorter] = params.context_weight * best
    if params.context_gate != 0.0:
        inherited = inherited * np.minimum(cosine * (1.0 / params.context_gate), 1.0)
    return inherited


def _recency(created_at: npt.NDArray[np.float64], params: FusionParams,
             now: float) -> npt.NDArray[np.float64]:
    # future timestamps and NaN count as brand new (fmax drops NaN in favour of 0)
    age = np.fmax(now - created_at, 0.0)
    recency: npt.NDArray[np.float64] = np.exp(
        -(_LN2 / (params.recency_half_life_days * 86400.0)) * age)
    return recency


def _score(relevance: npt.NDArray[np.float64], recency: npt.NDArray[np.float64],
           importance: npt.NDArray[np.float64], params: FusionParams,
           prior: npt.NDArray[np.float64] | None) -> npt.NDArray[np.float64]:
    """The readable score: relevance times the factors, clamped."""
    score = relevance
    if params.recency_weight:
        score = score * (1.0 - params.recency_weight * (1.0 - recency))
    if params.importance_weight:
        score = score * (1.0 - params.importance_weight * (1.0 - importance))
    if prior is not None:
        score = score * _clip01_array(prior)
    score = _clip01_array(score)
    readable: npt.NDArray[np.float64] = score * (2.0 - score)
    return readable


def fuse(
    candidates: Sequence[Candidate],
    params: FusionParams = DEFAULT_PARAMS,
    *,
    now: float,
    prior: Sequence[float] | None = None,
) -> list[tuple[Candidate, Scores]]:
    """Score candidates and sort them best first (ties: lower key first).

    ``now`` is a POSIX timestamp used for recency; ``prior`` (per candidate)
    as in :func:`fuse_arrays`. Scores lie in [0, 1], on the readable scale
    (module docstring). Keys must be distinct.
    """
    if not candidates:
        return []
    nan = math.nan
    fused = fuse_arrays(
        np.array([c.key for c in candidates], dtype=np.int64),
        np.array([nan if c.dense is None else c.dense for c in candidates], dtype=np.float64),
        np.array([nan if c.lexical is None else c.lexical for c in candidates], dtype=np.float64),
        np.array([c.created_at for c in candidates], dtype=np.float64),
        np.array([c.importance for c in candidates], dtype=np.float64),
        params,
        now=now,
        prior=None if prior is None else np.asarray(prior, dtype=np.float64),
    )
    out: list[tuple[Candidate, Scores]] = []
    for i in fused.order.tolist():
        cand = candidates[i]
        lex = float(fused.lexical[i])
        out.append((cand, Scores(
            score=float(fused.score[i]),
            dense=cand.dense,
            lexical=None if cand.lexical is None else lex,
            recency=float(fused.recency[i]),
            importance=float(fused.importance[i]),
            context=float(fused.context[i]),
        )))
    return out


def context_keys(
    ranked: Sequence[tuple[Candidate, Scores]],
    params: FusionParams = DEFAULT_PARAMS,
) -> list[int]:
    """Keys the engine should add as candidates so conversational context can apply.

    A memory that answers a top hit (the one written right after it) is often
    in neither candidate list. Returns ``key + 1`` ... ``key + context_depth`` of
    the first ``params.context_expand`` ranked hits when not a candidate yet.
    The engine fetches those that exist in the same namespace (others are
    simply skipped), computes their signals like any candidate's, and fuses
    again on the enlarged list.
    """
    return successor_keys([cand.key for cand, _ in ranked], params)


def successor_keys(ranked_keys: Sequence[int], params: FusionParams = DEFAULT_PARAMS, *,
                   present: Iterable[int] | None = None) -> list[int]:
    """:func:`context_keys` for the candidates' keys, best first (``present``: all the
    candidates' keys, when ``ranked_keys`` holds only the first ``context_expand``)."""
    if params.context_weight <= 0.0 or params.context_expand <= 0 or params.context_depth <= 0:
        return []
    present = set(ranked_keys if present is None else present)
    wanted: list[int] = []
    for key in ranked_keys[: params.context_expand]:
        for ahead in range(1, params.context_depth + 1):
            nxt = key + ahead
            if nxt not in present:
                present.add(nxt)
                wanted.append(nxt)
    return wanted
