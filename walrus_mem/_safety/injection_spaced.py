"""Letter-spaced text whose word gaps were folded away: 'i g n o r e a l l p r e v ...'.

``Memory.remember`` folds every whitespace run into one space, so a payload
written with wider gaps between its letter-spaced words reaches the read screen
as one long run of single letters. :func:`segmented` joins such a run and splits
it back into words with a lexicon made of the detectors' own vocabulary (every
word in the pattern sources and prototype sentences of the table modules below
it: injection_patterns, injection_tables, injection_concepts, injection_intents
and capture_patterns, so the words the patterns need are the words it can find,
in every language they cover) plus common function words; every detector
then runs on the result. No word list is downloaded or loaded: the lexicon is
built once, on the first text that has such a run. Only runs of at least
:data:`MIN_LETTERS` single letters are joined, and only clauses that mostly read
as known words: spelled acronyms, grade or DNA letter lists and initials stay as
they are (and would match nothing anyway).
"""

from __future__ import annotations

import re
import threading
from typing import Any, Final

from . import (
    capture_patterns,
    injection_concepts,
    injection_intents,
    injection_patterns,
    injection_tables,
)

__all__ = ["MIN_LETTERS", "segmented"]

MIN_LETTERS: Final = 12
_MAX_RUN: Final = 2000  # characters of one run segmented (linear DP, bounded)
_MAX_WORD: Final = 24
# single characters (letters, digits, '@', '.', ...) separated by exactly one space
_RUN: Final = re.compile(r"(?<!\S)(?:\S (?=\S(?!\S))){11,}\S(?!\S)")
# clause ends inside a joined run: ',;!?' and a ':' that does not start '://'
_CLAUSE: Final = re.compile(r"(?<=[,;!?])|(?<=:)(?!/)")
_LETTERS: Final = re.compile(r"[^\W\d_]+")
_ESCAPE: Final = re.compile(r"\\[A-Za-z]|\\.")
_GROUP: Final = re.compile(r"\(\?[a-zA-Z<=!:]+")
# "pr[ée]c[ée]dent" -> "précédent" (first choice of a class of letters)
_CLASS: Final = re.compile(r"\[([^\W\d_])[^\W\d_]*\]")
# "polic(?:y|ies)" -> "policy", "policies"
_ENDINGS: Final = re.compile(r"([^\W\d_]+)\(\?:((?:[^\W\d_]*\|)+[^\W\d_]*)\)")
_CJK: Final = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
# an unknown stretch costs more than a word, and each of its letters more than a third of
# one: a known word of three letters or more next to it stays a word of its own
_UNKNOWN: Final = 2.5
_UNKNOWN_LETTER: Final = 0.35
_MIN_KNOWN: Final = 0.7  # share of a run's letters that must fall in known words

# Function words and frequent forms the patterns spell as fragments ("polic(?:y|ies)").
_COMMON: Final = """
a an the and or but if then than so to of in on at by for from with without into onto over
under about after before above below again all any every each some no not now only just also
this that these those there here it its is are was were be been being am do does did done
have has had will would shall should can could may might must you your yours yourself me my
mine i we our us they them their he him his she her who whom what which when where why how
user users assistant assistants model ai chatbot bot system prompt prompts message messages
rule rules policy policies instruction instructions guideline guidelines setting settings
ignore ignored disregard forget forgot override reveal send forward reply replies answer
answers respond always never everything anything nothing previous prior earlier above below
new old first last next one two all mode developer admin administrator root access
restriction restrictions filter filters safety secret secrets password passwords key keys
email emails mail address account accounts bank money pay payment transfer link links
please say tell show print output repeat write word words memory memories note notes
speak speech language english french german spanish only instead follow obey apply
de la le les des du un une et ou tu te ton ta tes vous votre vos nous je il elle en au aux
à pour par avec sans dans sur que qui est sont réponds répondez oublie oubliez ignore
der die das den dem des ein eine und oder du dich dein deine sie ihr nur auf mit ohne zu
el la los las un una y o tu tus su sus solo en con sin que por para del al
o a os as um uma e ou seu sua seus suas só em com sem que por para do da dos das no na
il lo gli le un una e o tuo tua tuoi tue solo in con senza che per di del della
het een en of je jouw uw alleen met zonder van voor
alle alles aller allen toutes tous tout toute todas todos toda todo tutte tutti tutto tutta
jetzt sofort immer nie nichts vorige eerdere altijd nooit toujours jamais siempre nunca
sempre nunca mai ora adesso agora ahora maintenant
english englisch anglais inglés inglese inglês engels french französisch français francés
francese francês frans latin latein latín latino http https www com org net
"""
_COMMON_SET: Final = frozenset(_COMMON.split())
_ENDINGS_OK: Final = frozenset("es en er as os".split())
_NO_WORD: Final = float("inf")
# the modules whose tables the detectors run; none of them imports this one
_TABLES: Final = (injection_patterns, capture_patterns, injection_tables,
                  injection_concepts, injection_intents)
_lock = threading.Lock()
_lexicon: frozenset[str] | None = None


def _pattern_sources(obj: Any, out: list[str], depth: int = 0) -> None:
    if depth > 5:
        return
    if isinstance(obj, re.Pattern):
        out.append(str(obj.pattern))
    elif isinstance(obj, str) and depth > 0:  # prototype sentences, lexicon entries
        out.append(obj)
    elif isinstance(obj, tuple | list | set | frozenset):
        for item in obj:
            _pattern_sources(item, out, depth + 1)
    elif isinstance(obj, dict):
        for item in obj.values():
            _pattern_sources(item, out, depth + 1)


