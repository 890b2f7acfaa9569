"""National identity numbers, passport numbers, recovery codes and Wi-Fi QR keys.

Each id is confirmed by its published check rule, so a number of the same shape
with a wrong check digit (an order number, a phone number, a typo) stays:

* Spain DNI / NIE (mod-23 letter), Brazil CPF and CNPJ (two mod-11 digits),
  India Aadhaar (Verhoeff), France NIR (mod-97 key), Italy codice fiscale
  (check character), Netherlands BSN (11-test), UK National Insurance number
  (prefix and suffix rules: no checksum exists), Germany Steuer-ID (ISO 7064
  MOD 11,10 plus its digit-repetition rule) and Personalausweis (ICAO 7-3-1),
  Canada SIN and Sweden personnummer (Luhn, the latter on a real date), China
  resident id (ISO 7064 MOD 11-2 on a real date).

Shapes that a random number passes one time in ten (9-11 bare digits, Aadhaar,
SIN, Steuer-ID, BSN) also need a label nearby ("BSN", "Aadhaar", "SIN",
"Steuer-ID", ...); shapes with a letter check or a long checksum (DNI, NIE,
formatted CPF/CNPJ, NIR, codice fiscale, the Chinese id) count alone. Passport
numbers have no public check rule: only a labelled value counts. Only the value
is reported, never the sentence around it.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Iterator
from typing import Final

__all__ = [
    "cnpj_valid", "codice_fiscale_valid", "cpf_valid", "dni_valid", "id_spans", "nino_valid",
    "nir_valid", "steuer_id_valid", "verhoeff_valid", "nhs_valid", "pesel_valid",
    "hetu_valid", "za_id_valid", "au_tfn_valid", "pt_nif_valid", "be_national_valid",
    "jp_my_number_valid", "tr_tc_kimlik_valid", "cl_rut_valid", "sg_nric_valid",
]

Span = tuple[int, int, str]
_F: Final = re.IGNORECASE


def _digits(value: str) -> str:
    return re.sub(r"\D", "", value)


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        v = int(ch) * (2 if i % 2 else 1)
        total += v - 9 if v > 9 else v
    return total % 10 == 0


_DNI_LETTERS: Final = "TRWAGMYFPDXBNJZSQVHLCKE"


def dni_valid(value: str) -> bool:
    """Spanish DNI (8 digits + letter) or NIE (X/Y/Z + 7 digits + letter): mod-23 letter."""
    v = re.sub(r"[\s.-]", "", value).upper()
    if re.fullmatch(r"[XYZ]\d{7}[A-Z]", v):
        v = str("XYZ".index(v[0])) + v[1:]
    return bool(re.fullmatch(r"\d{8}[A-Z]", v)) and _DNI_LETTERS[int(v[:8]) % 23] == v[8]


def _mod11_digit(digits: str, weights: list[int]) -> int:
    r = sum(int(d) * w for d, w in zip(digits, weights, strict=True)) % 11
    return 0 if r < 2 else 11 - r


def cpf_valid(value: str) -> bool:
    d = _digits(value)
    if len(d) != 11 or len(set(d)) == 1:
        return False
    first = _mod11_digit(d[:9], list(range(10, 1, -1)))
    return first == int(d[9]) and _mod11_digit(d[:10], list(range(11, 1, -1))) == int(d[10])


def cnpj_valid(value: str) -> bool:
    d = _digits(value)
    if len(d) != 14 or len(set(d)) == 1:
        return False
    w = [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]
    return _mod11_digit(d[:12], w[1:]) == int(d[12]) and _mod11_digit(d[:13], w) == int(d[13])


_VD: Final = ((0, 1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 4, 0, 6, 7, 8, 9, 5),
              (2, 3, 4, 0, 1, 7, 8, 9, 5, 6), (3, 4, 0, 1, 2, 8, 9, 5, 6, 7),
              (4, 0, 1, 2, 3, 9, 5, 6, 7, 8), (5, 9, 8, 7, 6, 0, 4, 3, 2, 1),
              (6, 5, 9, 8, 7, 1, 0, 4, 3, 2), (7, 6, 5, 9, 8, 2, 1, 0, 4, 3),
              (8, 7, 6, 5, 9, 3, 2, 1, 0, 4), (9, 8, 7, 6, 5, 4, 3, 2, 1, 0))
_VP: Final = ((0, 1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 5, 7, 6, 2, 8, 3, 0, 9, 4),
              (5, 8, 0, 3, 7, 9, 6, 1, 4, 2), (8, 9, 1, 6, 0, 4, 3, 5, 2, 7),
              (9, 4, 5, 3, 1, 2, 6, 8, 7, 0), (4, 2, 8, 6, 5, 7, 3, 9, 0, 1),
              (2, 7, 9, 3, 8, 0, 6, 4, 1, 5), (7, 0, 4, 6, 9, 1, 3, 2, 5, 8))


def verhoeff_valid(value: str) -> bool:
    """Aadhaar: 12 digits, not starting with 0 or 1, Verhoeff check digit."""
    d = _digits(value)
    if len(d) != 12 or d[0] in "01":
        return False
    c = 0
    for i, ch in enumerate(reversed(d)):
        c = _VD[c][_VP[i % 8][int(ch)]]
    return c == 0


def nir_valid(value: str) -> bool:
    """French NIR: sex, year, month, department (2A/2B), commune, order, mod-97 key."""
    v = re.sub(r"[\s.-]", "", value).upper()
    m = re.fullmatch(r"([1-478])(\d{2})(\d{2})(\d{2}|2[AB])(\d{3})(\d{3})(\d{2})", v)
    if not m:
        return False
    month = int(m.group(3))
    if not (1 <= month <= 12 or 20 <= month <= 42 or 50 <= month <= 99):
        return False
    body = v[:13].replace("2A", "19").replace("2B", "18")
    return 97 - int(body) % 97 == int(m.group(7))


_CF_ODD: Final = dict(zip(
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    (1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3,
     6, 8, 12, 14, 16, 10, 22, 25, 24, 23), strict=True))


def codice_fiscale_valid(value: str) -> bool:
    v = value.upper()
    if not re.fullmatch(r"[A-Z]{6}[\dLMNPQRSTUV]{2}[ABCDEHLMPRST][\dLMNPQRSTUV]{2}[A-Z]"
                        r"[\dLMNPQRSTUV]{3}[A-Z]", v):
        return False
    total = sum(_CF_ODD[ch] if i % 2 == 0 else (int(ch) if ch.isdigit() else ord(ch) - 65)
                for i, ch in enumerate(v[:15]))
    return chr(65 + total % 26) == v[15]


def bsn_valid(value: str) -> bool:
    """Dutch BSN: the 11-test (weights 9..2, minus the last digit)."""
    d = _digits(value)
    if len(d) != 9 or d == "000000000":
        return False
    total = sum(int(x) * w for x, w in zip(d[:8], range(9, 1, -1), strict=True)) - int(d[8])
    return total % 11 == 0


_NINO_BAD_PREFIX: Final = frozenset({"BG", "GB", "NK", "KN", "TN", "NT", "ZZ"})


def nino_valid(value: str) -> bool:
    """UK National Insurance number: allowed prefix letters, six digits, suffix A-D."""
    v = re.sub(r"\s", "", value).upper()
    return bool(re.fullmatch(r"[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]\d{6}[A-D]", v)) \
        and v[:2] not in _NINO_BAD_PREFIX


def steuer_id_valid(value: str) -> bool:
    """German Steuer-ID: 11 digits, one digit twice or thrice, ISO 7064 MOD 11,10."""
    d = _digits(value)
    if len(d) != 11 or d[0] == "0":
        return False
    counts = sorted((d[:10].count(c) for c in set(d[:10])), reverse=True)
    if counts[0] not in (2, 3) or counts[1:].count(counts[0]) or any(c > 1 for c in counts[1:]):
        return False
    product = 10
    for ch in d[:10]:
        total = (int(ch) + product) % 10 or 10
        product = total * 2 % 11
    check = 11 - product
    return (0 if check == 10 else check) == int(d[10])


_ICAO: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def ausweis_valid(value: str) -> bool:
    """German Personalausweis serial (9 characters) + ICAO 9303 7-3-1 check digit."""
    v = value.upper()
    if not re.fullmatch(r"[CFGHJKLMNPRTVWXYZ][CFGHJKLMNPRTVWXYZ\d]{8}\d", v):
        return False
    total = sum(_ICAO.index(ch) * (7, 3, 1)[i % 3] for i, ch in enumerate(v[:9]))
    return total % 10 == int(v[9])


def sin_valid(value: str) -> bool:
    d = _digits(value)
    return len(d) == 9 and d[0] not in "08" and _luhn(d)


def _date_ok(year: int, month: int, day: int) -> bool:
    try:
        _dt.date(year, month, day)
    except ValueError:
        return False
    return True


def personnummer_valid(value: str) -> bool:
    """Swedish personnummer / samordningsnummer: a real date (day + 60 allowed) and Luhn."""
    d = _digits(value)
    if len(d) == 12:
        century, d = d[:2], d[2:]
        if century not in ("18", "19", "20"):
            return False
    if len(d) != 10:
        return False
    day = int(d[4:6])
    day -= 60 if day > 60 else 0
    return _date_ok(2000, int(d[2:4]), day) and _luhn(d)


def china_id_valid(value: str) -> bool:
    v = value.upper()
    if not re.fullmatch(r"[1-8]\d{16}[\dX]", v):
        return False
    if not _date_ok(int(v[6:10]), int(v[10:12]), int(v[12:14])) or not 1900 <= int(v[6:10]) < 2100:
        return False
    total = sum(int(ch) * (2 ** (17 - i) % 11) for i, ch in enumerate(v[:17]))
    return "10X98765432"[total % 11] == v[17]


def _weighted(digits: str, weights: tuple[int, ...]) -> int:
    return sum(int(d) * w for d, w in zip(digits, weights, strict=True))


def nhs_valid(value: str) -> bool:
    """UK NHS number: 10 digits, mod-11 check (weights 10..2)."""
    d = _digits(value)
    if len(d) != 10:
        return False
    check = 11 - _weighted(d[:9], (10, 9, 8, 7, 6, 5, 4, 3, 2)) % 11
    return check != 10 and (0 if check == 11 else check) == int(d[9])


def pesel_valid(value: str) -> bool:
    """Polish PESEL: a real date (century in the month) and weights 1-3-7-9."""
    d = _digits(value)
    if len(d) != 11:
        return False
    month = int(d[2:4])
    century = {0: 1900, 1: 2000, 2: 2100, 3: 2200, 4: 1800}[month // 20]
    if not _date_ok(century + int(d[:2]), month % 20, int(d[4:6])):
        return False
    return (10 - _weighted(d[:10], (1, 3, 7, 9, 1, 3, 7, 9, 1, 3)) % 10) % 10 == int(d[10])


def be_national_valid(value: str) -> bool:
    """Belgian national register number: mod-97 key (born 2000+: 2 prefixed)."""
    d = _digits(value)
    if len(d) != 11:
        return False
    body, key = int(d[:9]), int(d[9:])
    return key in (97 - body % 97, 97 - (2_000_000_000 + body) % 97)


def pt_nif_valid(value: str) -> bool:
    """Portuguese NIF: 9 digits, mod-11 (weights 9..2)."""
    d = _digits(value)
    if len(d) != 9 or d[0] == "0":
        return False
    check = 11 - _weighted(d[:8], (9, 8, 7, 6, 5, 4, 3, 2)) % 11
    return (0 if check >= 10 else check) == int(d[8])


_HETU_CHECK: Final = "0123456789ABCDEFHJKLMNPRSTUVWXY"
_HETU_CENTURY: Final = {"+": 1800, "-": 1900, "Y": 1900, "X": 1900, "W": 1900, "V": 1900,
                        "U": 1900, "A": 2000, "B": 2000, "C": 2000, "D": 2000, "E": 2000,
                        "F": 2000}


def hetu_valid(value: str) -> bool:
    """Finnish henkilötunnus DDMMYYCNNNK: a real date and the mod-31 check character."""
    v = value.upper()
    if len(v) != 11 or v[6] not in _HETU_CENTURY or not (v[:6] + v[7:10]).isdigit():
        return False
    if not _date_ok(_HETU_CENTURY[v[6]] + int(v[4:6]), int(v[2:4]), int(v[:2])):
        return False
    return _HETU_CHECK[int(v[:6] + v[7:10]) % 31] == v[10]


def za_id_valid(value: str) -> bool:
    """South African id: YYMMDD (a real date), 13 digits, Luhn."""
    d = _digits(value)
    return len(d) == 13 and _date_ok(2000, int(d[2:4]), int(d[4:6])) and _luhn(d)


def au_tfn_valid(value: str) -> bool:
    d = _digits(value)
    return len(d) == 9 and _weighted(d, (1, 4, 3, 7, 5, 8, 6, 9, 10)) % 11 == 0


def no_fnr_valid(value: str) -> bool:
    """Norwegian fødselsnummer: a real date (D-numbers: day + 40) and two mod-11 digits."""
    d = _digits(value)
    if len(d) != 11:
        return False
    day = int(d[:2]) - (40 if int(d[:2]) > 40 else 0)
    if not _date_ok(2000, int(d[2:4]), day):
        return False
    k1 = 11 - _weighted(d[:9], (3, 7, 6, 1, 8, 9, 4, 5, 2)) % 11
    k2 = 11 - _weighted(d[:10], (5, 4, 3, 2, 7, 6, 5, 4, 3, 2)) % 11
    k1, k2 = (0 if k1 == 11 else k1), (0 if k2 == 11 else k2)
    return k1 == int(d[9]) and k2 == int(d[10])


def kr_rrn_valid(value: str) -> bool:
    """Korean resident registration number: a real date, gender digit, check digit."""
    d = _digits(value)
    if len(d) != 13 or d[6] not in "12345678" or not _date_ok(2000, int(d[2:4]), int(d[4:6])):
        return False
    check = (11 - _weighted(d[:12], (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5)) % 11) % 10
    return check == int(d[12])


def jp_my_number_valid(value: str) -> bool:
    """Japan's My Number (個人番号): 11 digits, a check digit (weights 2-7 then 2-6)."""
    d = _digits(value)
    if len(d) != 12:
        return False
    total = sum(int(d[10 - i]) * (i + 2 if i < 6 else i - 4) for i in range(11))
    remainder = total % 11
    return (0 if remainder <= 1 else 11 - remainder) == int(d[11])


