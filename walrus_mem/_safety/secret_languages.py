"""Passwords and PINs stated in languages beyond the Latin-script ones of secret_phrases.

Russian, Ukrainian, Hindi, Arabic, Persian, Hebrew, Chinese, Japanese, Korean,
Greek, Thai, Turkish, Polish, Czech, Swedish, Norwegian, Finnish, Vietnamese,
Indonesian. Word order differs ("मेरा पासवर्ड Shanti@987 है", "비밀번호는hangang2024!이야")
and particles attach to the value, so no linking word is required: the first
token of the same clause after the credential noun that *looks like a password*
(:func:`~walrus_mem._safety.secret_phrases.password_shaped`: letters with digits or
symbols, not a word, an address or a version) is the value. "Мой пароль слишком
короткий" or "密码要求8位以上" hold no such token and stay.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from .secret_phrases import password_shaped

__all__ = ["language_spans"]

Span = tuple[int, int, str]

_CRED_NOUNS: Final = (
    r"парол[ьяюе]\w*|код\s+доступа"                       # ru, uk
    r"|पासवर्ड|कूटशब्द"                                    # hi
    r"|كلمة\s+(?:ال)?(?:مرور|سر)|كلمة\s+السر|الرقم\s+السري"  # ar
    r"|رمز\s+عبور|گذرواژه"                                 # fa
    r"|ה?סיסמ[הא]"                                         # he
    r"|密[码碼](?!学|學)|口令"                              # zh
    r"|パスワード"                                          # ja
    r"|비밀번호|비번|패스워드|암호(?!화)"                   # ko
    r"|κωδικ[όο]ς?|συνθηματικ[όο]"                         # el
    r"|รหัสผ่าน"                                            # th
    r"|şifre\w*|parola\w*"                                 # tr
    r"|has(?:ło|ła|łem)|heslo\w*"                          # pl, cs
    r"|lösenord\w*|passord\w*|salasana\w*"                 # sv, no, fi
    r"|mật\s+khẩu|kata\s+(?:sandi|laluan)"                 # vi, id / ms
)
_CUE: Final = re.compile(rf"(?:{_CRED_NOUNS})", re.IGNORECASE)
# PIN nouns: the value is digits only ("暗証番号は4821", "ПИН-код 0917")
_PIN_CUE: Final = re.compile(
    r"暗証番号|PIN\s*码|PIN\s*코드|핀\s*번호|пин-?код|ПИН-?код|पिन|الرقم\s+السري|رمز\s+PIN",
    re.IGNORECASE)
# A clause ends at a sentence stop (Latin or CJK) or a line break.
_CLAUSE_END: Final = re.compile(r"[.!?。！？]\s|[。！？\n]|$")
_TOKEN: Final = re.compile(r"[^\s\"'`«»“”,;，、：:「」『』（）()]+")
# Particles and verbs written against the value: "은/는", "です", "है" stay outside the span.
_NATIVE: Final = (r"[\u0370-\u03ff\u0400-\u04ff\u0590-\u05ff\u0600-\u06ff\u0900-\u097f"
                  r"\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uff00-\uffef]")
_NATIVE_EDGE: Final = re.compile(rf"^{_NATIVE}+|{_NATIVE}+$")
_TRIM: Final = ".,;:!?)]}>\"'”»—–-"
_MAX_TOKENS: Final = 6
_REACH: Final = 60


def _tokens(view: str, pos: int) -> Iterator[tuple[int, int]]:
    stop = _CLAUSE_END.search(view, pos)
    end = min(stop.start() if stop else len(view), pos + _REACH)
    for count, token in enumerate(_TOKEN.finditer(view, pos, end)):
        if count >= _MAX_TOKENS:
            return
        start, stop_at = token.span()
        core = token.group(0)
        edge = _NATIVE_EDGE.search(core)
        while edge and core:
            if edge.start() == 0:
                start += edge.end()
                core = core[edge.end():]
            else:
                stop_at -= len(core) - edge.start()
                core = core[:edge.start()]
            edge = _NATIVE_EDGE.search(core)
        while stop_at > start and view[stop_at - 1] in _TRIM and view[stop_at - 1] != "!":
            stop_at -= 1
        if stop_at > start:
            yield start, stop_at


def language_spans(view: str) -> Iterator[Span]:
    """Value spans of passwords (kind ``password``) and PINs (``pin``) in these languages."""
    for match in _CUE.finditer(view):
        for start, end in _tokens(view, match.end()):
            if password_shaped(view[start:end], strict=False):
                yield start, end, "password"
                break
    for match in _PIN_CUE.finditer(view):
        for start, end in _tokens(view, match.end()):
            value = view[start:end]
            if value.isdigit():
                if 4 <= len(value) <= 8:
                    yield start, end, "pin"
                break
