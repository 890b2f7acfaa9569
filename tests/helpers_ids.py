"""Synthetic national identity numbers with valid check digits (never real people's).

Written independently of walrus_mem._safety.secret_ids so the two implementations check
each other: every generator computes its check digit from the published rule,
``corrupt`` changes the check part so the shape stays and the checksum fails.
"""

from __future__ import annotations

import random

_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def dni(rng: random.Random) -> str:
    n = rng.randrange(10_000_000, 99_999_999)
    return f"{n:08d}{_DNI_LETTERS[n % 23]}"


def nie(rng: random.Random) -> str:
    lead = rng.randrange(3)
    n = rng.randrange(0, 9_999_999)
    return f"{'XYZ'[lead]}{n:07d}{_DNI_LETTERS[int(f'{lead}{n:07d}') % 23]}"


def _cpf_digit(digits: list[int]) -> int:
    total = sum(d * w for d, w in zip(digits, range(len(digits) + 1, 1, -1), strict=True))
    return (total * 10 % 11) % 10


def cpf(rng: random.Random) -> str:
    d = [rng.randrange(10) for _ in range(9)]
    d.append(_cpf_digit(d))
    d.append(_cpf_digit(d))
    s = "".join(map(str, d))
    return f"{s[:3]}.{s[3:6]}.{s[6:9]}-{s[9:]}"


def _cnpj_digit(digits: list[int]) -> int:
    weights = [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2][-len(digits):]
    r = sum(d * w for d, w in zip(digits, weights, strict=True)) % 11
    return 0 if r < 2 else 11 - r


def cnpj(rng: random.Random) -> str:
    d = [rng.randrange(10) for _ in range(8)] + [0, 0, 0, 1]
    d.append(_cnpj_digit(d))
    d.append(_cnpj_digit(d))
    s = "".join(map(str, d))
    return f"{s[:2]}.{s[2:5]}.{s[5:8]}/{s[8:12]}-{s[12:]}"


_VD = [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 0, 6, 7, 8, 9, 5],
       [2, 3, 4, 0, 1, 7, 8, 9, 5, 6], [3, 4, 0, 1, 2, 8, 9, 5, 6, 7],
       [4, 0, 1, 2, 3, 9, 5, 6, 7, 8], [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
       [6, 5, 9, 8, 7, 1, 0, 4, 3, 2], [7, 6, 5, 9, 8, 2, 1, 0, 4, 3],
       [8, 7, 6, 5, 9, 3, 2, 1, 0, 4], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]]
_VP = [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 5, 7, 6, 2, 8, 3, 0, 9, 4],
       [5, 8, 0, 3, 7, 9, 6, 1, 4, 2], [8, 9, 1, 6, 0, 4, 3, 5, 2, 7],
       [9, 4, 5, 3, 1, 2, 6, 8, 7, 0], [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
       [2, 7, 9, 3, 8, 0, 6, 4, 1, 5], [7, 0, 4, 6, 9, 1, 3, 2, 5, 8]]
_VINV = [0, 4, 3, 2, 1, 5, 6, 7, 8, 9]


def _verhoeff_digit(s: str) -> int:
    c = 0
    for i, ch in enumerate(reversed(s)):
        c = _VD[c][_VP[(i + 1) % 8][int(ch)]]
    return _VINV[c]


def aadhaar(rng: random.Random) -> str:
    body = str(rng.randrange(2, 10)) + "".join(str(rng.randrange(10)) for _ in range(10))
    s = body + str(_verhoeff_digit(body))
    return f"{s[:4]} {s[4:8]} {s[8:]}"


def nir(rng: random.Random) -> str:
    sex = rng.choice("12")
    yy = rng.randrange(100)
    mm = rng.randrange(1, 13)
    dept = rng.choice(["75", "69", "13", "33", "2A", "59", "44"])
    commune, order = rng.randrange(1, 990), rng.randrange(1, 999)
    body = f"{sex}{yy:02d}{mm:02d}{dept}{commune:03d}{order:03d}"
    number = int(body.replace("2A", "19").replace("2B", "18"))
    key = 97 - number % 97
    return f"{body[0]} {body[1:3]} {body[3:5]} {body[5:7]} {body[7:10]} {body[10:13]} {key:02d}"


_CF_ODD = dict(zip("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                   [1, 0, 5, 7, 9, 13, 15, 17, 19, 21] * 1
                   + [1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14,
                      16, 10, 22, 25, 24, 23], strict=True))


def _cf_char(body: str) -> str:
    total = 0
    for i, ch in enumerate(body):
        if i % 2 == 0:
            total += _CF_ODD[ch]
        else:
            total += int(ch) if ch.isdigit() else ord(ch) - 65
    return chr(65 + total % 26)