def tr_tc_kimlik_valid(value: str) -> bool:
    """Turkish T.C. Kimlik No: 11 digits, first not 0, two check digits."""
    d = [int(c) for c in _digits(value)]
    if len(d) != 11 or d[0] == 0:
        return False
    tenth = (sum(d[0:9:2]) * 7 - sum(d[1:8:2])) % 10
    return tenth == d[9] and sum(d[:10]) % 10 == d[10]


def cl_rut_valid(value: str) -> bool:
    """Chilean RUT / RUN: 7-8 digits and a mod-11 check character (0-9 or K)."""
    v = re.sub(r"[\s.]", "", value).upper()
    m = re.fullmatch(r"(\d{7,8})-?([\dK])", v)
    if not m:
        return False
    total = sum(int(c) * (2 + i % 6) for i, c in enumerate(reversed(m.group(1))))
    check = 11 - total % 11
    return {11: "0", 10: "K"}.get(check, str(check)) == m.group(2)


def sg_nric_valid(value: str) -> bool:
    """Singapore NRIC / FIN (S, T, F, G series): 7 digits and a check letter."""
    v = value.upper()
    if not re.fullmatch(r"[STFG]\d{7}[A-Z]", v):
        return False
    total = sum(int(c) * w for c, w in zip(v[1:8], (2, 7, 6, 5, 4, 3, 2), strict=True))
    total += 4 if v[0] in "TG" else 0
    letters = "JZIHGFEDCBA" if v[0] in "ST" else "XWUTRQPNMLK"
    return letters[total % 11] == v[8]


