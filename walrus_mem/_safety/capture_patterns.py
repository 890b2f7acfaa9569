"""Regex and word tables of :func:`walrus_mem.safety.should_capture` and
:func:`walrus_mem.safety.screen_fact`.

Kept apart from safety.py, with the injection tables, so that
:func:`walrus_mem._safety.injection_spaced.lexicon` reads the vocabulary of every
screen without importing safety.
"""

from __future__ import annotations

import re
from typing import Final

# ---------------------------------------------------------------------------
# capture filter
# ---------------------------------------------------------------------------

_FILLER_WORDS = (
    r"ok|okay|sure|thanks|thank\s+you|thank\s+you\s+so\s+much|thanks\s+a\s+lot|thx|ty|yes|yep"
    r"|yeah|yup|no|nope|nah|got\s+it|hmm+|hm+|ah+|oh+|lol|haha+|nice|cool|great|right|alright"
    r"|fine|k+|perfect|awesome|sounds\s+good|no\s+problem|np|lgtm|will\s+do|done|good|wow"
    r"|agreed|understood|makes\s+sense|of\s+course|absolutely|exactly|indeed|cheers|bye"
    r"|goodbye|hello|hi|hey|good\s+morning|good\s+night|see\s+you|you'?re\s+welcome|welcome"
    r"|sorry|please|go\s+ahead|continue|next|that'?s\s+(?:(?:really|very|so|super)\s+)?"
    r"(?:great|perfect|fine|right|helpful|awesome|all|good|cool|nice|amazing|useful)|very\s+helpful|really\s+helpful|super\s+helpful|much\s+appreciated"
    r"|appreciate\s+it|i\s+appreciate\s+(?:it|that|your\s+help)|this\s+is\s+(?:great|helpful"
    r"|perfect|awesome)|it\s+works|that\s+works"
)
FILLER: Final = re.compile(
    rf"^(?:(?:{_FILLER_WORDS})(?:[\s,.!?;:~-]+|$))+$", re.IGNORECASE
)
EMOJI: Final = re.compile(
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\U0001f1e6-\U0001f1ff]"
)
FENCE: Final = re.compile(r"(?m)^\s*(?:```|~~~)")
HEADING: Final = re.compile(r"(?m)^\s{0,3}#{1,6}\s+\S|^[^\n]+\n\s*(?:={3,}|-{3,})\s*$")
SYSTEM_CONTENT: Final = re.compile(
    r"^\s*(?:\[?system\]?\s*:|<\s*system\b|a\s+new\s+session\s+was\s+started|run\s+your\s+"
    r"session\s+startup)",
    re.IGNORECASE,
)


# ---------------------------------------------------------------------------
# fact screening
# ---------------------------------------------------------------------------

# Words that say nothing once the secret is gone ("my password is [REDACTED]").
UNINFORMATIVE: Final = frozenset(
    "a an the my our your his her their its is are was were be to of for in on at and or with "
    "this that it here use using used set now new key keys token tokens secret secrets password "
    "passwords pwd pass passcode pin api apikey credential credentials login auth bearer "
    "access private value code user users".split()
)
PLACEHOLDER: Final = re.compile(r"\[REDACTED:[a-z0-9_]+\]")
PLACEHOLDER_KIND: Final = re.compile(r"\[REDACTED:([a-z0-9_]+)\]")
# Kinds that are the whole point of their sentence: the fact is dropped, not redacted.
DROP_WHOLE: Final = frozenset({"password", "pin", "bip39_seed_phrase", "env_secret"})