def codice_fiscale(rng: random.Random) -> str:
    letters = "".join(rng.choice("BCDFGLMNPRSTVZ") for _ in range(6))
    body = (letters + f"{rng.randrange(40, 100):02d}" + rng.choice("ABCDEHLMPRST")
            + f"{rng.randrange(1, 32) + rng.choice([0, 40]):02d}"
            + rng.choice("ABCDEFGHLMZ") + f"{rng.randrange(1, 999):03d}")
    return body + _cf_char(body)


def bsn(rng: random.Random) -> str:
    while True:
        d = [rng.randrange(1, 10)] + [rng.randrange(10) for _ in range(7)]
        r = sum(x * w for x, w in zip(d, range(9, 1, -1), strict=True)) % 11
        if r < 10:
            return "".join(map(str, d)) + str(r)


def nino(rng: random.Random) -> str:
    first = rng.choice("ABCEGHJKLMNOPRSTWXYZ")
    second = rng.choice("ABCEGHJKLMNPRSTWXYZ")
    if first + second in {"BG", "GB", "NK", "KN", "TN", "NT", "ZZ"}:
        second = "A"
    d = f"{rng.randrange(1_000_000):06d}"
    return f"{first}{second} {d[:2]} {d[2:4]} {d[4:]} {rng.choice('ABCD')}"


def _mod11_10(digits: str) -> int:
    product = 10
    for ch in digits:
        total = (int(ch) + product) % 10 or 10
        product = total * 2 % 11
    check = 11 - product
    return 0 if check == 10 else check


def steuer_id(rng: random.Random) -> str:
    while True:
        digits = rng.sample("0123456789", 9)
        if digits[0] == "0":
            continue
        dup = rng.randrange(1, 9)
        body = digits[:dup + 1] + [digits[dup]] + digits[dup + 1:9]
        s = "".join(body[:10])
        if s[0] != "0":
            s += str(_mod11_10(s))
            return f"{s[:2]} {s[2:5]} {s[5:8]} {s[8:]}"


def _luhn_digit(body: str) -> int:
    total = 0
    for i, ch in enumerate(reversed(body)):
        v = int(ch)
        if i % 2 == 0:
            v *= 2
            v -= 9 if v > 9 else 0
        total += v
    return (10 - total % 10) % 10


def sin(rng: random.Random) -> str:
    body = str(rng.choice([1, 2, 3, 4, 5, 6, 7, 9])) + f"{rng.randrange(10_000_000):07d}"
    s = body + str(_luhn_digit(body))
    return f"{s[:3]} {s[3:6]} {s[6:]}"


def personnummer(rng: random.Random, *, long: bool = False) -> str:
    year = rng.randrange(1940, 2010)
    body = f"{year % 100:02d}{rng.randrange(1, 13):02d}{rng.randrange(1, 29):02d}" \
           f"{rng.randrange(1000):03d}"
    s = body + str(_luhn_digit(body))
    return f"{year // 100 if long else ''}{s[:6]}-{s[6:]}"


def china_id(rng: random.Random) -> str:
    region = rng.choice(["110101", "310104", "440305", "510107", "330106"])
    body = f"{region}{rng.randrange(1950, 2010)}{rng.randrange(1, 13):02d}" \
           f"{rng.randrange(1, 29):02d}{rng.randrange(1000):03d}"
    total = sum(int(ch) * (2 ** (17 - i) % 11) for i, ch in enumerate(body))
    return body + "10X98765432"[total % 11]


_ICAO = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def ausweis(rng: random.Random) -> str:
    """German Personalausweis serial: 9 characters + ICAO 9303 7-3-1 check digit."""
    alphabet = "CFGHJKLMNPRTVWXYZ0123456789"
    serial = rng.choice("CFGHJKLMNPRTVWXYZ") + "".join(rng.choice(alphabet) for _ in range(8))
    total = sum(_ICAO.index(ch) * (7, 3, 1)[i % 3] for i, ch in enumerate(serial))
    return serial + str(total % 10)


def _dot(digits: str, weights: tuple[int, ...]) -> int:
    return sum(int(c) * w for c, w in zip(digits, weights, strict=True))


def fodselsnummer(rng: random.Random) -> str:
    """Norwegian: DDMMYY + 3-digit individual number + two mod-11 check digits."""
    while True:
        body = f"{rng.randrange(1, 29):02d}{rng.randrange(1, 13):02d}{rng.randrange(100):02d}" \
               f"{rng.randrange(1000):03d}"
        k1 = 11 - _dot(body, (3, 7, 6, 1, 8, 9, 4, 5, 2)) % 11
        k1 = 0 if k1 == 11 else k1
        if k1 == 10:
            continue
        k2 = 11 - _dot(body + str(k1), (5, 4, 3, 2, 7, 6, 5, 4, 3, 2)) % 11
        k2 = 0 if k2 == 11 else k2
        if k2 != 10:
            return f"{body}{k1}{k2}"