def dk_cpr_valid(value: str) -> bool:
    """Danish CPR DDMMYY-SSSS: a real date (no checksum since 2007: label needed)."""
    d = _digits(value)
    return len(d) == 10 and _date_ok(2000, int(d[2:4]), int(d[:2]))


# ---------------------------------------------------------------------------
# detectors
# ---------------------------------------------------------------------------

# ASCII boundaries: "身份证号是3301..." has no \b between the CJK word and the digits.
_L: Final = r"(?<![0-9A-Za-z])"
_R: Final = r"(?![0-9A-Za-z])"
_NUM_L: Final = r"(?<![0-9A-Za-z./-])"
_NUM_R: Final = r"(?![0-9A-Za-z]|[./-]\d)"
_S: Final = r"[ .-]?"


def _label(words: str, flags: int = _F) -> re.Pattern[str]:
    return re.compile(words, flags)


# kind, value pattern, validator, label (None: the checksum alone is enough),
# label_only_if: a predicate on the value; when it holds the label is needed.
_Rule = tuple[str, re.Pattern[str], Callable[[str], bool], re.Pattern[str] | None,
              Callable[[str], bool]]

_ALWAYS: Final = lambda _v: True  # noqa: E731
_NEVER: Final = lambda _v: False  # noqa: E731
_BARE: Final = lambda v: v.isdigit()  # noqa: E731

