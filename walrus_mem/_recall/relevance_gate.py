"""Query-level relevance gate for auto-recall: does this prompt want a memory at all?

A raw score cutoff cannot tell "What is the offside rule in football?" (best
hit "Tomás has football practice", one shared word) from "What's my son's
football schedule?". Auto-recall therefore asks first whether the *prompt*
is one memory can answer, from four signals, and only then applies the
per-hit ``min_relevance`` cutoff:

* ``dense``: cosine of the best hit (meaning);
* ``overlap``: content words (not stopwords, crude stems) shared by the
  prompt and one of the three best hits, capped at 2 (keywords);
* ``personal``: the prompt refers to the user or their circle ("my", "our",
  "I", "help me", "for me"), except generic how-tos ("how do I ...") that
  name nothing of theirs;
* ``intent``: the prompt's embedding is closer to prototypes of requests about
  the user (their people, plans, preferences, work) than to prototypes of
  general requests (world facts, coding how-tos, small talk, maths, creative
  writing). Both banks are embedded once per model with the memory's own
  embedder; the prompt's vector is the one recall already computed.

They are combined by a logistic model whose weights were fitted on the tuning
half of the calibration corpora and whose threshold is the highest-recall one
that let no tuning unrelated prompt through (bench/recall_calibration.py,
figures in docs/security.md). A margin of the best hit over the other
candidates (z-score) was tried and got weight ~0, so it is not used.
Weights exist per embedding model; other models skip the gate.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from .embeddings import DEFAULT_MODEL_ID
from .ranking import _STOPWORDS

__all__ = [
    "GATES",
    "GENERAL_PROTOTYPES",
    "PERSONAL_PROTOTYPES",
    "GateParams",
    "IntentBank",
    "QueryVerdict",
    "content_overlap",
    "content_words",
    "personal_cue",
    "query_verdict",
]

#: Requests about the user and their world (written for the gate, not taken from a corpus).
PERSONAL_PROTOTYPES: Final[tuple[str, ...]] = (
    "What do you remember about me?", "What are my preferences?",
    "Remind me what I told you before.", "What is my family like?",
    "Who are the people in my life?", "What did we agree on last time?",
    "What are my plans for next week?", "What do I usually do?",
    "Which tools does my team use at work?", "What should you keep in mind about my health?",
    "Pick something I would enjoy.", "Suggest something that suits my tastes.",
    "Book it the way I like it.", "Where do I keep my things?",
    "What's the status of our project?", "Which of my accounts or services do I use?",
    "When is my next appointment?", "What do I like to eat and drink?",
    "How does our team work?", "Plan something for me and my family.",
)
#: General requests that no personal memory answers.
GENERAL_PROTOTYPES: Final[tuple[str, ...]] = (
    "Explain a scientific concept.", "What is the history of an ancient empire?",
    "Who wrote a famous novel?", "How does a programming language feature work?",
    "Write a short poem.", "Tell me a joke.", "Solve this maths problem.", "Define this word.",
    "Translate a sentence into another language.", "What is the capital of a country?",
    "How do I fix a generic software error?", "Hello, how are you?", "Thanks, goodbye.",
    "Give me a random fact about animals.", "How do I do a household chore?",
    "Convert units of measurement.", "What are the rules of a sport?",
    "Summarise the plot of a classic play.", "How does a machine or device work?",
    "What happened in a historical event?",
)

_EXTRA_STOP: Final = frozenset(
    "tell give make get know want need like please let help explain describe write show find "
    "go use one two many much today".split()
)
_TOKEN: Final = re.compile(r"[^\W_]+")
_PERSONAL: Final = re.compile(
    r"\b(?:my|mine|our|ours|we|us|we're|i'm|i've|i'd|i)\b"
    r"|\b(?:help|for|with|remind)\s+me\b",
    re.IGNORECASE,
)
_HOW_TO: Final = re.compile(
    r"^\s*(?:how\s+(?:do|can|should|would)\s+i|how\s+to)\b(?![^?]*\b(?:my|our)\b)",
    re.IGNORECASE,
)


def _stem(word: str) -> str:
    for suffix in ("ing", "ies", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> frozenset[str]:
    """Lower-cased, crudely stemmed words of 3+ letters that are not stopwords."""
    words = _TOKEN.findall(text.lower().replace("'s", " "))
    return frozenset(_stem(w) for w in words
                     if len(w) >= 3 and w not in _STOPWORDS and w not in _EXTRA_STOP)


def content_overlap(query: str, texts: Sequence[str]) -> int:
    """Most content words the query shares with any one of ``texts``."""
    q = content_words(query)
    return max((len(q & content_words(t)) for t in texts), default=0)


def personal_cue(query: str) -> bool:
    """The prompt refers to the user or their circle, and is not a generic how-to."""
    return bool(_PERSONAL.search(query)) and not _HOW_TO.search(query)


@dataclass(frozen=True, slots=True)
class GateParams:
    """Logistic weights of the gate for one embedding model, and its threshold."""

    dense: float
    overlap: float
    personal: float
    intent: float
    bias: float
    threshold: float  # on the probability


#: Fitted on the tuning halves (bench/recall_calibration.py); per embedding model id.
GATES: Final[dict[str, GateParams]] = {
    DEFAULT_MODEL_ID: GateParams(dense=1.69, overlap=1.03, personal=3.674,
                                        intent=1.905, bias=-2.747, threshold=0.3),
}


def _unit(rows: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return (rows / np.where(norms == 0, 1, norms)).astype(np.float32)


class IntentBank:
    """The two prototype banks, embedded once with a memory's own embedder."""

    def __init__(self, embed: Callable[[list[str]], npt.NDArray[np.float32]]) -> None:
        self._embed = embed
        self._banks: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]] | None = None
        self._lock = threading.Lock()

    def _matrices(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        with self._lock:
            if self._banks is None:
                self._banks = (_unit(np.asarray(self._embed(list(PERSONAL_PROTOTYPES)))),
                               _unit(np.asarray(self._embed(list(GENERAL_PROTOTYPES)))))
            return self._banks

    def intent(self, query_vector: npt.NDArray[Any]) -> float:
        """Best cosine to a personal prototype minus best cosine to a general one."""
        personal, general = self._matrices()
        q = _unit(np.asarray(query_vector, dtype=np.float32).reshape(-1))
        return float((personal @ q).max() - (general @ q).max())


@dataclass(frozen=True, slots=True)
class QueryVerdict:
    """The gate's verdict on one prompt, with its inputs (for traces and benches)."""

    probability: float
    passed: bool
    dense: float
    overlap: int
    personal: bool
    intent: float


def query_verdict(params: GateParams, query: str, intent: float,
                  hits: Sequence[tuple[str, float | None]]) -> QueryVerdict:
    """Combine the signals for ``query`` given its hits as (text, dense cosine), best first."""
    dense = float(hits[0][1] or 0.0) if hits else 0.0
    overlap = min(content_overlap(query, [text for text, _ in hits[:3]]), 2)
    personal = personal_cue(query)
    z = (params.bias + params.dense * dense + params.overlap * overlap
         + params.personal * personal + params.intent * intent)
    probability = 1.0 / (1.0 + math.exp(-z))
    return QueryVerdict(probability, bool(hits) and probability >= params.threshold, dense,
                        overlap, personal, intent)
