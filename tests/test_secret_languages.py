"""Issue 26 item 5: passwords in many languages, passphrases, command-line credentials,
UUID-shaped vendor keys and the national ids added (Japan, Turkey, Chile, Singapore).

Each detector has look-alikes that must stay untouched.
"""

from __future__ import annotations

import random
import re

import pytest

from walrus_mem._safety.secret_ids import (
    cl_rut_valid,
    jp_my_number_valid,
    sg_nric_valid,
    tr_tc_kimlik_valid,
)
from walrus_mem.safety import redact_secrets, screen_fact

# (language, text, the secret value)
PASSWORDS = [
    ("pt", "Minha senha do banco é Lua@2024mar", "Lua@2024mar"),
    ("pt", "A minha senha é sol@praia99, não conta a ninguém", "sol@praia99"),
    ("ru", "Мой пароль от почты: Zvezda2024!", "Zvezda2024"),
    ("ru", "Пароль от wifi — kotik123", "kotik123"),
    ("uk", "Мій пароль від банку Kyiv#2024", "Kyiv#2024"),
    ("hi", "मेरा पासवर्ड है Shanti@987, इसे याद रखना", "Shanti@987"),
    ("hi", "मेरा पासवर्ड Shanti@987 है", "Shanti@987"),
    ("ar", "كلمة المرور الخاصة بي هي Qamar2024! لا تنسها", "Qamar2024"),
    ("ar", "كلمة السر: Noor#5521", "Noor#5521"),
    ("zh", "我的邮箱密码是 huahua#88，别忘了", "huahua#88"),
    ("zh", "我的密码是tianqi2024", "tianqi2024"),
    ("ja", "私のパスワードは sakura2024! です", "sakura2024"),
    ("ja", "パスワード：Fuji-San77", "Fuji-San77"),
    ("ko", "내 비밀번호는 hangang2024! 이야", "hangang2024"),
    ("ko", "비밀번호는Seoul#4455이야", "Seoul#4455"),
    ("de", "Mein Passwort für das Online-Banking lautet Sonne#Mond77", "Sonne#Mond77"),
    ("fr", "Mon mot de passe pour la banque est chaton2024!", "chaton2024"),
    ("es", "Mi contraseña del correo es perro#Azul7", "perro#Azul7"),
    ("it", "La mia password di casa è gatto2024!", "gatto2024"),
    ("tr", "Şifrem Kedi2024! olarak ayarlı, unutma", "Kedi2024"),
    ("tr", "Benim e-posta şifrem: Istanbul#34", "Istanbul#34"),
    ("pl", "Moje hasło do banku to Wisla2024!", "Wisla2024"),
    ("sv", "Mitt lösenord är Ekorre#77", "Ekorre#77"),
    ("el", "Ο κωδικός μου είναι Athina2024!", "Athina2024"),
    ("he", "הסיסמה שלי היא Tamar#2024", "Tamar#2024"),
    ("fa", "رمز عبور من Parvaz2024! است", "Parvaz2024"),
    ("vi", "Mật khẩu của tôi là Hanoi@2024", "Hanoi@2024"),
    ("id", "Kata sandi saya adalah Jakarta#99", "Jakarta#99"),
    ("th", "รหัสผ่านของฉันคือ Siam2024!", "Siam2024"),
    ("en", "My passphrase is correct horse battery staple", "correct horse battery staple"),
    ("en", "my password is purple monkey dishwasher forever, remember that",
     "purple monkey dishwasher forever"),
]

LANGUAGE_LOOKALIKES = [
    "Мой пароль слишком короткий, надо поменять",
    "Пароль должен содержать не менее 12 символов",
    "密码要求8位以上",
    "パスワードは8文字以上必要です",
    "비밀번호를 잊어버렸어요",
    "암호화폐 BTC2024 가격이 올랐다",
    "كلمة المرور يجب أن تحتوي على 12 حرفا",
    "मुझे अपना पासवर्ड बदलना है",
    "Şifremi unuttum, yardım eder misin?",
    "Mein Passwort ist zu kurz für die neue Richtlinie.",
    "Mi contraseña es muy larga y difícil de recordar.",
    "The password policy requires 12 characters and a symbol.",
    "My password is too short for the new policy, I need to change it",
    "The password is stored in 1Password and rotated every quarter.",
    "Moje hasło wygasło wczoraj.",
    "Ο κωδικός μου έληξε χθες.",
]

