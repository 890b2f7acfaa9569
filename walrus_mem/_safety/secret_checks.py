"""Validated secret detectors: checksums, word lists and entropy, after normalisation.

:func:`walrus_mem.safety.redact_secrets` runs the provider patterns of
:mod:`walrus_mem.safety` *and* the detectors here, all on a normalised view of
the text (:func:`normalised_view`: NFKC, invisible and bidi characters removed,
spaced-out tokens joined) whose spans map back to the original characters, so
``ghp_ab\\u200bcd...`` or ``A K I A ...`` is found and the redaction covers the
original characters.

Each detector confirms what a regex alone cannot:

* payment cards: 13-19 digits (spaces or dashes allowed), a known issuer
  prefix and the Luhn checksum;
* IBAN: country code, the country's length and the ISO 7064 mod-97 check;
* US SSN: ``AAA-GG-SSSS`` outside the never-issued ranges (area 000, 666,
  900-999; group 00; serial 0000); nine bare digits only when labelled;
* BIP39 seed phrases: 12-24 words in a row from the official English word list
  (shipped by the ``mnemonic`` package);
* hex and base64 keys: entropy plus context (a label such as "private key",
  or an AWS key id nearby); 64-hex strings next to hash words are left alone;
* env-style assignments ``*_PASSWORD=``, ``*_TOKEN=``, ``*_SECRET=``,
  ``*_KEY=`` (placeholders such as ``${VAR}`` or ``<your-key>`` excepted);
* natural-language passwords: "my bank login is X", "I use X as my ...
  password", "the PIN for my card is 4821"; in more languages and shapes
  (Wi-Fi keys, "X is what I type", "I use X for the bank") in
  :mod:`walrus_mem._safety.secret_phrases`, which validates the value's shape.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from functools import lru_cache
from typing import Final

from .secret_ids import id_spans
from .secret_labelled import labelled_spans
from .secret_languages import language_spans
from .secret_phrases import phrase_spans

__all__ = [
    "Span",
    "bip39_words",
    "iban_valid",
    "luhn_valid",
    "normalised_view",
    "shannon_entropy",
    "ssn_valid",
    "validated_spans",
]

Span = tuple[int, int, str]  # start, end (in the normalised view), kind

# ---------------------------------------------------------------------------
# normalisation with an index map back to the original text
# ---------------------------------------------------------------------------

_DROP: Final = frozenset(
    "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
# Runs of >= 8 single visible characters separated by single spaces: "A K I A 2 ..."
_SPACED: Final = re.compile(r"(?<!\S)(?:[^\s] ){7,}[^\s](?!\S)")


def normalised_view(text: str) -> tuple[str, list[int]]:
    """NFKC per character, invisibles dropped, spaced-out runs joined.

    Returns the view and, for every character of it, the index of the
    original character it came from.
    """
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        if ch in _DROP:
            continue
        folded = unicodedata.normalize("NFKC", ch) if ord(ch) > 127 else ch
        for piece in folded:
            out.append(piece)
            index.append(i)
    view = "".join(out)
    if _SPACED.search(view):
        kept_chars: list[str] = []
        kept_index: list[int] = []
        cursor = 0
        for match in _SPACED.finditer(view):
            kept_chars.extend(view[cursor:match.start()])
            kept_index.extend(index[cursor:match.start()])
            for j in range(match.start(), match.end()):
                if view[j] != " ":
                    kept_chars.append(view[j])
                    kept_index.append(index[j])
            cursor = match.end()
        kept_chars.extend(view[cursor:])
        kept_index.extend(index[cursor:])
        view, index = "".join(kept_chars), kept_index
    return view, index


# ---------------------------------------------------------------------------
# validators
# ---------------------------------------------------------------------------


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check used by payment cards."""
    if not digits.isdigit() or len(digits) < 2:
        return False
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


# Issuer prefixes (IIN ranges) of the major networks.
_CARD_PREFIX: Final = re.compile(
    r"4\d{12}(?:\d{3}){0,2}"                              # Visa 13/16/19
    r"|(?:5[1-5]\d{2}|222[1-9]|22[3-9]\d|2[3-6]\d{2}|27[01]\d|2720)\d{12}"  # Mastercard
    r"|3[47]\d{13}"                                       # Amex
    r"|(?:6011|65\d{2}|64[4-9]\d)\d{12,15}"               # Discover
    r"|35(?:2[89]|[3-8]\d)\d{12,15}"                      # JCB
    r"|3(?:0[0-5]|[68]\d)\d{11,16}"                       # Diners
    r"|62\d{14,17}"                                       # UnionPay
    r"|(?:5018|5020|5038|5893|6304|6759|676[1-3])\d{8,15}"  # Maestro
)