_RULES: Final[tuple[_Rule, ...]] = (
    ("es_dni", re.compile(_NUM_L + r"\d{2}\.?\d{3}\.?\d{3}[ -]?[A-Z]" + _R, _F), dni_valid,
     None, _NEVER),
    ("es_nie", re.compile(_L + r"[XYZ][ -]?\d{7}[ -]?[A-Z]" + _R, _F), dni_valid, None, _NEVER),
    ("br_cpf", re.compile(_NUM_L + rf"\d{{3}}{_S}\d{{3}}{_S}\d{{3}}[ .-]?\d{{2}}" + _NUM_R),
     cpf_valid, _label(r"\bcpf\b|cadastro\s+de\s+pessoas?"), _BARE),
    ("br_cnpj", re.compile(_NUM_L + r"\d{2}\.?\d{3}\.?\d{3}/?\d{4}-?\d{2}" + _NUM_R), cnpj_valid,
     _label(r"\bcnpj\b"), _BARE),
    ("in_aadhaar", re.compile(_NUM_L + r"[2-9]\d{3}[ -]?\d{4}[ -]?\d{4}" + _NUM_R),
     verhoeff_valid, _label(r"aadh?aa?r|\bu?idai\b|\buid\b|आधार|\bkyc\b|\be-?kyc\b"), _ALWAYS),
    ("fr_nir", re.compile(_NUM_L + rf"[1-478]{_S}\d{{2}}{_S}\d{{2}}{_S}(?:\d{{2}}|2[AB]){_S}"
                          rf"\d{{3}}{_S}\d{{3}}{_S}\d{{2}}" + _NUM_R, _F), nir_valid, None, _NEVER),
    ("it_codice_fiscale", re.compile(_L + r"[A-Z]{6}[\dA-Z]{2}[A-Z][\dA-Z]{2}[A-Z][\dA-Z]{3}[A-Z]"
                                     + _R, _F), codice_fiscale_valid, None, _NEVER),
    ("nl_bsn", re.compile(_NUM_L + rf"\d{{3}}{_S}\d{{3}}{_S}\d{{3}}|\d{{4}}\.\d{{2}}\.\d{{3}}"
                          + _NUM_R), bsn_valid,
     _label(r"\bbsn\b|burger\s*service\s*nummer|burgerservicenummer|sofi-?nummer"
            r"|citizen\s+service\s+number"), _ALWAYS),
    ("uk_nino", re.compile(_L + r"[A-Z]{2}\s?\d{2}\s?\d{2}\s?\d{2}\s?[A-D]" + _R, _F), nino_valid,
     _label(r"(?i:national\s+insurance|\bnino\b|\bni\s*(?:number|no\b|#))|\bNI\b|\bNINO\b", 0),
     lambda v: not re.fullmatch(r"[A-Z]{2} \d{2} \d{2} \d{2} [A-D]", v)),
    ("de_steuer_id", re.compile(_NUM_L + r"[1-9]\d[ ./]?\d{3}[ ./]?\d{3}[ ./]?\d{3}" + _NUM_R),
     steuer_id_valid,
     _label(r"steuer[\s-]*id|steuer[\s-]*identifikations|identifikationsnummer|\bidnr\b"
            r"|\bid-?nr\b|\btax\s*(?:id|identification)|\btin\b|steuernummer"), _ALWAYS),
    ("de_personalausweis", re.compile(_L + r"[CFGHJKLMNPRTVWXYZ][CFGHJKLMNPRTVWXYZ\d]{8}\d" + _R,
                                      _F), ausweis_valid,
     _label(r"personalausweis|ausweis\s*-?(?:nummer|nr)|ausweisnummer|\bid[\s-]*card"
            r"|identity\s+card|pa-?nummer"), _ALWAYS),
    ("ca_sin", re.compile(_NUM_L + rf"[1-79]\d{{2}}{_S}\d{{3}}{_S}\d{{3}}" + _NUM_R), sin_valid,
     _label(r"(?i:social\s+insurance|assurance\s+sociale)|\bSIN\b|\bNAS\b", 0), _ALWAYS),
    ("se_personnummer", re.compile(_NUM_L + r"(?:(?:18|19|20)\d{2})?\d{4}\d{2}[-+ ]?\d{4}"
                                   + _NUM_R), personnummer_valid,
     _label(r"person(?:nummer|numret|nr)|samordningsnummer|personal\s+(?:identity|id"
            r"|identification)\s+(?:number|no)|swedish\s+(?:id|personal)"),
     lambda v: not re.fullmatch(r"(?:19|20)\d{6}-\d{4}", v)),
    ("cn_resident_id", re.compile(_NUM_L + r"[1-8]\d{16}[\dX]" + _R, _F), china_id_valid, None,
     _NEVER),
    ("uk_nhs_number", re.compile(_NUM_L + r"\d{3}[ -]?\d{3}[ -]?\d{4}" + _NUM_R), nhs_valid,
     _label(r"\bnhs\b"), _ALWAYS),
    ("pl_pesel", re.compile(_NUM_L + r"\d{11}" + _NUM_R), pesel_valid, _label(r"\bpesel\b"),
     _ALWAYS),
    ("be_national_number", re.compile(_NUM_L + r"\d{2}\.?\d{2}\.?\d{2}[ -]?\d{3}\.?\d{2}"
                                      + _NUM_R), be_national_valid,
     _label(r"rijksregister|registre\s+national|num[ée]ro\s+national|national\s+(?:register|"
            r"registration)?\s*number|\bniss\b|\binsz\b|belgian\s+id"), _ALWAYS),
    ("pt_nif", re.compile(_NUM_L + r"\d{3}[ .]?\d{3}[ .]?\d{3}" + _NUM_R), pt_nif_valid,
     _label(r"\bnif\b|contribuinte"), _ALWAYS),
    ("fi_hetu", re.compile(_L + r"\d{6}[-+A-FU-Y]\d{3}[0-9A-Y]" + _R, _F), hetu_valid, None,
     _NEVER),
    ("za_id", re.compile(_NUM_L + r"\d{6}[ -]?\d{4}[ -]?\d{3}" + _NUM_R), za_id_valid,
     _label(r"\b(?:sa|south\s+african)\s+id\b|\bid\s*(?:number|no\b)|identity\s+number"),
     _ALWAYS),
    ("au_tfn", re.compile(_NUM_L + r"\d{3}[ -]?\d{3}[ -]?\d{3}" + _NUM_R), au_tfn_valid,
     _label(r"\btfn\b|tax\s+file\s+number"), _ALWAYS),
    ("no_fodselsnummer", re.compile(_NUM_L + r"\d{6}[ ]?\d{5}" + _NUM_R), no_fnr_valid,
     _label(r"f[øo]dselsnummer|personnummer|national\s+identity\s+number|norwegian\s+id"),
     _ALWAYS),
    ("kr_rrn", re.compile(_NUM_L + r"\d{6}-?\d{7}" + _NUM_R), kr_rrn_valid,
     _label(r"주민등록번호|주민번호|resident\s+registration|\brrn\b"), _ALWAYS),
    ("jp_my_number", re.compile(_NUM_L + r"\d{4}[ -]?\d{4}[ -]?\d{4}" + _NUM_R),
     jp_my_number_valid,
     # "My Number" capitalised only: "my number is ..." is usually a phone number
     _label(r"マイナンバー|個人番号|My\s?Number|MyNumber|(?i:individual\s+number)", 0), _ALWAYS),
    ("tr_tc_kimlik", re.compile(_NUM_L + r"[1-9]\d{10}" + _NUM_R), tr_tc_kimlik_valid,
     _label(r"\bt\.?\s?c\.?\s+kimlik|kimlik\s*(?:no|numara)|\btckn\b|\btc\s*no\b"
            r"|turkish\s+(?:national\s+)?id"), _ALWAYS),
    ("cl_rut", re.compile(_NUM_L + r"\d{1,2}\.?\d{3}\.?\d{3}-?[\dK]" + _R, _F), cl_rut_valid,
     _label(r"\brut\b|\brun\b|rol\s+[úu]nico"), lambda v: not re.fullmatch(
         r"\d{1,2}\.\d{3}\.\d{3}-[\dKk]", v)),
    ("sg_nric", re.compile(_L + r"[STFG]\d{7}[A-Z]" + _R, _F), sg_nric_valid, None, _NEVER),
    ("dk_cpr", re.compile(_NUM_L + r"\d{6}-?\d{4}" + _NUM_R), dk_cpr_valid,
     _label(r"\bcpr\b|cpr-?nummer"), _ALWAYS),
)
_LABEL_BEFORE: Final = 60
_LABEL_AFTER: Final = 25