def korean_rrn(rng: random.Random) -> str:
    body = f"{rng.randrange(100):02d}{rng.randrange(1, 13):02d}{rng.randrange(1, 29):02d}" \
           f"{rng.choice('1234')}{rng.randrange(100000):05d}"
    total = _dot(body, (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5))
    return f"{body[:6]}-{body[6:]}{(11 - total % 11) % 10}"


def corrupt(value: str, rng: random.Random) -> str:
    """The same shape with the check part changed (the checksum then fails)."""
    chars = list(value)
    positions = [i for i, c in enumerate(chars) if c.isalnum()]
    i = positions[-1]
    c = chars[i]
    if c.isdigit():
        chars[i] = str((int(c) + rng.randrange(1, 9)) % 10)
    else:
        pool = [x for x in "ABCDEFGHJKLMNPQRSTVWXYZ" if x != c.upper()]
        chars[i] = rng.choice(pool)
    return "".join(chars)


GENERATORS = {
    "es_dni": dni, "es_nie": nie, "br_cpf": cpf, "br_cnpj": cnpj, "in_aadhaar": aadhaar,
    "fr_nir": nir, "it_codice_fiscale": codice_fiscale, "nl_bsn": bsn, "uk_nino": nino,
    "de_steuer_id": steuer_id, "ca_sin": sin, "se_personnummer": personnummer,
    "cn_resident_id": china_id, "de_personalausweis": ausweis,
    "no_fodselsnummer": fodselsnummer, "kr_rrn": korean_rrn,
}


def _code(rng: random.Random, groups: int, size: int, alphabet: str) -> str:
    return "-".join("".join(rng.choice(alphabet) for _ in range(size)) for _ in range(groups))


# Templates of the session-5b probe: {v} is the value. Written before the detectors.
_ID_TEMPLATES: dict[str, list[str]] = {
    "es_dni": ["Mi DNI es {v}, por si hace falta para la reserva.", "DNI: {v}",
               "Para el contrato del piso usé mi documento de identidad {v}.",
               "My Spanish ID card number is {v}."],
    "es_nie": ["Mi NIE es {v} desde que llegué a Valencia.", "NIE {v} (tarjeta verde)",
               "Her foreigner id in Spain is {v}."],
    "br_cpf": ["Meu CPF é {v}.", "CPF do titular: {v}", "For the Brazilian invoice use CPF {v}.",
               "O número do meu cadastro é {v}, guarde bem."],
    "br_cnpj": ["CNPJ da empresa: {v}", "Our Brazilian entity's CNPJ is {v}.",
                "A nota fiscal sai no CNPJ {v}."],
    "in_aadhaar": ["My Aadhaar number is {v}.", "Aadhaar: {v}",
                   "For the KYC I gave them my UID {v}.", "मेरा आधार नंबर {v} है"],
    "fr_nir": ["Mon numéro de sécurité sociale est {v}.", "N° de sécu : {v}",
               "My French social security number (NIR) is {v}.",
               "Numéro INSEE pour la mutuelle : {v}"],
    "it_codice_fiscale": ["Il mio codice fiscale è {v}.", "Codice fiscale: {v}",
                          "My Italian tax code is {v}.", "CF {v} per la fattura"],
    "nl_bsn": ["Mijn BSN is {v}.", "Burgerservicenummer: {v}",
               "My Dutch citizen service number is {v}.", "Sofinummer {v} voor de belasting"],
    "uk_nino": ["My National Insurance number is {v}.", "NI number: {v}",
                "NINO {v} for the payroll form", "Her NI no. is {v}, HMRC asked for it."],
    "de_steuer_id": ["Meine Steuer-ID ist {v}.", "Steueridentifikationsnummer: {v}",
                     "My German tax ID is {v}.", "Die steuerliche IdNr lautet {v}."],
    "ca_sin": ["My SIN is {v}.", "Social Insurance Number: {v}",
               "Mon numéro d'assurance sociale est {v}.", "Use SIN {v} on the T4."],
    "se_personnummer": ["Mitt personnummer är {v}.", "Personnummer: {v}",
                        "My Swedish personal identity number is {v}."],
    "cn_resident_id": ["我的身份证号是{v}", "My Chinese resident ID is {v}.",
                       "身份证号码：{v}", "ID card (China): {v}"],
}
_PASSPORT_TEMPLATES = ["My passport number is {v}.", "Reisepassnummer: {v}",
                       "Numéro de passeport : {v}", "Mi número de pasaporte es {v}.",
                       "Passport no. {v}, expires 2031.", "Passport #: {v}"]
