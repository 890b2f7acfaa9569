"""Validated secret detection: checksums, word list, entropy+context, normalisation.

The corpora are tests/data/secret_formats.json (78 formats written for issue 13)
and tests/data/benign_facts.json (341 ordinary facts); LoCoMo is read at test time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from walrus_mem._safety.secret_checks import (
    bip39_words,
    iban_valid,
    luhn_valid,
    normalised_view,
    shannon_entropy,
    ssn_valid,
)
from walrus_mem.hooks import MemoryHooks
from walrus_mem.safety import redact_secrets, screen_fact

from .helpers_agents import agents_config, make_memory

DATA = Path(__file__).parent / "data"
FORMATS = json.loads((DATA / "secret_formats.json").read_text(encoding="utf-8"))["cases"]
BENIGN = json.loads((DATA / "benign_facts.json").read_text(encoding="utf-8"))["facts"]


def _squash(text: str) -> str:
    return "".join(text.split())


def test_luhn():
    assert luhn_valid("4111111111111111") and luhn_valid("378282246310005")
    assert not luhn_valid("4111111111111112") and not luhn_valid("41x1") and not luhn_valid("")


def test_iban_mod97_and_country_length():
    assert iban_valid("DE89 3704 0044 0532 0130 00") and iban_valid("GB82WEST12345698765432")
    assert not iban_valid("DE89 3704 0044 0532 0130 01")  # check digits wrong
    assert not iban_valid("DE89370400440532013")  # too short for DE
    assert not iban_valid("ZZ89370400440532013000")  # no such country


def test_ssn_ranges():
    assert ssn_valid("219", "09", "9999")
    for area, group, serial in [("000", "12", "3456"), ("666", "12", "3456"),
                                ("912", "12", "3456"), ("123", "00", "4567"),
                                ("123", "45", "0000")]:
        assert not ssn_valid(area, group, serial)
    assert redact_secrets("ticket 666-12-3456 is closed")[1] == []
    assert redact_secrets("my SSN is 123-45-6789")[1][0].kind == "us_ssn"


def test_bip39_word_list_is_the_official_one():
    words = bip39_words()
    assert len(words) == 2048 and {"abandon", "zoo", "wrong"} <= words
    eleven = "abandon ability able about above absent absorb abstract absurd abuse access"
    assert redact_secrets(eleven)[1] == []  # 11 words: not a phrase
    twelve = eleven + " accident"
    assert redact_secrets(twelve)[1][0].kind == "bip39_seed_phrase"


def test_entropy_and_context_for_hex_and_base64():
    key = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
    assert shannon_entropy(key) > 3.5 and shannon_entropy("aaaa") == 0
    assert redact_secrets(f"my wallet private key is {key}")[1][0].kind == "hex_private_key"
    assert redact_secrets(f"eth key 0x{key}")[1]
    for benign in (f"commit {key[:40]} fixed the bug", f"sha256 checksum {key}",
                   f"tx hash 0x{key} confirmed", "the build id is 20240311"):
        assert redact_secrets(benign)[1] == [], benign


def test_env_style_assignments():
    for text in ("export DATABASE_PASSWORD=hunter2xyz", "DB_PASS: s3cr3tVal",
                 "API_TOKEN='q9Zr7Kx2mP'", "set MY_APP_SECRET=Zx81qL0p",
                 "$env:AZURE_CLIENT_KEY=\"k8Jd92LmQ\""):
        redacted, found = redact_secrets(text)
        assert found, text
    for text in ("DATABASE_PASSWORD=${DB_PASSWORD}", "API_TOKEN=<your-token>",
                 "SECRET_KEY=changeme", "monkey=banana", "turkey: roasted",
                 "the table's sort_key=created_at", "max_token=4096 for the summariser",
                 "PARTITION_KEY: user_id"):
        assert redact_secrets(text)[1] == [], text


def test_natural_language_passwords_and_pins():
    cases = {
        "I use Tr0ub4dor&3 as my bank login": "Tr0ub4dor&3",
        "my Netflix password is SofaKing2024": "SofaKing2024",
        "The PIN for my debit card is 4821.": "4821",
        "the gate code is 1947 for deliveries": "1947",
    }
    for text, secret in cases.items():
        assert secret not in redact_secrets(text)[0], text
        assert screen_fact(text).text is None, text
    for text in ("My bank login is broken again", "I noticed a spiderman pin on your purse",
                 "I use a password manager for my logins", "my login was slow today"):
        assert redact_secrets(text)[1] == [], text


def test_normalisation_maps_back_to_the_original_characters():
    token = "ghp_" + "a1B2" * 4 + "\u200b" + "c3D4" * 5
    text = f"token {token} for CI"
    view, index = normalised_view(text)
    assert "\u200b" not in view and len(index) == len(view)
    redacted, found = redact_secrets(text)
    assert redacted == "token [REDACTED:github_token] for CI" and found[0].kind == "github_token"
    spaced = "key id A K I A I O S F O D N N 7 E X A M P L E ok"
    assert redact_secrets(spaced)[0] == "key id [REDACTED:aws_access_key_id] ok"
    fullwidth = "card ４１１１ １１１１ １１１１ １１１１"
    assert "１１１１" not in redact_secrets(fullwidth)[0]


@pytest.mark.parametrize("case", FORMATS, ids=lambda c: c["format"])
def test_no_secret_format_is_stored(case):
    """0 of the formats may reach storage: redacted, or the fact dropped."""
    redacted, found = redact_secrets(case["text"])
    assert found and case["secret"] not in redacted
    assert _squash(case["secret"]) not in _squash(redacted)
    screened = screen_fact(case["text"])
    assert screened.text is None or _squash(case["secret"]) not in _squash(screened.text)


def test_formats_corpus_is_big_enough():
    assert len({c["format"] for c in FORMATS}) >= 60


def test_benign_corpus_is_almost_never_redacted():
    redacted = [f["text"] for f in BENIGN if redact_secrets(f["text"])[1]]
    assert len(BENIGN) >= 300
    assert len(redacted) / len(BENIGN) <= 0.01, redacted


def test_locomo_turns_are_not_redacted():
    path = Path("/work/shared/data/locomo-dev.json")
    if not path.exists():
        pytest.skip("LoCoMo dev file not available")
    data = json.loads(path.read_text(encoding="utf-8"))
    texts = [turn["text"] for sample in data for value in sample["conversation"].values()
             if isinstance(value, list) for turn in value]
    assert [t for t in texts if redact_secrets(t)[1]] == []


def test_capture_never_stores_a_secret(tmp_path, master_hex):
    """End to end through MemoryHooks: every format in a captured user turn."""
    mem = make_memory(tmp_path, master_hex)
    hooks = MemoryHooks(mem, agents_config())
    try:
        for i, case in enumerate(FORMATS):
            turn = [{"role": "user", "content": f"Quick note for later about setup {i}: "
                                                f"{case['text']} We moved to Bergen in May."},
                    {"role": "assistant", "content": "Noted."}]
            hooks.capture_now(turn, f"agent:coder:{i}")
        records = mem.list("coder", limit=1000)
        assert any("Bergen" in r.text for r in records)  # the ordinary part was captured
        stored = " ".join(r.text for r in records)
        leaked = [c["format"] for c in FORMATS if _squash(c["secret"]) in _squash(stored)]
        assert leaked == []
    finally:
        hooks.close()
        mem.close()


# --- session 5: passwords in plain language (blind evaluation: 6/57 stored verbatim) -------

@pytest.mark.parametrize(("text", "value"), [
    ("Cottage wifi: SSID MapleNest, WPA2 key Plum7!door", "Plum7!door"),
    ("Le mot de passe de ma boîte mail est Tilleul#58", "Tilleul#58"),
    ("Mein Passwort für das Firmenportal lautet Kranich-19x", "Kranich-19x"),
    ("La contraseña de Netflix es Cactus_Azul7", "Cactus_Azul7"),
    ("A senha do meu e-mail é Jabuti!303", "Jabuti!303"),
    ("Falcon#7734 is what I type to get into the office PC", "Falcon#7734"),
    ("I use Otter&Kelp21 for both my bank and Venmo", "Otter&Kelp21"),
    ("For iCloud I use Sparrow!Nest9", "Sparrow!Nest9"),
    ("Gym app login: mia.r@example.com / Lunge!Day44", "Lunge!Day44"),
    ("J'utilise Cerise!Noire4 pour ma banque", "Cerise!Noire4"),
    ("La clave de mi cuenta de correo es Pino#7781", "Pino#7781"),
    ("The code to unlock the family iPad is Otter-5512", "Otter-5512"),
])
def test_natural_language_passwords_are_redacted_value_only(text, value):
    redacted, findings = redact_secrets(text)
    assert value not in redacted and findings
    # the value goes, the words around it stay
    assert redacted.split()[0] == text.split()[0] or redacted.startswith("[REDACTED")
    screened = screen_fact(text)
    assert screened.text is None or value not in screened.text


@pytest.mark.parametrize("text", [
    "My Wi-Fi is called MapleNest-5G.",
    "The wifi network at the library is Library_Guest2.",
    "Le mot de passe de ma boîte mail est dans mon carnet.",
    "Mein Passwort für das Firmenportal läuft nächste Woche ab.",
    "I use 1Password for both my bank and Venmo.",
    "I use GPT-4o for email drafts.",
    "Notion is what I use to log my workouts.",
    "The key to the shed is under the mat.",
    "The password is stored in 1Password, never in the repo.",
    "Our helpdesk forwards password-reset requests to the IT queue.",
    "My password manager generates 20-character passwords by default.",
    "A senha do Wi-Fi está colada no roteador.",
    "Use discount code SAVE-20x at checkout on the bank holiday.",
    "La clave de Sol abre la partitura de mi hija.",
    "My bank sort code is 20-45-77.",
])
def test_password_lookalikes_are_left_alone(text):
    assert redact_secrets(text)[1] == []


def test_frozen_held_out_passwords_of_session_5():
    """tests/data/secrets_heldout_s5.json, committed before tuning.

    Measured once after tuning on the tuning half: 2/22 stored (was 21/22), 1/22
    look-alikes changed (was 1/22). The two ("clave", an unlock "code") were then
    fixed as a category (account/device key and code words), so the half is 0/22 now
    but no longer independent for them (docs/security.md).
    """
    data = json.loads((DATA / "secrets_heldout_s5.json").read_text(encoding="utf-8"))
    stored = [s for s in data["secrets"]
              if (kept := screen_fact(s["text"]).text) is not None and s["secret"] in kept]
    changed = [b for b in data["benign"] if screen_fact(b).text != b]
    assert len(stored) == 0, len(stored)
    assert len(changed) <= 1, len(changed)


def test_capture_never_stores_a_natural_language_password(tmp_path, master_hex):
    """Through MemoryHooks: the whole message is redacted before extraction."""
    cases = [("Le mot de passe de ma boîte mail est Tilleul#58.", "Tilleul#58"),
             ("Falcon#7734 is what I type to get into the office PC.", "Falcon#7734"),
             ("Cottage wifi: SSID MapleNest, WPA2 key Plum7!door.", "Plum7!door")]
    mem = make_memory(tmp_path, master_hex)
    hooks = MemoryHooks(mem, agents_config())
    try:
        for i, (text, _value) in enumerate(cases):
            turn = [{"role": "user", "content": f"{text} We moved to Bergen in May {2020 + i}."},
                    {"role": "assistant", "content": "Noted."}]
            hooks.capture_now(turn, f"agent:coder:{i}")
        stored = " ".join(r.text for r in mem.list("coder", limit=100))
        assert "Bergen" in stored
        assert [v for _t, v in cases if v in stored] == []
    finally:
        hooks.close()
        mem.close()


def test_second_password_probe_of_session_5_is_now_a_regression_guard():
    """tests/data/secrets_probe_s5.json: written after tuning, measured once before changes.

    Then 2/15 stored (an "e-mail / password" pair without a login word, an Italian
    unlock code), 0/15 look-alikes changed; both fixed since, so in-sample now.
    """
    data = json.loads((DATA / "secrets_probe_s5.json").read_text(encoding="utf-8"))
    stored = [s for s in data["secrets"]
              if (kept := screen_fact(s["text"]).text) is not None and s["secret"] in kept]
    assert stored == []
    assert [b for b in data["benign"] if screen_fact(b).text != b] == []