def _labelled(view: str, start: int, end: int, label: re.Pattern[str]) -> bool:
    line_start = view.rfind("\n", 0, start) + 1
    line_end = view.find("\n", end)
    window_end = min(end + _LABEL_AFTER, line_end if line_end != -1 else len(view))
    return bool(label.search(view, max(line_start, start - _LABEL_BEFORE), start)
                or label.search(view, end, window_end))


def _national_ids(view: str) -> Iterator[Span]:
    for kind, pattern, valid, label, needs_label in _RULES:
        for match in pattern.finditer(view):
            value = match.group(0)
            if not valid(value):
                continue
            if label is None or not needs_label(value) \
                    or _labelled(view, match.start(), match.end(), label):
                yield match.start(), match.end(), kind


# Passport numbers: no public check rule, so only after a passport label.
_PASSPORT: Final = re.compile(
    r"(?:passport|reisepass|passeport|pasaporte|passaporto|paspoort|passnummer|pass-?nr)"
    r"[^\S\n]*(?:(?:number|no\.?|nr\.?|nummer|#|num(?:éro|ero)?|n[°º]|id)[^\S\n]*)?"
    r"[^\n\d]{0,18}?" + _L + r"(?P<secret>[A-Z]{0,3}\d[A-Z\d]{5,9})" + _R, _F)