_RECOVERY_TEMPLATES = ["GitHub recovery codes: {v}", "My Google backup codes are {v}.",
                       "2FA codes for the bank: {v}", "Códigos de recuperación: {v}",
                       "Codes de récupération Proton : {v}", "Wiederherstellungscodes: {v}",
                       "Backup codes (Dropbox) {v}"]
_WIFI_TEMPLATES = ["wifi: {n} / {v}", "SSID {n} pass {v}", "the wifi key for {n} is {v}",
                   "WLAN-Schlüssel für {n}: {v}", "clé wifi {n} : {v}",
                   "contraseña del wifi de {n}: {v}", "WIFI:T:WPA;S:{n};P:{v};;",
                   "Wi-Fi at the cabin: network {n}, key {v}"]
LOOKALIKES = [
    "Order #{d8} shipped today, tracking 1Z{d6}A{d8}.", "Call me at +34 612 {d3} {d3}.",
    "The meeting moved to 2025-03-14 at 09:30.", "Invoice {d4}-{d4}-{d4} is paid.",
    "Ticket {d3}.{d3}.{d3}-{d2} was closed by support.", "My flight is IB{d4} on the 12th.",
    "The parcel id is {d4} {d4} {d4}, it should arrive Friday.",
    "Our team has {d2} people and a budget of {d6} euros.",
    "Reference {d2} {d3} {d3} {d3} for the insurance claim.",
    "The recovery of the database took {d2} minutes.",
    "I printed the backup codes and put them in the safe.",
    "The wifi at the office is fast today.", "Passport photos cost 12 euros at the kiosk.",
    "My passport expires in 2031.", "Room {d3}, building {d2}, floor 4.",
    "My passport number is on the photo page, not on the cover.",
    "Recovery codes are stored in Bitwarden under 'GitHub'.",
    "The SSID of the guest network is printed on the router.",
    "The DNI office in Valencia opens at 9:00.", "Steuer-ID kommt per Post vom Bundeszentralamt.",
]


def _fill(template: str, rng: random.Random) -> str:
    out = template
    for key, n in (("{d8}", 8), ("{d6}", 6), ("{d4}", 4), ("{d3}", 3), ("{d2}", 2)):
        while key in out:
            out = out.replace(key, "".join(str(rng.randrange(10)) for _ in range(n)), 1)
    return out


def probe_cases(seed: int = 5) -> dict[str, list[dict[str, str]]]:
    """Valid ids, recovery codes and Wi-Fi keys in sentences, and their look-alikes."""
    rng = random.Random(seed)
    secrets: list[dict[str, str]] = []
    benign: list[dict[str, str]] = []
    for kind, templates in _ID_TEMPLATES.items():
        for template in templates:
            value = GENERATORS[kind](rng)
            if rng.random() < 0.3 and kind in {"es_dni", "br_cpf", "fr_nir", "ca_sin"}:
                value = value.replace(" ", ".") if " " in value else value.replace(".", " ")
            secrets.append({"kind": kind, "text": template.format(v=value), "secret": value})
            bad = corrupt(value, rng)
            benign.append({"kind": kind, "text": template.format(v=bad)})
    for template in _PASSPORT_TEMPLATES:
        value = rng.choice(["X", "PA", "C0", "", "AB"]) + str(rng.randrange(1_000_000, 9_999_999))
        secrets.append({"kind": "passport", "text": template.format(v=value), "secret": value})
    for i, template in enumerate(_RECOVERY_TEMPLATES):
        shape = i % 3
        codes = [_code(rng, 2, 5, "0123456789abcdef") if shape == 0 else
                 f"{rng.randrange(10**7, 10**8)}" if shape == 1 else
                 _code(rng, 2, 4, "ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
                 for _ in range(rng.randrange(2, 5))]
        value = ", ".join(codes) if i % 2 else " ".join(codes)
        secrets.append({"kind": "recovery_codes", "text": template.format(v=value),
                        "secret": codes[0], "all": " ".join(codes)})
    names = ["CasaLuna", "Vodafone-7F2A", "BeachHouse", "FRITZ!Box 7530 KL", "Livebox-1234"]
    keys = ["Tortuga88azul", "salty-dog-77", "Kiefer2024Haus!", "x7Hq2LmP99vB", "soleil89maison"]
    for template in _WIFI_TEMPLATES:
        name, key = rng.choice(names), rng.choice(keys)
        secrets.append({"kind": "wifi", "text": template.format(n=name, v=key), "secret": key})
    for template in LOOKALIKES:
        benign.append({"kind": "lookalike", "text": _fill(template, rng)})
    return {"secrets": secrets, "benign": benign}
