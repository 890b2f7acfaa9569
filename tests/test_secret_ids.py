"""National ids, passport numbers, recovery codes, Wi-Fi keys (walrus_mem._safety.secret_ids).

Valid numbers come from tests/helpers_ids.py, which computes each check digit
independently of the detector; ``corrupt`` keeps the shape and breaks the check.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from walrus_mem._safety.secret_ids import (
    au_tfn_valid,
    be_national_valid,
    cnpj_valid,
    codice_fiscale_valid,
    cpf_valid,
    dni_valid,
    hetu_valid,
    nhs_valid,
    nino_valid,
    nir_valid,
    pesel_valid,
    pt_nif_valid,
    steuer_id_valid,
    verhoeff_valid,
    za_id_valid,
)
from walrus_mem.hooks import MemoryHooks
from walrus_mem.safety import redact_secrets, screen_fact
from walrus_mem.tools import call_tool

from .helpers_agents import agents_config, make_memory
from .helpers_ids import GENERATORS, corrupt

DATA = Path(__file__).parent / "data"
# A label each kind is found with (the ambiguous ones need one).
LABELS = {
    "es_dni": "Mi DNI es {v}.", "es_nie": "Mi NIE es {v}.", "br_cpf": "Meu CPF é {v}.",
    "br_cnpj": "CNPJ da empresa: {v}", "in_aadhaar": "My Aadhaar number is {v}.",
    "fr_nir": "Mon numéro de sécurité sociale est {v}.",
    "it_codice_fiscale": "Il mio codice fiscale è {v}.", "nl_bsn": "Mijn BSN is {v}.",
    "uk_nino": "My National Insurance number is {v}.", "de_steuer_id": "Meine Steuer-ID ist {v}.",
    "ca_sin": "My SIN is {v}.", "se_personnummer": "Mitt personnummer är {v}.",
    "cn_resident_id": "我的身份证号是{v}",
    "de_personalausweis": "Meine Personalausweisnummer ist {v}.",
    "no_fodselsnummer": "Fødselsnummeret mitt er {v}.", "kr_rrn": "주민등록번호: {v}",
}
# Published example numbers of the rules (specimens, not people).
SPECIMENS = [(dni_valid, "12345678Z", "12345678A"), (dni_valid, "X1234567L", "X1234567M"),
             (cpf_valid, "529.982.247-25", "529.982.247-26"),
             (cnpj_valid, "11.222.333/0001-81", "11.222.333/0001-82"),
             (verhoeff_valid, "2341 2341 2346", "2341 2341 2347"),
             (nir_valid, "1 84 12 76 451 089 46", "1 84 12 76 451 089 47"),
             (codice_fiscale_valid, "RSSMRA85T10A562S", "RSSMRA85T10A562T"),
             (nino_valid, "AB 12 34 56 C", "BG 12 34 56 C"),
             (steuer_id_valid, "86095742719", "86095742718"),
             (nhs_valid, "943 476 5919", "943 476 5918"),
             (pesel_valid, "44051401359", "44051401358"),
             (hetu_valid, "131052-308T", "131052-308U"),
             (za_id_valid, "8001015009087", "8001015009088"),
             (au_tfn_valid, "123456782", "123456783"),
             (pt_nif_valid, "123456789", "123456788"),
             (be_national_valid, "85.07.30-033.28", "85.07.30-033.29")]


@pytest.mark.parametrize(("valid", "good", "bad"), SPECIMENS)
def test_published_specimens(valid, good, bad):
    assert valid(good) and not valid(bad)


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_generated_ids_are_redacted_value_only_and_corrupted_ones_left(kind):
    rng = random.Random(kind)
    template = LABELS[kind]
    for _ in range(25):
        value = GENERATORS[kind](rng)
        text = template.format(v=value)
        redacted, findings = redact_secrets(text)
        # a 13-digit RRN starting with 4 can also pass as a Visa number: either kind will do
        found = [f.kind for f in findings]
        assert value not in redacted and found in ([kind], ["payment_card"]), text
        assert redacted == template.format(v=f"[REDACTED:{found[0]}]")
        bad = corrupt(value, rng)
        if kind == "uk_nino" or kind == "cn_resident_id" and not bad[-1].isdigit():
            continue  # NINO has no check digit; "...X" -> letter changes the shape
        assert redact_secrets(template.format(v=bad))[1] == [], bad


@pytest.mark.parametrize("kind", ["in_aadhaar", "nl_bsn", "ca_sin", "de_steuer_id",
                                  "de_personalausweis", "no_fodselsnummer", "kr_rrn"])
def test_ambiguous_numbers_need_a_label(kind):
    rng = random.Random(7)
    value = GENERATORS[kind](rng)
    assert redact_secrets(f"Order {value} shipped on Monday.")[1] == []
    assert redact_secrets(LABELS[kind].format(v=value))[1]


@pytest.mark.parametrize("text", [
    "Call me at +34 612 707 620 after six.", "Invoice 0889-5113-7170 is paid.",
    "Ticket 307.600.467-40 was closed.", "The parcel id is 6383 1511 8291.",
    "The meeting moved to 2025-03-14 at 09:30.", "Tracking 1Z309640A75417232 arrives Friday.",
    "My passport expires in 2031.", "Passport photos cost 12 euros at the kiosk.",
    "My passport number is on the photo page.",
    "I printed the backup codes and put them in the safe.",
    "I used two backup codes on 2024-03-05 and have 8 left.",
    "Send the recovery codes to +44 7700 900123 if I lose my phone.",
    "The DNI office in Valencia opens at 9:00.", "SIN 12 is a Catalan bus line.",
])
def test_lookalikes_are_left_alone(text):
    assert redact_secrets(text)[1] == [], text


@pytest.mark.parametrize(("text", "values"), [
    ("My passport number is PA9026431.", ["PA9026431"]),
    ("Numéro de passeport : 18AB34567", ["18AB34567"]),
    ("Mi número de pasaporte es XDA123456.", ["XDA123456"]),
    ("GitHub recovery codes:\n1. 4f2a1-9bc3e\n2. 77e0d-1a2b3\nStore them offline.",
     ["4f2a1-9bc3e", "77e0d-1a2b3"]),
    ("My Google backup codes are 3860 7006, 1584 6911 and 8455 9432.",
     ["3860 7006", "1584 6911", "8455 9432"]),
    ("Códigos de recuperación: 0a212-3e7ce, fa30c-14d73", ["0a212-3e7ce", "fa30c-14d73"]),
    ("Wiederherstellungscodes: J2YR-UXY2, 2JYU-5ZCP", ["J2YR-UXY2", "2JYU-5ZCP"]),
    ("MFA codes: 7KQ2-PX9M WQRT-HJKL 4NB8-ZZ2C", ["7KQ2-PX9M", "WQRT-HJKL", "4NB8-ZZ2C"]),
    ("WIFI:T:WPA;S:OfficeNet;P:Gx7hq2Lm99;;", ["Gx7hq2Lm99"]),
])
def test_passports_recovery_codes_and_wifi_qr(text, values):
    redacted, findings = redact_secrets(text)
    assert findings and [v for v in values if v in redacted] == [], redacted
    if text.startswith("WIFI:"):
        assert "S:OfficeNet" in redacted  # the network name is not the secret


def _stored(case: dict[str, str]) -> bool:
    kept = screen_fact(case["text"]).text
    values = [case["secret"], *case.get("all", "").split()]
    return kept is not None and any(v in kept for v in values)


def test_frozen_held_out_ids_of_session_5b():
    """tests/data/secrets_heldout_s5b.json, committed before the detectors (eeaffec).

    Before: 33/38 stored, 0/35 look-alikes changed. First measurement after tuning on
    the other half: 1/38 stored (two letters-only codes after lettered-and-digit ones),
    0/35 changed; that miss was then fixed as a category, so it is in-sample now.
    """
    data = json.loads((DATA / "secrets_heldout_s5b.json").read_text(encoding="utf-8"))
    assert [s["text"] for s in data["secrets"] if _stored(s)] == []
    assert [b for b in data["benign"] if screen_fact(b["text"]).text != b["text"]] == []


def test_tuning_half_of_session_5b():
    data = json.loads((DATA / "secrets_tuning_s5b.json").read_text(encoding="utf-8"))
    assert [s["text"] for s in data["secrets"] if _stored(s)] == []
    assert [b for b in data["benign"] if screen_fact(b["text"]).text != b["text"]] == []


def test_second_probe_of_session_5b_is_now_a_regression_guard():
    """tests/data/secrets_probe_s5b.json: new phrasings written after tuning.

    Measured once before any change: 1/32 stored (a German passport number with four
    digits, "Mein Reisepass hat die Nummer C4J9R7XK2"), 0/33 look-alikes changed;
    fixed since (with a number word two digits suffice), so in-sample now.
    """
    data = json.loads((DATA / "secrets_probe_s5b.json").read_text(encoding="utf-8"))
    assert [s["text"] for s in data["secrets"] if _stored(s)] == []
    assert [b for b in data["benign"] if screen_fact(b["text"]).text != b["text"]] == []


def _cases() -> list[tuple[str, str]]:
    rng = random.Random(13)
    return [(LABELS[k].format(v=(v := GENERATORS[k](rng))), v)
            for k in ("es_dni", "br_cpf", "in_aadhaar", "fr_nir", "nl_bsn", "cn_resident_id")]


def test_memory_store_never_stores_a_valid_id(tmp_path, master_hex):
    mem = make_memory(tmp_path, master_hex)
    try:
        cases = _cases()
        facts = [f"{text} We moved to Bergen in May." for text, _v in cases]
        result = call_tool(mem, "memory_store", {"facts": facts})
        assert result["ok"] is True, result
        stored = " ".join(r.text for r in mem.list("default", limit=100))
        assert "Bergen" in stored
        assert [v for _t, v in cases if re.sub(r"\D", "", v) in re.sub(r"\D", "", stored)] == []
    finally:
        mem.close()


def test_capture_never_stores_a_valid_id(tmp_path, master_hex):
    mem = make_memory(tmp_path, master_hex)
    hooks = MemoryHooks(mem, agents_config())
    try:
        cases = _cases()
        for i, (text, _value) in enumerate(cases):
            turn = [{"role": "user", "content": f"{text} We moved to Bergen in May {2020 + i}."},
                    {"role": "assistant", "content": "Noted."}]
            hooks.capture_now(turn, f"agent:coder:{i}")
        stored = " ".join(r.text for r in mem.list("coder", limit=100))
        assert "Bergen" in stored
        assert [v for _t, v in cases if re.sub(r"\D", "", v) in re.sub(r"\D", "", stored)] == []
    finally:
        hooks.close()
        mem.close()
