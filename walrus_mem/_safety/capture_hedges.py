"""What capture must not store as a fact: hedges and hypotheticals; where a sentence splits.

"Maybe I'll try Rust someday, not sure." or "If I ever move to Berlin, I'd get a
bike" state no fact. A hedge word marks a clause as a guess (en, de, fr, es, pt, it,
nl, ru, tr, pl, zh, ja, ko); a sentence that opens with a hypothetical condition
("if I ever", "if I had ... I would", "suppose", "si jamais", "wenn ich jemals") is
a guess as a whole, its consequence included. A conditional rule ("If a deploy
fails, we always roll back") has neither and stays a fact.

Kept apart from capture_patterns: injection_spaced.lexicon() harvests that module's
vocabulary (and pins its digest), and hedge words are no injection vocabulary.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["HEDGE", "HYPOTHETICAL", "clauses", "is_guess"]

_F: Final = re.IGNORECASE

HEDGE: Final = re.compile(
    r"\b(?:maybe|perhaps|possibly|probably|someday|some\s+day|who\s+knows|not\s+(?:yet\s+)?"
    r"(?:sure|decided|certain)|undecided|haven't\s+decided|have\s+not\s+decided|i\s+guess"
    r"|i\s+wonder|(?:thinking\s+(?:about|of)|considering|toying\s+with)\s+(?:maybe\s+)?\w+ing"
    r"|considering\s+(?:a|an)\s|i\s+wish"
    r"|(?:i|we|he|she|they)\s+(?:may|might)(?!\s+as\s+well)(?!\s+have\s+(?:mentioned|told))"
    r"|(?:i|we)\s+could\s+(?:see|imagine|maybe|try)"
    # de
    r"|vielleicht|eventuell|möglicherweise|wahrscheinlich|irgendwann|nicht\s+sicher"
    r"|mal\s+sehen|ich\s+könnte"
    # fr
    r"|peut-être|peut\s+être|je\s+ne\s+sais\s+pas|pas\s+s[ûu]re?|un\s+jour|qui\s+sait"
    r"|probablement|il\s+se\s+peut|je\s+pourrais"
    # es
    r"|quiz[áa]s?|tal\s+vez|a\s+lo\s+mejor|alg[úu]n\s+d[íi]a|no\s+estoy\s+segur[oa]"
    r"|posiblemente|probablemente|puede\s+que"
    # pt
    r"|talvez|um\s+dia|algum\s+dia|n[ãa]o\s+tenho\s+certeza|possivelmente|provavelmente"
    r"|pode\s+ser\s+que"
    # it
    r"|forse|un\s+giorno|non\s+sono\s+sicur[oa]|magari|chiss[àa]|potrei"
    # nl
    r"|misschien|ooit|niet\s+zeker|wellicht|waarschijnlijk"
    # pl
    r"|może|kiedyś|nie\s+jestem\s+pewien|nie\s+jestem\s+pewna|prawdopodobnie"
    # tr
    r"|belki|bir\s+gün|emin\s+değilim|galiba|muhtemelen)\b"
    # ru (Cyrillic: \b works on word characters)
    r"|(?:может\s+быть|возможно|наверное|когда-нибудь|не\s+уверен[аы]?|вероятно)"
    # zh, ja, ko (no word boundaries)
    r"|也许|或许|說不定|说不定|有一天|不确定|不確定|大概|かもしれ|いつか|たぶん|多分|もしかしたら"
    r"|わからない|아마|언젠가|어쩌면|모르겠|확실하지",
    _F,
)
# A sentence that opens with a hypothetical condition: a guess as a whole.
HYPOTHETICAL: Final = re.compile(
    r"^(?:(?:what\s+)?if\s+(?:i|we)\s+(?:ever|had|were|could|won|got\s+rich)\b"
    r"|(?:what\s+)?if\b.*\b(?:would|'d|could|might)\b|suppose|supposing|imagine|in\s+case\s+i"
    r"|wenn\s+ich\s+(?:jemals|je|mal|irgendwann)|falls\s+ich|si\s+jamais|si\s+un\s+jour"
    r"|si\s+alg[úu]n\s+d[íi]a|si\s+alguna\s+vez|se\s+algum\s+dia|se\s+um\s+dia|se\s+mai"
    r"|als\s+ik\s+ooit|если\s+когда-нибудь|eğer\s+bir\s+gün|jeśli\s+kiedyś|如果有一天|もし|만약)",
    _F,
)
# Clause boundaries inside one sentence: a comma or semicolon (with an optional
# conjunction), a dash, or "and/but" before a new subject ("..., and my password is X").
_CLAUSE: Final = re.compile(
    r"\s*[;,]\s*(?:(?:and|but|so|plus|also)\s+)?|\s+[-–—]\s+"
    r"|\s+(?:and|but|plus)\s+(?=(?:my|our|the|his|her|their|i|i'm|i've|we|we're)\b)",
    _F,
)


def is_guess(sentence: str) -> bool:
    """A hedged or hypothetical statement: no fact to store."""
    return bool(HYPOTHETICAL.match(sentence.strip()) or HEDGE.search(sentence))


def clauses(sentence: str) -> list[str]:
    """The clauses of one sentence, each stripped; empty pieces dropped."""
    return [piece.strip() for piece in _CLAUSE.split(sentence) if piece and piece.strip()]