_PASSPORT_FILLER_NOT: Final = re.compile(
    r"expir|valid|issued|renew|photo|foto|office|appointment|cost|fee|since|until|from|in\s*$",
    _F)


_NUMBER_WORD: Final = re.compile(r"\b(?:number|no|nr|nummer|num[ée]ro|número|numero)\b|#|n[°º]",
                                 _F)


def _passports(view: str) -> Iterator[Span]:
    for match in _PASSPORT.finditer(view):
        value = match.group("secret")
        filler = view[match.start():match.start("secret")]
        # German passports mix letters in ("C4J9R7XK2"): with a number word, 2 digits do
        digits_needed = 2 if _NUMBER_WORD.search(filler) and len(value) >= 8 else 5
        if sum(c.isdigit() for c in value) < digits_needed or _PASSPORT_FILLER_NOT.search(filler):
            continue
        if re.fullmatch(r"(?:19|20)\d{6}", value):  # a date written YYYYMMDD
            continue
        yield match.start("secret"), match.end("secret"), "passport_number"


# Recovery / backup codes: a label, then one or more code-shaped tokens.
_RECOVERY_LABEL: Final = re.compile(
    r"\b(?:recovery|backup|back-up|2fa|two[\s-]factor|mfa|emergency|scratch|2-step"
    r"|verification\s+backup)\s+codes?\b|códigos?\s+de\s+(?:recuperación|respaldo"
    r"|recuperação|backup|seguridad|reserva)|codes?\s+de\s+(?:récupération|secours|sauvegarde)"
    r"|(?:wiederherstellungs|backup|notfall|sicherungs)-?codes?\b|codici\s+di\s+(?:recupero"
    r"|backup)", _F)
