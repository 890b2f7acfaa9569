"""Passwords stated in plain language, in en, fr, de, es, pt (and it, nl, da).

:mod:`walrus_mem._safety.secret_checks` knows "my bank password is X". People also
write "Le mot de passe du wifi est X", "X is what I type to log in", "I use X
for both the bank and PayPal" or a Wi-Fi line with a network key and no word
"password". A cue alone is ordinary language ("my Wi-Fi is called BlueHouse5G",
"I use Chrome for the bank"), so every detector here *validates the value*:
it must look like a password (letters with digits or symbols, mixed classes,
not a common word, not an address or version number). Only the value's span
is reported; the sentence around it stays.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

__all__ = ["phrase_spans", "password_shaped"]

Span = tuple[int, int, str]
_F: Final = re.IGNORECASE
_VALUE: Final = r"[\"'`«“]?(?P<secret>[^\s\"'`«»“”,;]{4,64})"
_TRIM: Final = ".,;:!?)]}>\"'”»"

# A credential noun: saying one and then a value states a password.
_CRED: Final = (
    r"(?:pass(?:wor[dt]|wd|phrase|code|key|wort)?|pwd|pw|mdp|mot\s+de\s+passe|code\s+d'accès"
    r"|kennwort|zugangscode|contraseña|contrasena|senha|palavra-passe|parola\s+d'ordine"
    r"|wachtwoord|adgangskode|login|log-in|credentials?)"
)
# "key" / "code" only count next to a network word ("the key to the cabin" is no secret).
_NET: Final = r"(?:wi-?fi|wlan|wpa[23]?(?:-psk)?|psk|ssid|router|hotspot|réseau|red\s+wifi|rede)"
_NET_KEY: Final = r"(?:key|code|clé|clef|schlüssel|clave|chave|código|codice|sleutel|kode)"
# A cue, then (scanned token by token, same clause) the first password-shaped value.
_CUE: Final = re.compile(rf"\b{_CRED}\b(?!-)", _F)
# Words that link a cue to its value: "is", "est", "lautet", ":" ...
_LINK: Final = re.compile(
    r"^(?:is|was|are|est|c'est|ist|lautet|war|es|era|é|è|er|is:|=|:|->|→|-|–|now|nun|agora"
    r"|maintenant|ahora|ora|set|to)$", _F)
_NET_CUE: Final = re.compile(rf"\b{_NET}[\w-]*?(?:[\s-]{_NET_KEY})?\b|\b{_NET_KEY}\b", _F)
_NET_WORD: Final = re.compile(rf"\b{_NET}", _F)
_IN_WIFI_QR: Final = re.compile(r"WIFI:[TSPH]:[^\s]*$", _F)
# "key" / "code" / "clave" of an account or a device: "Mi clave del banco es X",
# "the code to unlock my laptop is X" (digits only are a PIN, handled elsewhere)
_ACCESS_CUE: Final = re.compile(rf"\b{_NET_KEY}\b", _F)
_NOT_ACCESS: Final = re.compile(
    r"\b(?:promo|promotional|discount|coupon|voucher|gift|referral|invite|invitation|booking"
    r"|confirmation|reference|tracking|postal|post|zip|area|country|dress|source|qr|bar|error"
    r"|status|product|colou?r|airport|flight|sort|branch|swift|bic|routing|tax|cupom|cupón"
    r"|código\s+(?:promocional|de\s+desconto|de\s+descuento))\s*$", _F)
_ACCESS_CONTEXT: Final = re.compile(
    r"\b(?:bank\w*|banco|banque|laptop|computer|pc|phone|telefone|teléfono|móvil|telemóvel"
    r"|handy|tablet|e-?mail|correo|account|cuenta|conta|compte|konto|unlock\w*|desbloque\w*"
    r"|déverrouill\w*|entsperr\w*|log\s*-?in|sign\s*-?in|acceso|acesso|accès|zugang|portal"
    r"|portail|vpn|netflix|paypal|icloud|gmail|ipad|iphone|mac|macbook|sblocc\w*|portatile"
    r"|portátil|computador|ordinateur|cellulare|telefono|conto|banca|posta|rechner)\b", _F)
_NET_KEY_NEAR: Final = re.compile(rf"\b{_NET_KEY}\b|\b{_CRED}\b", _F)
_TOKEN: Final = re.compile(r"[^\s\"'`«»“”,;]+")
_CLAUSE_END: Final = re.compile(r"[.!?]\s|\n|$")
_NAMING: Final = re.compile(
    r"\b(?:name[ds]?|called|network|ssid|heißt|s'appelle|se\s+llama|chama|hei[sß]t|nom|nombre"
    r"|nome|naam|model|channel|speed|band|standard)\b", _F)
# "user / pass" pairs after a login word: "Netflix login: a@b.c / Penguin!2023"
# "Hulu: lena@example.com / X": an e-mail address, a slash, then the value
_MAIL_PAIR: Final = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+\s*(?:/|\s\|\s)\s*" + _VALUE, _F)
_PAIR: Final = re.compile(
    r"\b(?:login|log-in|account|admin|user(?:name)?|credentials?|zugang|identifiants?|acesso"
    r"|acceso|cuenta|conta|compte)\b[^\n]{0,40}?\S+\s*(?:/|\s\|\s)\s*" + _VALUE, _F)
# "X is what I type to log in", "X is the one I use for Steam"
_IS_WHAT: Final = re.compile(
    r"(?:^|[\s(\"'])(?P<secret>[^\s\"'`,;]{6,64})[\"']?\s+(?:is|was|'s)\s+(?:what|the\s+(?:one|thing"
    r"|word|code)\s+(?:that\s+)?)\s*(?:i|we)\s+(?:type|enter|use|put\s+in|key\s+in)\b"
    r"|(?:^|\s)(?P<secret2>[^\s\"'`,;]{6,64})\s+(?:c'est\s+ce\s+que\s+je\s+(?:tape|saisis|mets)"
    r"|ist\s+(?:das,?\s+)?was\s+ich\s+(?:eintippe|eingebe)|es\s+lo\s+que\s+(?:escribo|tecleo|pongo)"
    r"|é\s+o\s+que\s+(?:eu\s+)?(?:digito|escrevo|uso))\b", _F)
# "I use X for both the bank and PayPal", "For Amazon I use X", "J'utilise X pour ma banque"
_USE: Final = re.compile(
    r"\b(?:i|we|je|j'|ich|wir|yo|eu|jeg)?\s*(?:use|used|type|enter|log\s*(?:in|into|on)\s+"
    r"(?:\S+\s+){0,4}?with|sign\s*in\s+(?:\S+\s+){0,4}?with|utilise|tape|saisis|benutze|verwende|nutze|tippe"
    r"(?:\s+immer)?|gebe(?:\s+immer)?|uso|utilizo|escribo|tecleo|digito|utilizo|bruger|gebruik)"
    r"\s+(?:always\s+|immer\s+|sempre\s+|siempre\s+|toujours\s+)?" + _VALUE, _F)
_ACCOUNT_CONTEXT: Final = re.compile(
    r"\b(?:bank\w*|paypal|log\s*(?:in|into|on)|login|sign\s*in|account|e-?mail|gmail|outlook"
    r"|netflix|amazon|spotify|steam|epic|portal|laptop|computer|vpn|router|wi-?fi|everything"
    r"|banque|compte|banco|cuenta|conta|konto|anmelden|einloggen|entrar|acceder|connecter"
    r"|portail|correo|posta|mail|icloud|apple\s+id|facebook|instagram)\b|\bbanken\b", _F)
# "my passphrase is correct horse battery staple": three to eight plain words that run
# to the end of the clause; a function word among them makes it prose ("is too short")
_PASSPHRASE: Final = re.compile(
    r"\b(?:pass\s*phrase|password|pass\s*word)"
    r"(?:\s+(?:for|to|of|on)\s+[\w.@ -]{1,30}?)?\s*(?:is|was|=|:|is\s+now)\s+"
    r"[\"'`“]?(?P<secret>[^\W\d_]+(?:[ -][^\W\d_]+){2,7})(?=[\"'`”]?\s*(?:[.,;!?)]|$|\n"
    r"|\s(?:and|but|so)\s))", _F)
_PROSE_WORDS: Final = frozenset(
    "the a an to for in of and or my your our his her their is was be not too very stored kept "
    "saved written same different required long short strong weak secure something nothing "
    "what that this it on at by from with as than still also never always changed reset "
    "expired wrong stuck managed set needs need must should will can".split()
)
_WORDLIKE: Final = re.compile(r"^[^\W\d_]+$")
# An e-mail address or a handle, not a value: "@" inside a password ("Lua@2024mar") is fine
_ADDRESS: Final = re.compile(r"^@|@[\w-]+(?:\.[\w-]+)+$")
# A template, not a value: "<your-password>", "${DB_PASS}", "{{ secret }}"
_TEMPLATE: Final = re.compile(r"^(?:<[^>]*>|\$\{?[\w.:-]+\}?|\{\{.*\}\}|%\w+%)$")
_HYPHENATED: Final = re.compile(r"^\(?[^\W\d_]+(?:['’-][^\W\d_]+)+\)?$")
_NOT_VALUES: Final = frozenset(
    "stored saved kept written taped somewhere inside under behind on in at the a an my your our "
    "same different required changed expired wrong correct long short strong weak secret unknown "
    "missing forgotten reset empty none null sur dans unter im no na en em debajo escrita escrito "
    "écrit écrite geändert mudou cambió changé sempre siempre toujours immer".split()
)


def password_shaped(value: str, *, strict: bool = True, symbol: bool = False) -> bool:
    """Letters with digits or symbols, not an address, a URL, a version or a common word.

    Next to a credential noun two character classes suffice ("sonnenblume1958");
    ``strict`` needs three (lower, upper, digit, symbol); ``symbol`` also a symbol
    and 7+ characters, which product names ("1Password", "GPT-4o") lack.
    """
    core = value.strip(_TRIM)
    if not 6 <= len(core) <= 64 or core.lower() in _NOT_VALUES or core.startswith("[REDACTED"):
        return False
    if _WORDLIKE.match(core) or _HYPHENATED.match(core) or core.isdigit() \
            or _ADDRESS.search(core) or _TEMPLATE.match(value.strip(" =:.,;!?")) \
            or "://" in core:
        return False
    if re.search(r"\d\.\d|^(?:www\.|/|~)|\.(?:com|org|net|io|pdf|png|jpg)$", core, _F):
        return False
    classes = sum((any(c.islower() for c in core), any(c.isupper() for c in core),
                   any(c.isdigit() for c in core), any(not c.isalnum() for c in core)))
    has_digit_or_symbol = any(not c.isalpha() for c in core)
    if not any(c.isalpha() for c in core) or not has_digit_or_symbol:
        return False
    if symbol and (len(core) < 7 or core.isalnum()):
        return False
    return classes >= 3 if strict else classes >= 2


def _span(match: re.Match[str], group: str = "secret") -> tuple[int, int] | None:
    if match.group(group) is None:
        return None
    start, end = match.span(group)
    while end > start and match.string[end - 1] in _TRIM:
        end -= 1
    return (start, end) if end > start else None


def _sentence(view: str, start: int) -> str:
    left = max(view.rfind(".", 0, start), view.rfind("\n", 0, start), -1)
    right = len(view)
    for stop in (". ", "\n"):
        found = view.find(stop, start)
        if found != -1:
            right = min(right, found)
    return view[left + 1:right]


def _values_after(view: str, pos: int, limit: int = 8) -> Iterator[tuple[re.Match[str], str]]:
    """The next ``limit`` tokens of the clause after ``pos``, with the text before each."""
    stop = _CLAUSE_END.search(view, pos)
    end = min(stop.start() if stop else len(view), pos + 80)
    for count, token in enumerate(_TOKEN.finditer(view, pos, end)):
        if count >= limit:
            return
        yield token, view[pos:token.start()]


def _first_value(view: str, pos: int, *, strict: bool) -> tuple[int, int] | None:
    """The value right after the cue or right after a linking word ("is", ":"), if shaped.

    Qualifiers between cue and link are skipped ("Passwort für mein Online-Banking
    lautet X"); any other token that is not the value ends the search, so "the
    password is stored in 1Password" yields nothing.
    """
    candidate_next = True
    for token, between in _values_after(view, pos):
        if _NAMING.search(between):
            return None  # "... is called X", "network X": a name, not a key
        word = token.group(0)
        linked = candidate_next or between.rstrip().endswith((":", "=", "/"))
        if linked and password_shaped(word, strict=strict):
            start, end = token.span()
            while end > start and view[end - 1] in _TRIM:
                end -= 1
            while start < end and view[start] in "\"'`«“([=:":
                start += 1
            return start, end
        if linked and not candidate_next:
            return None
        candidate_next = bool(_LINK.match(word.rstrip(":")) or word.endswith((":", "=")))
    return None


def phrase_spans(view: str) -> Iterator[Span]:
    """Value spans of passwords stated in plain language (kind ``password``)."""
    for match in _CUE.finditer(view):
        span = _first_value(view, match.end(), strict=False)
        if span:
            yield (*span, "password")
    for match in _NET_CUE.finditer(view):
        if _IN_WIFI_QR.search(view[max(0, match.start() - 60):match.end() + 3]):
            continue  # a QR payload "WIFI:T:WPA;S:..;P:..;;": secret_ids takes its P: field
        if not _NET_WORD.match(match.group(0)):  # a bare "key": only on a line about a network
            line_start = view.rfind("\n", 0, match.start()) + 1
            if not _NET_WORD.search(view, max(line_start, match.start() - 60),
                                    min(len(view), match.end() + 25)):
                continue
        # with a key/password word nearby two classes suffice, else three ("Home Wi-Fi: Tg7!...")
        keyed = bool(_NET_KEY_NEAR.search(view, match.start(), min(len(view), match.end() + 30)))
        span = _first_value(view, match.end(), strict=not keyed)
        if span:
            after = view[span[1]:span[1] + 12]
            if not re.match(r"\s*(?:network|netzwerk|réseau|red|rede)\b", after, _F):
                yield (*span, "password")
    for match in _ACCESS_CUE.finditer(view):
        if _NOT_ACCESS.search(view, max(0, match.start() - 25), match.start()):
            continue  # "discount code", "booking code": handed out, not a secret
        if _ACCESS_CONTEXT.search(view, max(0, match.start() - 40),
                                  min(len(view), match.end() + 40)):
            span = _first_value(view, match.end(), strict=False)
            if span:
                yield (*span, "password")
    for match in (*_PAIR.finditer(view), *_MAIL_PAIR.finditer(view)):
        if password_shaped(match.group("secret"), strict=True):
            span = _span(match)
            if span:
                yield (*span, "password")
    for match in _IS_WHAT.finditer(view):
        group = "secret" if match.group("secret") is not None else "secret2"
        if password_shaped(match.group(group), strict=False):
            span = _span(match, group)
            if span:
                yield (*span, "password")
    for match in _PASSPHRASE.finditer(view):
        words = re.split(r"[ -]", match.group("secret").lower())
        if not _PROSE_WORDS.intersection(words[:-1]) and words[0] not in _PROSE_WORDS:
            yield (*match.span("secret"), "password")
    for match in _USE.finditer(view):
        if password_shaped(match.group("secret"), strict=True, symbol=True) and \
                _ACCOUNT_CONTEXT.search(_sentence(view, match.start())):
            span = _span(match)
            if span:
                yield (*span, "password")
