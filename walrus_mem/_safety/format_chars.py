"""Unicode format characters (category Cf): shown or dropped before screening and rendering.

They draw nothing, so a reader never sees them, yet a model reads them: an
instruction spelled in tag characters (U+E0020-E007E mirror printable ASCII)
passes every screen that looks at visible text and reaches the prompt intact.
Zero-width characters split words a screen looks for, bidi controls reorder
what a reviewer sees, and the soft hyphen hides inside words.

:func:`reveal_format_chars` turns tag characters into the ASCII they mirror
(the hidden text becomes ordinary text the screens read and a reviewer sees)
and removes every other Cf character. Screening and rendering both call it.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["FORMAT_CHARS", "reveal_format_chars"]


#: Every format character (category Cf) of Unicode 14 to 15.1 (tests/test_format_chars.py
#: checks this Python's tables).
FORMAT_CHARS: Final = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]"
)
_TAG_TEXT: Final = re.compile("[\U000e0020-\U000e007e]+")


def reveal_format_chars(text: str) -> str:
    """Tag characters become the ASCII they mirror; every other Cf character is removed.

    >>> reveal_format_chars("pa\\u00adss\\u200bword\\U000e0048\\U000e0069")
    'password Hi '
    """
    if not FORMAT_CHARS.search(text):
        return text
    # The decoded run stands apart from the visible words around it.
    text = _TAG_TEXT.sub(lambda m: " " + "".join(chr(ord(c) - 0xE0000) for c in m.group(0))
                         + " ", text)
    return FORMAT_CHARS.sub("", text)