_IBAN_LENGTHS: Final = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20,
    "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18,
    "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "JO": 30,
    "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24,
    "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24,
    "SM": 27, "TN": 24, "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}


def iban_valid(candidate: str) -> bool:
    """Country length and the ISO 7064 mod-97-10 check of an IBAN."""
    iban = re.sub(r"[\s-]", "", candidate).upper()
    if _IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban.isalnum():
        return False
    rearranged = iban[4:] + iban[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


def ssn_valid(area: str, group: str, serial: str) -> bool:
    """Outside the ranges the SSA never issues."""
    a = int(area)
    return a != 0 and a != 666 and a < 900 and int(group) != 0 and int(serial) != 0


@lru_cache(maxsize=1)
def bip39_words() -> frozenset[str]:
    """The official BIP39 English word list (2048 words), from ``mnemonic``."""
    from mnemonic import Mnemonic

    words = frozenset(Mnemonic("english").wordlist)
    if len(words) != 2048:  # pragma: no cover - a broken install
        raise RuntimeError("the BIP39 English word list does not have 2048 words")
    return words


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``."""
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0


# ---------------------------------------------------------------------------
# detectors (on the normalised view)
# ---------------------------------------------------------------------------

_F: Final = re.IGNORECASE

_CARD: Final = re.compile(r"(?<![\d.-])(?:\d[ -]?){12,18}\d(?![\d-]|\.\d)")
_IBAN: Final = re.compile(r"\b[A-Z]{2}\d{2}(?:[ -]?[A-Z0-9]{1,4}){3,8}\b", _F)
_SSN_DASHED: Final = re.compile(r"(?<![\d-])(\d{3})[- ](\d{2})[- ](\d{4})(?![\d-])")
_SSN_LABELLED: Final = re.compile(
    r"\b(?:ssn|social\s+security(?:\s+(?:number|no\.?|#))?|sozialversicherungsnummer"
    r"|tax\s+id|tin)\b[^\d\n]{0,20}(?<!\d)(?P<secret>(\d{3})(\d{2})(\d{4}))(?!\d)",
    _F,
)
_WORD: Final = re.compile(r"[a-z]+", _F)
# Separators allowed between seed words: spaces, commas, dashes, "1." / "2)" numbering.
_SEED_GAP: Final = re.compile(r"^(?:[\s,;|/-]|\d{1,2}[.):]\s*)*$")
_SEED_LABEL: Final = re.compile(
    r"\b(?:seed|mnemonic|recovery|backup|secret)\s+(?:phrase|words?|sentence)\b|\bwallet\b", _F
)

_HEX_RUN: Final = re.compile(r"\b(?:0x)?(?P<secret>[0-9a-f]{32,128})\b", _F)
_B64_RUN: Final = re.compile(r"(?<![A-Za-z0-9+/_-])(?P<secret>[A-Za-z0-9+/_-]{32,}={0,2})")
_KEY_CONTEXT: Final = re.compile(
    r"(?:priv(?:ate)?[\s_-]*key|privkey|secret|seed|signing[\s_-]*key|wallet|api[\s_-]*key"
    r"|access[\s_-]*key|master[\s_-]*key|encryption[\s_-]*key|hmac|credential|token"
    r"|password|passphrase|client[\s_-]*secret|key\s*(?:is|=|:)|\bkey\b)",
    _F,
)
_HASH_CONTEXT: Final = re.compile(
    r"\b(?:hash|sha-?\d*|md5|checksum|digest|commit|tx|txid|transaction|block|fingerprint"
    r"|uuid|etag|sri|integrity|address|contract)\b",
    _F,
)
_AWS_ID: Final = re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")

_ENV_ASSIGN: Final = re.compile(
    r"(?<![A-Za-z0-9_])(?:export\s+|set\s+|\$env:)?(?P<name>[A-Za-z][A-Za-z0-9_.-]*?"
    r"(?:pass(?:word|wd|phrase)?|pwd|token|secret|(?:api|access|private|secret|signing"
    r"|encryption|master|auth|app|client)[_.-]?key|key|credentials?|sas|sig))"
    r"\s*[:=]\s*(?P<q>[\"']?)(?P<secret>[^\s\"'`,;]{4,})(?P=q)",
    _F,
)
_PLACEHOLDER: Final = re.compile(
    r"^(?:\$\{?[\w.:-]+\}?|<[^>]*>|\{\{[^}]*\}\}|%[\w]+%|x{3,}|\*{3,}|\.{3,}|changeme"
    r"|your[\w-]*|redacted|none|null|true|false|example|placeholder|secret|password|todo"
    r"|tbd|\[redacted.*)$",
    _F,
)

_PASSWORD_NOUN = r"(?:password|passcode|passphrase|passwort|pass\s*word|pwd|pw|login|log-in"
_PASSWORD_NOUN += r"|sign-?in|credentials?)"
_NL_IS: Final = re.compile(
    r"\b(?:my|our|the|his|her|their|your)\s+(?:[\w'&.-]+\s+){0,3}?" + _PASSWORD_NOUN
    + r"\s+(?:(?:for|to|on|at)\s+[\w.@&' -]{1,30}?\s+)?(?:is|was|=|:|is\s+now|has\s+been\s+"
    r"(?:changed|set)\s+to|(?:got\s+)?changed\s+to)\s+[\"'`]?(?P<secret>[^\s\"'`]{4,})",
    _F,
)
_NL_USE: Final = re.compile(
    r"\b(?:i|we)\s+(?:use|used|am\s+using|'m\s+using|have\s+set|set|chose|picked)\s+[\"'`]?"
    r"(?P<secret>[^\s\"'`]{4,})[\"'`]?\s+(?:as|for)\s+(?:my|our|the)\s+(?:[\w'&.-]+\s+){0,3}?"
    + _PASSWORD_NOUN + r"\b",
    _F,
)
_NL_LOGIN_WITH: Final = re.compile(
    r"\b(?:log|sign)\s*(?:in|on)\s+(?:to\s+[\w.@ -]{1,30}?\s+)?with\s+(?:the\s+)?(?:password\s+)?"
    r"[\"'`]?(?P<secret>[^\s\"'`]{6,})",
    _F,
)
_PIN: Final = re.compile(
    r"\b(?:PIN|pin\s*(?:code|number)|passcode|unlock\s+code|door\s+code|alarm\s+code"
    r"|safe\s+code|gate\s+code|cvv|cvc|security\s+code)\b[^\d\n]{0,30}?(?<!\d)"
    r"(?P<secret>\d{3,8})(?!\d)",
    0,
)
_PIN_LOWER: Final = re.compile(
    r"\b(?:my|the|our)\s+(?:[\w'-]+\s+){0,2}?(?:pin|pin\s*code|passcode|cvv|cvc)\s+"
    r"(?:is|was|=|:)\s*(?P<secret>\d{3,8})(?!\d)",
    _F,
)
# Words that follow "login is" / "password was" without being a password.
_NOT_SECRET_WORDS: Final = frozenset(
    "stored kept saved managed set changed rotated required not never too very expired incorrect "
    "wrong weak strong reset same different empty blank long short secure unknown missing what "
    "something hidden encrypted hashed redacted on at of for to from only still also now being "
    "generated provided available needed listed written shared handled protected defined "
    "located updated invalid valid case under behind inside broken working fine ok okay done "
    "locked disabled enabled blocked failing failed slow fast easy hard simple complicated "
    "annoying gone lost forgotten sso google saml oauth a an the my your our their this that "
    "it in with through via using mine yours somewhere written printed taped".split()
)
_VALUE_TRIM: Final = ".,;:!?)]}>"


def _value_like_password(value: str, *, strict: bool) -> bool:
    """A plausible password: not a common word; with ``strict``, mixed character classes."""
    core = value.rstrip(_VALUE_TRIM)
    if len(core) < 4 or core.lower() in _NOT_SECRET_WORDS or core.startswith("[REDACTED"):
        return False
    if _PLACEHOLDER.match(core):
        return False
    if not strict:
        return True
    classes = sum((any(c.islower() for c in core), any(c.isupper() for c in core),
                   any(c.isdigit() for c in core), any(not c.isalnum() for c in core)))
    return classes >= 2 and len(core) >= 6


def _random_looking(value: str) -> bool:
    """Key material: letters and digits mixed (8+ characters), or long and high-entropy."""
    core = value.rstrip(_VALUE_TRIM)
    if _PLACEHOLDER.match(core):
        return False
    mixed = any(c.isdigit() for c in core) and any(c.isalpha() for c in core)
    return (mixed and len(core) >= 8) or (len(core) >= 20 and shannon_entropy(core) >= 3.5)


def _trimmed(match: re.Match[str], group: str = "secret") -> tuple[int, int]:
    start, end = match.span(group)
    while end > start and match.string[end - 1] in _VALUE_TRIM:
        end -= 1
    return start, end


def _cards(view: str) -> Iterator[Span]:
    for match in _CARD.finditer(view):
        digits = re.sub(r"\D", "", match.group(0))
        if 13 <= len(digits) <= 19 and _CARD_PREFIX.fullmatch(digits) and luhn_valid(digits):
            yield match.start(), match.end(), "payment_card"


def _ibans(view: str) -> Iterator[Span]:
    for match in _IBAN.finditer(view):
        text = match.group(0)
        # the greedy groups may run into a following word: shrink until valid
        parts = re.split(r"([ -])", text)
        for cut in range(len(parts), 0, -1):
            candidate = "".join(parts[:cut]).rstrip(" -")
            if iban_valid(candidate):
                yield match.start(), match.start() + len(candidate), "iban"
                break


def _ssns(view: str) -> Iterator[Span]:
    for match in _SSN_DASHED.finditer(view):
        if ssn_valid(*match.groups()):
            yield match.start(), match.end(), "us_ssn"
    for match in _SSN_LABELLED.finditer(view):
        if ssn_valid(match.group(2), match.group(3), match.group(4)):
            yield match.start("secret"), match.end("secret"), "us_ssn"


def _seed_phrases(view: str) -> Iterator[Span]:
    words = bip39_words()
    run: list[re.Match[str]] = []

    def flush() -> Iterator[Span]:
        if len(run) >= 12:
            yield run[0].start(), run[min(len(run), 24) - 1].end(), "bip39_seed_phrase"

    previous_end = 0
    for match in _WORD.finditer(view):
        gap = view[previous_end:match.start()]
        previous_end = match.end()
        word = match.group(0)
        if word.lower() in words and (not run or _SEED_GAP.match(gap)):
            run.append(match)
            continue
        yield from flush()
        run = [match] if word.lower() in words else []
    yield from flush()


def _keys(view: str) -> Iterator[Span]:
    for match in _HEX_RUN.finditer(view):
        value = match.group("secret")
        before = view[max(0, match.start() - 60):match.start()]
        after = view[match.end():match.end() + 20]
        if _HASH_CONTEXT.search(before) and not re.search(r"priv|secret|seed", before, _F):
            continue
        labelled = _KEY_CONTEXT.search(before) or _KEY_CONTEXT.search(after)
        prefixed = match.group(0).lower().startswith("0x") and len(value) == 64
        if (labelled or prefixed and not _HASH_CONTEXT.search(after)) and \
                shannon_entropy(value.lower()) >= 3.0:
            yield match.start(), match.end(), "hex_private_key" if len(value) >= 64 else "hex_key"
    ids = [m.end() for m in _AWS_ID.finditer(view)]
    for match in _B64_RUN.finditer(view):
        value = match.group("secret")
        if not (any(c.isdigit() for c in value) and any(c.isupper() for c in value)
                and any(c.islower() for c in value)):
            continue
        if shannon_entropy(value) < 4.0:
            continue
        before = view[max(0, match.start() - 60):match.start()]
        near_id = any(0 <= match.start() - end <= 120 or 0 <= end - match.start() <= 160
                      for end in ids)
        if near_id and len(value) == 40:
            yield match.start(), match.end(), "aws_secret_access_key"
        elif _KEY_CONTEXT.search(before) and not _HASH_CONTEXT.search(before):
            yield match.start(), match.end(), "high_entropy_key"


def _assignments(view: str) -> Iterator[Span]:
    for match in _ENV_ASSIGN.finditer(view):
        value = match.group("secret")
        if _PLACEHOLDER.match(value) or value.lower() in _NOT_SECRET_WORDS:
            continue
        name = match.group("name").lower()
        if name.endswith("key") and not re.search(r"[_.-]key$|apikey|privkey", name) \
                and name not in {"key", "accesskey", "secretkey", "apikey"}:
            continue  # "monkey=...", "turkey: ..."
        if re.search(r"(?:key|token|sig|sas|credentials?)$", name) and not _random_looking(value):
            continue  # "sort_key=created_at", "max_token=4096": a setting, not a secret
        start, end = _trimmed(match)
        if end > start:
            yield start, end, "env_secret"


def _natural_passwords(view: str) -> Iterator[Span]:
    for pattern, strict in ((_NL_IS, False), (_NL_USE, True), (_NL_LOGIN_WITH, True)):
        for match in pattern.finditer(view):
            noun = match.group(0).lower()
            is_login = "login" in noun or "log-in" in noun or "sign" in noun or "credential" in noun
            value = match.group("secret")
            if _value_like_password(value, strict=strict or is_login):
                start, end = _trimmed(match)
                yield start, end, "password"
    for pattern in (_PIN, _PIN_LOWER):
        for match in pattern.finditer(view):
            yield match.start("secret"), match.end("secret"), "pin"


# Provider tokens with a fixed prefix (beyond the ones in walrus_mem.safety).
_PREFIXED: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (kind, re.compile(rx))
    for kind, rx in (
        ("age_secret_key", r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b"),
        ("hashicorp_vault_token", r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}"),
        ("databricks_token", r"\bdapi[0-9a-f]{32}(?:-\d)?\b"),
        ("square_token", r"\bsq0(?:atp|csp|idp)-[0-9A-Za-z_-]{22,60}"),
        ("mapbox_secret_token", r"\bsk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{10,}"),
        ("postman_api_key", r"\bPMAK-[0-9a-f]{24}-[0-9a-f]{34}\b"),
        ("grafana_token", r"\bgl(?:sa|c)_[A-Za-z0-9_=+/-]{32,}"),
        ("terraform_token", r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}"),
        ("flyio_token", r"\bfo1_[A-Za-z0-9_-]{30,}"),
        ("supabase_token", r"\bsbp_[0-9a-f]{40}\b"),
        ("sentry_token", r"\bsntry[su]_[A-Za-z0-9_=+/-]{40,}"),
        ("newrelic_key", r"\bNRAK-[A-Z0-9]{27}\b"),
        ("docker_pat", r"\bdckr_pat_[A-Za-z0-9_-]{27,}"),
        ("pulumi_token", r"\bpul-[0-9a-f]{40}\b"),
        ("groq_api_key", r"\bgsk_[A-Za-z0-9]{40,}\b"),
        ("replicate_token", r"\br8_[A-Za-z0-9]{37}\b"),
        ("perplexity_key", r"\bpplx-[A-Za-z0-9]{40,}\b"),
        ("xai_api_key", r"\bxai-[A-Za-z0-9]{60,}\b"),
        ("linear_api_key", r"\blin_api_[A-Za-z0-9]{40}\b"),
        ("notion_token", r"\b(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})\b"),
        ("doppler_token", r"\bdp\.(?:st|ct|sa|scim|audit|pt)\.[A-Za-z0-9_.-]{30,}"),
        ("dropbox_token", r"\bsl\.[A-Za-z0-9_-]{60,}"),
        ("facebook_token", r"\bEAA[A-Za-z0-9]{80,}"),
        ("twitter_bearer", r"\bAAAAAAAAAAAAAAAAAAAAA[A-Za-z0-9%]{30,}"),
        ("alibaba_access_key", r"\bLTAI[A-Za-z0-9]{12,20}\b"),
        ("atlassian_token", r"\bATATT3[A-Za-z0-9_=-]{100,}"),
        ("braintree_token", r"\baccess_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}"),
        ("azure_sas_signature", r"(?<=[?&\s])sig=[A-Za-z0-9%+/=]{20,}"),
        ("bitcoin_wif_key", r"\b[5KL][1-9A-HJ-NP-Za-km-z]{50,51}\b"),
        ("shopify_token", r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b"),
        ("ssh_private_key_body", r"\bb3BlbnNzaC1rZXktdjE[A-Za-z0-9+/=]{40,}"),
    )
)


def _prefixed(view: str) -> Iterator[Span]:
    for kind, pattern in _PREFIXED:
        for match in pattern.finditer(view):
            yield match.start(), match.end(), kind


def validated_spans(view: str) -> list[Span]:
    """Every span the validated detectors find in a normalised view."""
    spans: list[Span] = []
    for detector in (_prefixed, _cards, _ibans, _ssns, _seed_phrases, _keys, _assignments,
                     _natural_passwords, phrase_spans, language_spans, labelled_spans,
                     id_spans):
        spans.extend(detector(view))
    return spans