def lexicon() -> frozenset[str]:
    """Known words: the detectors' pattern vocabulary plus :data:`_COMMON` (built once)."""
    global _lexicon
    with _lock:
        if _lexicon is None:
            sources: list[str] = []
            for module in _TABLES:
                for name, value in vars(module).items():
                    if not name.startswith("__"):
                        _pattern_sources(value, sources)
            words = set(_COMMON_SET)
            for source in sources:
                source = _CLASS.sub(r"\1", _ESCAPE.sub(" ", source.casefold()))
                for stem, endings in _ENDINGS.findall(source):
                    words.update(stem + ending for ending in endings.split("|"))
                # two-letter fragments of patterns are mostly noise: only _COMMON's count
                words.update(w for w in _LETTERS.findall(_GROUP.sub(" ", source))
                             if len(w) >= 3 or _CJK.match(w))
            # squashed forms the patterns match ("youarenow") would hide their words
            _lexicon = frozenset(w for w in words if w in _COMMON_SET or not _all_common(w))
        return _lexicon


def _all_common(word: str) -> bool:
    """``word`` is two or more function words run together ("youarenow")."""
    if word in _COMMON_SET:
        return True
    return any(word[:i] in _COMMON_SET and _all_common(word[i:]) for i in range(2, len(word) - 1))


def _word_cost(word: str, known: frozenset[str], inflect: bool) -> float:
    if len(word) >= 3:
        if word in known:  # short pattern fragments ("lle", "nds") are often noise
            return 1.0 if len(word) > 3 or word in _COMMON_SET else 1.5
        # an inflected form of a known word: "précédent" + "es", "vorherig" + "en"
        if inflect and len(word) >= 7 and word[-2:] in _ENDINGS_OK and word[:-2] in known:
            return 1.3
        return _NO_WORD
    return (1.0 if len(word) == 2 else 1.3) if word in _COMMON_SET else _NO_WORD


def _split_letters(letters: str, known: frozenset[str], inflect: bool) -> tuple[list[str], int]:
    """Cheapest split of ``letters`` into known words (few, long ones) and unknown
    stretches (names, brands: one token each, dearer per letter than any known word).
    Returns the tokens and how many letters fell in known words.
    """
    n = len(letters)
    cost = [0.0] + [_NO_WORD] * n
    back = [0] * (n + 1)
    unknown = [False] * (n + 1)
    for end in range(1, n + 1):
        for start in range(max(0, end - _MAX_WORD), end):
            word = cost[start] + _word_cost(letters[start:end], known, inflect)
            other = cost[start] + _UNKNOWN + _UNKNOWN_LETTER * (end - start)
            if word < cost[end]:
                cost[end], back[end], unknown[end] = word, start, False
            if other < cost[end]:
                cost[end], back[end], unknown[end] = other, start, True
    tokens: list[str] = []
    known_letters = 0
    end = n
    while end > 0:
        start = back[end]
        tokens.append(letters[start:end])
        known_letters += 0 if unknown[end] else end - start
        end = start
    return tokens[::-1], known_letters


def _segment_clause(clause: str, known: frozenset[str], inflect: bool) -> tuple[str, int, int]:
    """The clause's words, its letter count and how many of them fell in known words."""
    out: list[str] = []
    letters = known_letters = 0
    for piece in re.split(r"([^\W\d_]+)", clause):
        if _CJK.search(piece):  # no spaces between words: joined is the right form
            letters += len(piece)
            known_letters += len(piece)
            out.append(piece)
        elif piece and piece[0].isalpha():
            tokens, hits = _split_letters(piece, known, inflect)
            letters += len(piece)
            known_letters += hits
            out.append(" ".join(tokens))
        else:  # punctuation ends a word; '@', '.', '-', '/', '://' stay inside addresses
            out.append(re.sub(r"([,;!?]|:(?!/))", r"\1 ", piece))
    return "".join(out), letters, known_letters


def _segment_run(run: str, known: frozenset[str], inflect: bool) -> str | None:
    """The run's letters as words, clause by clause; a clause that does not read as known
    words (a name, a letter list, a language the lexicon lacks) keeps its spaced letters.
    """
    raws = [c for c in _CLAUSE.split(run.replace(" ", "")[:_MAX_RUN]) if c]
    clauses = [_segment_clause(c, known, inflect) for c in raws]
    total = sum(c[1] for c in clauses)
    whole = sum(c[2] for c in clauses) >= _MIN_KNOWN * total
    out: list[str] = []
    any_words = False
    for (words, letters, known_letters), raw in zip(clauses, raws, strict=True):
        reads = known_letters >= _MIN_KNOWN * letters if letters >= MIN_LETTERS else whole
        any_words |= reads and letters > 0
        out.append(words if reads else " ".join(raw) + " ")
    if total < MIN_LETTERS or not any_words:
        return None
    return " ".join("".join(out).split())


def segmented(text: str) -> list[str]:
    """``text`` with each long run of single spaced letters joined and split into words.

    Two splits, as an ending can be a word of its own ("instructies en" / "précédent es"):
    one reading known stems plus an ending as one word, one not. Returns no view when
    ``text`` has no such run or no run reads as words.
    """
    if not _RUN.search(text):
        return []
    known = lexicon()
    out = []
    for inflect in (True, False):
        def replace(match: re.Match[str], inflect: bool = inflect) -> str:
            words = _segment_run(match.group(0), known, inflect)
            return match.group(0) if words is None else words

        view = _RUN.sub(replace, text)
        if view != text:
            out.append(view)
    return out