CLI = [
    ("I connect with mysql -u root -pS3cretPw! prod_db", "S3cretPw!"),
    ("mysqldump -h db -u backup -p'Tr0ub4dor&3' shop > dump.sql", "Tr0ub4dor&3"),
    ("sshpass -p 'Winter2024' ssh admin@host", "Winter2024"),
    ("sshpass -pWinter2024x ssh admin@bastion", "Winter2024x"),
    ("use --password=Hunter2xyz when calling the cli", "Hunter2xyz"),
    ("mysql --password Sup3rS3cret -u app", "Sup3rS3cret"),
    ("PGPASSWORD=Tr0ub4dor psql -h db -U app", "Tr0ub4dor"),
    ("MYSQL_PWD=Qw3rty!Prod mysql -u app", "Qw3rty!Prod"),
    ("redis-cli -h cache -a R3dis!Pass ping", "R3dis!Pass"),
    ("docker login -u ci -p Dck3r!Token registry.example.com", "Dck3r!Token"),
    ("curl -u deploy:Cu7lPass! https://ci.example.com/api", "Cu7lPass!"),
    ("./deploy.sh --api-key 9fK2mQ9xL4vN7pR1 --env prod", "9fK2mQ9xL4vN7pR1"),
]

CLI_LOOKALIKES = [
    "I use mysql -u root -p to connect to the local database.",
    "Pass the --password-stdin flag to docker login.",
    "Use the --token flag to authenticate.",
    "mysql -u app -p$MYSQL_PASSWORD shop",
    "Run ./cli --password=<your-password> once.",
    "ssh -p 2222 admin@host",
]

UUID_KEYS = [
    ("My Heroku API key is 3f1c6a2e-8b4d-4e9a-9c7f-2d5b1a0e6f34", "heroku_api_key"),
    ("heroku api key: 3f1c6a2e-8b4d-4e9a-9c7f-2d5b1a0e6f34", "heroku_api_key"),
    ("Please remember my Heroku API key 0b7e3c1d-2a4f-4e6b-8c9d-7f1e2a3b4c5d for deploys",
     "heroku_api_key"),
    ("The Snyk token is 9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", "snyk_api_key"),
    ("Postmark server token: 1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f", "postmark_api_key"),
    ("the PagerDuty integration key is 7e8f9a0b-1c2d-4e3f-9a4b-5c6d7e8f9a0b",
     "pagerduty_api_key"),
    ("client secret = 6d5c4b3a-2f1e-4d0c-9b8a-7f6e5d4c3b2a", "uuid_key"),
]

UUID_LOOKALIKES = [
    "The request id was 3f1c6a2e-8b4d-4e9a-9c7f-2d5b1a0e6f34 in the logs",
    "The Azure subscription id for the sandbox is 8d3f2b1a-6c4e-4f7a-9b2d-3e5f7a9c1b0d.",
    "Tenant 8d3f2b1a-6c4e-4f7a-9b2d-3e5f7a9c1b0d belongs to the Lisbon office.",
    "The token request id 3f1c6a2e-8b4d-4e9a-9c7f-2d5b1a0e6f34 failed at noon.",
    "Heroku app id 3f1c6a2e-8b4d-4e9a-9c7f-2d5b1a0e6f34 runs the staging site.",
    "Use uuid4() to get ids like 3f1c6a2e-8b4d-4e9a-9c7f-2d5b1a0e6f34 for rows.",
]


def _kept(text: str, value: str) -> bool:
    redacted, _ = redact_secrets(text)
    return value in redacted


@pytest.mark.parametrize(("lang", "text", "value"), PASSWORDS,
                         ids=[f"{p[0]}-{i}" for i, p in enumerate(PASSWORDS)])
def test_password_in_language_is_redacted_and_not_stored(lang, text, value):
    assert not _kept(text, value)
    assert screen_fact(text).text is None  # a stated password is the whole point: dropped


def test_at_least_twelve_languages_and_non_latin_scripts():
    languages = {lang for lang, _, _ in PASSWORDS}
    assert len(languages) >= 12
    assert {"ru", "hi", "ar", "zh", "ja", "ko"} <= languages


@pytest.mark.parametrize("text", LANGUAGE_LOOKALIKES)
def test_password_lookalikes_untouched(text):
    assert redact_secrets(text) == (text, [])


@pytest.mark.parametrize(("text", "value"), CLI)
def test_command_line_credentials_redacted(text, value):
    assert not _kept(text, value)


@pytest.mark.parametrize("text", CLI_LOOKALIKES)
def test_command_line_lookalikes_untouched(text):
    assert redact_secrets(text) == (text, [])


def test_command_line_fact_is_kept_with_the_value_redacted():
    screened = screen_fact("I connect to the reporting replica with mysql -u root -pS3cretPw! "
                           "every morning")
    assert screened.text is not None and "S3cretPw" not in screened.text
    assert "reporting replica" in screened.text