_CODE: Final = re.compile(
    r"(?:[A-Za-z0-9]{3,6}-){1,5}[A-Za-z0-9]{3,6}|\d{3,5}[ ]\d{3,5}(?![ ]\d)|\d{6,12}"
    r"|[A-Za-z0-9]{8,16}")
_CODE_GAP: Final = re.compile(r"^(?:[\s,;:|/()\-–]|\d{1,2}[.)]\s|and|und|et|y|e|or|\n)*$", _F)
_LABEL_TO_CODES: Final = 60
_NUMBERING: Final = re.compile(r"\b\d{1,2}[.)]\s")
_SENTENCE_END: Final = re.compile(r"[.!?]\s|\n\s*\n")
# Between the label and the first code: "... codes to +44 7700 ..." is a phone number.
_NOT_CODE_LEAD: Final = re.compile(r"\b(?:to|at|call|text|send|phone|via|by|until|from)\b|[+]", _F)


def _code_shaped(token: str) -> bool:
    digits = sum(c.isdigit() for c in token)
    if re.fullmatch(r"(?:19|20)\d\d-\d\d-\d\d", token):
        return False
    if "-" in token or " " in token:
        return digits >= 1
    if token.isdigit():
        return True
    return digits >= 2 and any(c.isalpha() for c in token)


