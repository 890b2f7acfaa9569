"""Layered prompt-injection detection (used by :func:`walrus_mem.safety.detect_injection`).

Each layer can be run and measured on its own (``bench/injection.py`` reports
them separately on the tuning and held-out corpora):

1. **normalisation** (:func:`views`): HTML entities, NFKC (fullwidth and
   compatibility forms), zero-width and bidi characters removed, casefolding,
   Cyrillic/Greek homoglyphs folded, spaced-out letters joined, leetspeak
   folded, and embedded base64 / hex / percent-encoded / rot13 text decoded.
   Every later layer runs on every view.
2. **patterns** (``walrus_mem.safety``'s families: override, role hijack, tag
   spoofing, fake tool results, tool coercion, exfiltration, prompt leaks,
   poisoning) plus the paraphrase patterns here.
   The tables of layers 2 to 5 are in :mod:`walrus_mem._safety.injection_tables`.
3. **multilingual lexicons** (:data:`LEXICONS`): en, de, fr, es, pt, it, nl, ru,
   zh, ja (and ko, pl, tr) -- overrides, "everything before is void", "only
   follow this", unrestricted personas, prompt leaks.
4. **structural cues** (:func:`structural_cues`): an action (send, forward,
   transfer, reveal, delete, BCC, approve, recommend) combined with an outside
   address or account, a sensitive object, a standing rule ("every reply",
   "automatically", "without asking") or an address to the model ("to any AI
   reading this"). One cue alone is ordinary language; the combinations are not.
5. **semantic** (:class:`PrototypeBank`): the memory's embedding, computed at
   remember time and stored in the catalog, against a bank of injection
   prototypes embedded once with the same model (no extra model load).

The whole text is scanned, in overlapping windows: no part of a long text goes
unscanned.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import re
import threading
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from . import injection_spaced
from .injection_tables import (
    _ADDRESSED,
    _CUES,
    _F,
    _HARMFUL_CLAIM,
    _IMPERATIVE,
    _LEXICON_RX,
    _OUTSIDE,
    _PREFERENCE_FRAME,
    _SEND_RX,
    _SENSITIVE,
    _STANDING,
    LEXICONS,
    PROTOTYPES,
)

__all__ = [
    "LEXICONS",
    "PROTOTYPES",
    "PrototypeBank",
    "decoded_views",
    "lexicon_hits",
    "structural_cues",
    "views",
    "windows",
]

# ---------------------------------------------------------------------------
# 1. normalisation
# ---------------------------------------------------------------------------

_INVISIBLE: Final = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]"
)
_HOMOGLYPHS: Final = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ɡ": "g", "ո": "n", "ν": "v", "ο": "o", "α": "a", "ι": "i", "κ": "k",
    "τ": "t", "ρ": "p", "ӏ": "l", "һ": "h", "ԛ": "q", "ԝ": "w", "ε": "e", "ѵ": "v", "ᴀ": "a",
    "ɪ": "i", "ʀ": "r", "ꜱ": "s", "ᴏ": "o", "ɴ": "n", "ᴇ": "e", "ᴛ": "t", "ᴜ": "u", "ᴍ": "m",
})
_LEET: Final = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t",
                              "@": "a", "$": "s", "!": "i", "|": "l", "8": "b"})
_SPACED_RUN: Final = re.compile(r"(?:\b\w (?=\w\b)){3,}\w\b")
# single characters (letters, '@', '.') separated by one space; words by two or more
_SPACED_CHARS: Final = re.compile(r"(?<!\S)(?:\S (?=\S(?!\S))){3,}\S(?!\S)")
_SPACED_WORD: Final = re.compile(r"(?<!\S)(?:\S (?=\S(?!\S)))+\S(?!\S)")
_WINDOW: Final = 4000
_OVERLAP: Final = 600
_MAX_DECODED: Final = 8


def _base(text: str) -> str:
    text = html.unescape(html.unescape(text))
    text = unicodedata.normalize("NFKC", text)
    text = _INVISIBLE.sub("", text)
    return re.sub(r"[^\S\n]+", " ", text.casefold())


def _uncollapsed(text: str) -> str:
    """The base view with runs of spaces kept (they separate letter-spaced words)."""
    text = html.unescape(html.unescape(text))
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text)).casefold()


def _despace(text: str) -> str:
    """'i g n o r e  a l l' -> 'ignore all' (double spaces separate words)."""
    if not _SPACED_RUN.search(text):
        return text
    parts = re.split(r" {2,}|\u3000", text)
    return " ".join(_SPACED_RUN.sub(lambda m: m.group(0).replace(" ", ""), p) for p in parts)


def _despace_wide(text: str) -> str:
    """Letter-spaced text whose words are set apart by two or more spaces or a tab.

    Runs on the text before whitespace is collapsed (the base view loses the wider
    word gaps) and joins spaced '@' and '.' too: 's e n d    x @ e v i l . c o m'.
    """
    parts = re.split(r"[ \t\u3000]{2,}|\t", text)
    if sum(1 for p in parts if _SPACED_CHARS.fullmatch(p.strip())) < 2:
        return text
    return " ".join(_SPACED_WORD.sub(lambda m: m.group(0).replace(" ", ""), p.strip())
                    for p in parts)


def _leet_view(text: str) -> str:
    # only fold inside words that mix letters and digits/symbols ("1gn0r3", "pr0mpt")
    def fold(match: re.Match[str]) -> str:
        word = match.group(0)
        if any(c.isalpha() for c in word) and any(not c.isalpha() for c in word):
            return word.translate(_LEET)
        return word

    # e-mail addresses and URLs stay as they are: they are the targets the cues look for
    parts = _ADDRESS.split(text)
    targets = _ADDRESS.findall(text)
    out = [re.sub(r"[\w@$!|]+", fold, p) for p in parts]
    return "".join(a + b for a, b in zip(out, [*targets, ""], strict=True))


_ADDRESS: Final = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|https?://\S+")
_JOINED_LETTERS: Final = re.compile(r"\b(?:\w[.\-_*·]){3,}\w\b")
_SEPARATED_WORDS: Final = re.compile(r"(?<=[^\W\d_])[-_.*·](?=[^\W\d_])")


def _unseparate(text: str) -> str:
    """'i.g.n.o.r.e' -> 'ignore', 'ignore-all-previous' -> 'ignore all previous'."""
    text = _JOINED_LETTERS.sub(lambda m: re.sub(r"[.\-_*·]", "", m.group(0)), text)
    return _SEPARATED_WORDS.sub(" ", text)


_B64: Final = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX: Final = re.compile(r"(?:[0-9a-fA-F]{2}[\s:]?){8,}")
_B32: Final = re.compile(r"\b[A-Z2-7]{16,}={0,6}")
_PCT: Final = re.compile(r"(?:%[0-9a-fA-F]{2}[^%\s]{0,3}){4,}")
# two escapes are enough: "ignore%20all%20previous" hides the words between them
_PCT_ESCAPE: Final = re.compile(r"%[0-9a-fA-F]{2}")


def _readable(decoded: str) -> bool:
    letters = sum(c.isalpha() for c in decoded)
    return decoded.isprintable() and letters >= 6 and letters * 2 > len(decoded)


def decoded_views(text: str) -> list[str]:
    """Text hidden in base64, hex, percent-encoding or rot13 inside ``text``."""
    found: list[str] = []
    for match in _B64.finditer(text):
        chunk = match.group(0)
        for decoder in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                raw = decoder(chunk + "=" * (-len(chunk) % 4))
                decoded = raw.decode("utf-8")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                continue
            if _readable(decoded):
                found.append(decoded)
                break
    for match in _HEX.finditer(text):
        digits = re.sub(r"[\s:]", "", match.group(0))
        try:
            decoded = bytes.fromhex(digits[: len(digits) // 2 * 2]).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            continue
        if _readable(decoded):
            found.append(decoded)
    if _PCT.search(text) or len(_PCT_ESCAPE.findall(text)) >= 2:
        decoded = urllib.parse.unquote(text)
        if decoded != text:
            found.append(decoded)
    for match in _B32.finditer(text):
        try:
            chunk = match.group(0)
            plain = base64.b32decode(chunk + "=" * (-len(chunk) % 8)).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if _readable(plain):
            found.append(plain)
    # rot13 and reversed text: kept when they read more like English than the original
    rot = codecs.decode(text, "rot13")
    if _looks_english(rot) > _looks_english(text):
        found.append(rot)
    backwards = text[::-1]
    if _looks_english(backwards) > _looks_english(text) + 1:
        found.append(backwards)
    return found[:_MAX_DECODED]


_COMMON: Final = frozenset(
    "the and you your all to of a in is that for it with as be this on are or not from by "
    "ignore instructions previous send reveal system prompt rules forget now".split()
)


def _looks_english(text: str) -> int:
    return sum(1 for w in re.findall(r"[a-z]+", text.lower()) if w in _COMMON)


def views(text: str, *, decode: bool = True) -> list[str]:
    """Every normalised view of ``text`` that the detectors run on (deduplicated)."""
    base = _base(text)
    out = [base]
    for candidate in (base.translate(_HOMOGLYPHS), _despace(base)):
        out.append(candidate)
    # word gaps folded away (Memory.remember stores whitespace runs as one space)
    out.extend(injection_spaced.segmented(out[1]))
    if "  " in text or "\t" in text or "\u3000" in text:  # wide gaps only
        plain = _uncollapsed(text)
        wide = _despace_wide(plain)
        if wide != plain:
            out.append(wide)
    out.append(_leet_view(out[1]))
    out.append(_unseparate(out[1]))
    if decode:
        for decoded in decoded_views(text):
            out.extend(views(decoded, decode=False)[:2])
    return list(dict.fromkeys(v for v in out if v.strip()))


def windows(text: str, size: int = _WINDOW, overlap: int = _OVERLAP) -> Iterator[str]:
    """Overlapping windows covering all of ``text`` (so long texts scan in linear time)."""
    if len(text) <= size:
        yield text
        return
    step = size - overlap
    for start in range(0, len(text), step):
        yield text[start:start + size]
        if start + size >= len(text):
            return


# ---------------------------------------------------------------------------
# 3. multilingual lexicons
# ---------------------------------------------------------------------------

def lexicon_hits(view: str) -> Iterator[tuple[str, str]]:
    for lang, pattern in _LEXICON_RX:
        found = pattern.search(view)
        if found:
            yield lang, found.group(0)


# ---------------------------------------------------------------------------
# 4. structural cues
# ---------------------------------------------------------------------------

def structural_cues(view: str) -> Iterator[tuple[str, str]]:
    """Combinations of weak cues that together make an instruction to the model."""
    for label, pattern in _CUES:
        found = pattern.search(view)
        if found:
            yield label, found.group(0)
    for sentence in re.split(r"(?<=[.!?。！？])\s+|\n+", view):
        send = _SEND_RX.search(sentence)
        outside = _OUTSIDE.search(sentence)
        if send and outside:
            # an action towards an outside address is an instruction when it is
            # addressed to the model, concerns sensitive data, or is a standing rule
            # given as an order or a preference (not "the school emails reports to ...")
            standing_order = _STANDING.search(sentence) and (
                _IMPERATIVE.match(sentence) or _PREFERENCE_FRAME.search(sentence))
            # "I forwarded the invoice to accounting@..." reports the user's own act
            own_act = re.match(r"\W*(?:i|we)\b", sentence, _F) and not re.search(
                r"\byou\b|\bassistant\b", sentence, _F)
            if (standing_order or _SENSITIVE.search(sentence) and not own_act
                    or _ADDRESSED.search(sentence)
                    or re.search(r"\byou\b|\bassistant\b", sentence, _F)):
                yield "exfiltration", sentence[:120]
                return
        if _ADDRESSED.search(sentence) and (_HARMFUL_CLAIM.search(sentence) or send
                                            or _SENSITIVE.search(sentence) and outside):
            yield "poisoning", sentence[:120]
            return
    whole = _ADDRESSED.search(view)
    if whole and _HARMFUL_CLAIM.search(view[whole.end():whole.end() + 200]):
        yield "poisoning", view[whole.start():whole.end() + 80]


# ---------------------------------------------------------------------------
# 5. semantic layer
# ---------------------------------------------------------------------------

class PrototypeBank:
    """Injection prototypes embedded with a memory's own embedder, once.

    :meth:`scores` takes vectors already computed at remember time (the ones
    stored in the catalog) and returns, per vector, the highest cosine
    similarity to a prototype. Nothing is embedded per memory.
    """

    def __init__(self, embed: Callable[[list[str]], npt.NDArray[np.float32]],
                 prototypes: Sequence[str] = PROTOTYPES) -> None:
        self._embed = embed
        self.prototypes = tuple(prototypes)
        self._matrix: npt.NDArray[np.float32] | None = None
        self._lock = threading.Lock()

    def matrix(self) -> npt.NDArray[np.float32]:
        with self._lock:
            if self._matrix is None:
                raw = np.asarray(self._embed(list(self.prototypes)), dtype=np.float32)
                norms = np.linalg.norm(raw, axis=1, keepdims=True)
                matrix = (raw / np.where(norms == 0, 1, norms)).astype(np.float32)
                self._matrix = matrix
                return matrix
            return self._matrix

    def scores(self, vectors: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
        """Highest cosine similarity of each row of ``vectors`` to a prototype."""
        vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.ndim == 1:
            vecs = vecs[None, :]
        if len(vecs) == 0:
            return np.zeros(0, dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        unit = (vecs / np.where(norms == 0, 1, norms)).astype(np.float32)
        result: npt.NDArray[np.float32] = (unit @ self.matrix().T).max(axis=1)
        return result


@dataclass(frozen=True)
class SemanticVerdict:
    """The semantic layer's verdict for one memory."""

    score: float
    flagged: bool