@pytest.mark.parametrize(("text", "kind"), UUID_KEYS)
def test_labelled_uuid_keys_redacted(text, kind):
    redacted, findings = redact_secrets(text)
    # "token is <uuid>" was already a generic key; the vendor kind names the rest
    assert [f.kind for f in findings] in ([kind], ["generic_api_key"])
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}", redacted)


@pytest.mark.parametrize("text", UUID_LOOKALIKES)
def test_unlabelled_uuids_untouched(text):
    assert redact_secrets(text) == (text, [])


# -- national ids -----------------------------------------------------------------------


def _my_number(rng: random.Random) -> str:
    body = "".join(str(rng.randrange(10)) for _ in range(11))
    total = sum(int(body[10 - i]) * (i + 2 if i < 6 else i - 4) for i in range(11))
    check = 0 if total % 11 <= 1 else 11 - total % 11
    return body + str(check)


def _tc_kimlik(rng: random.Random) -> str:
    d = [rng.randrange(1, 10)] + [rng.randrange(10) for _ in range(8)]
    d.append((sum(d[0:9:2]) * 7 - sum(d[1:8:2])) % 10)
    d.append(sum(d) % 10)
    return "".join(map(str, d))


def _rut(rng: random.Random) -> str:
    body = str(rng.randrange(5_000_000, 30_000_000))
    total = sum(int(c) * (2 + i % 6) for i, c in enumerate(reversed(body)))
    check = {11: "0", 10: "K"}.get(11 - total % 11, str(11 - total % 11))
    return f"{body[:-6]}.{body[-6:-3]}.{body[-3:]}-{check}"


def _nric(rng: random.Random) -> str:
    prefix = rng.choice("STFG")
    digits = "".join(str(rng.randrange(10)) for _ in range(7))
    total = sum(int(c) * w for c, w in zip(digits, (2, 7, 6, 5, 4, 3, 2), strict=True))
    total += 4 if prefix in "TG" else 0
    letters = "JZIHGFEDCBA" if prefix in "ST" else "XWUTRQPNMLK"
    return prefix + digits + letters[total % 11]


def _corrupt(value: str) -> str:
    """Change the check digit (or letter) so the value fails its check."""
    last = value[-1]
    if last == "K" and "-" in value:  # a RUT: a letter would make a Spanish DNI shape
        return value[:-1] + "1"
    if last.isdigit():
        return value[:-1] + str((int(last) + 1) % 10)
    return value[:-1] + ("A" if last != "A" else "B")


IDS = [
    ("jp_my_number", _my_number, jp_my_number_valid,
     lambda v: f"私のマイナンバーは {v[:4]} {v[4:8]} {v[8:]} です"),
    ("jp_my_number", _my_number, jp_my_number_valid, lambda v: f"My Number: {v}"),
    ("tr_tc_kimlik", _tc_kimlik, tr_tc_kimlik_valid, lambda v: f"T.C. Kimlik No: {v}"),
    ("cl_rut", _rut, cl_rut_valid, lambda v: f"Mi RUT es {v}"),
    ("cl_rut", _rut, cl_rut_valid, lambda v: f"Pago registrado a nombre de {v} ayer."),
    ("sg_nric", _nric, sg_nric_valid, lambda v: f"My NRIC is {v}, for the booking."),
]


@pytest.mark.parametrize(("kind", "make", "valid", "say"), IDS,
                         ids=[f"{i[0]}-{n}" for n, i in enumerate(IDS)])
def test_national_ids_valid_redacted_corrupted_kept(kind, make, valid, say):
    rng = random.Random(26)
    for _ in range(25):
        value = make(rng)
        assert valid(value)
        redacted, findings = redact_secrets(say(value))
        assert kind in [f.kind for f in findings], say(value)
        bad = _corrupt(value)
        assert not valid(bad)
        assert redact_secrets(say(bad))[1] == [], say(bad)


def test_published_specimens():
    assert jp_my_number_valid("123456789018")
    assert tr_tc_kimlik_valid("10000000146")
    assert cl_rut_valid("12.345.678-5")
    assert sg_nric_valid("S1234567D")


@pytest.mark.parametrize("text", [
    "Order number 123456789018 shipped today",  # a valid My Number shape with no label
    "my number is 1234 5678 9018, call after six",  # lower-case: a phone number
    "Invoice 10000000146 was paid in March.",  # a valid Kimlik shape with no label
    "Our order number 123456789012 shipped today from Rotterdam.",
])
def test_id_lookalikes_untouched(text):
    assert redact_secrets(text) == (text, [])


def test_a_fact_with_an_id_keeps_its_fact():
    screened = screen_fact("私のマイナンバーは 1234 5678 9018 です、市役所の手続きに必要です")
    assert screened.text is not None and "9018" not in screened.text