def _shape(token: str) -> str:
    return re.sub(r"[A-Za-z0-9]", "x", token)


def _recovery_codes(view: str) -> Iterator[Span]:
    for label in _RECOVERY_LABEL.finditer(view):
        stop = _LABEL_TO_CODES
        cursor = label.end()
        started = False
        shape = ""
        for token in _CODE.finditer(view, cursor, min(len(view), cursor + 600)):
            gap = view[cursor:token.start()]
            if not started:
                lead = view[label.end():token.start()]
                unnumbered = _NUMBERING.sub(" ", gap)
                if token.start() - label.end() > stop or _SENTENCE_END.search(unnumbered) \
                        or _NOT_CODE_LEAD.search(lead):
                    break
            elif not _CODE_GAP.match(gap):
                break
            # a list of codes is uniform: once one is seen, the same grouping counts
            # even without a digit ("2ETD-H3JA JUKU-QSER")
            same_shape = started and "-" in shape and _shape(token.group(0)) == shape
            if not (_code_shaped(token.group(0)) or same_shape):
                if started:
                    break
                cursor = token.end()
                continue
            if not started:
                shape = _shape(token.group(0))
            started = True
            cursor = token.end()
            yield token.start(), token.end(), "recovery_code"


# Wi-Fi QR payloads: WIFI:T:WPA;S:<ssid>;P:<key>;;
_WIFI_QR: Final = re.compile(r"WIFI:(?:[A-Z]:(?:\\.|[^;\\])*;)*?P:(?P<secret>(?:\\.|[^;\\])+)", _F)


def _wifi_qr(view: str) -> Iterator[Span]:
    for match in _WIFI_QR.finditer(view):
        yield match.start("secret"), match.end("secret"), "password"


_DIGIT: Final = re.compile(r"\d")


def id_spans(view: str) -> Iterator[Span]:
    """Value spans of national ids, labelled passport numbers, recovery codes, QR Wi-Fi keys."""
    yield from _wifi_qr(view)
    if not _DIGIT.search(view):
        return  # every id, passport number and first recovery code has a digit
    yield from _national_ids(view)
    yield from _passports(view)
    yield from _recovery_codes(view)
