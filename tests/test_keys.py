"""Keys: derivation, known-answer vectors, namespace rule, parsing, key files, keyring."""

from __future__ import annotations

import base64
import hashlib
import os
import pickle
import stat
from pathlib import Path

import keyring
import nacl.signing
import pytest
from hypothesis import given
from hypothesis import strategies as st
from keyring.backend import KeyringBackend
from keyring.backends import fail, null

from walrus_mem.errors import (
    ConfigError,
    InsecureKeyFile,
    InvalidNamespace,
    KeyExists,
    KeyMaterialError,
    KeyNotFound,
    KeyringUnavailable,
    MalformedKey,
)
from walrus_mem.keys import (
    KEYRING_SERVICE,
    KEYRING_USERNAME,
    MASTER_KEY_ENV,
    NAMESPACE_RULE,
    MasterSeed,
    NamespaceKeys,
    fingerprint_of,
    generate_master_seed,
    keyring_load,
    keyring_store,
    load_key_file,
    parse_ed25519_key,
    resolve_master_seed,
    validate_namespace,
    write_key_file,
)

from .helpers_keys import generator, seed_bytes, vectors


def _b2b(data: bytes, key: bytes, person: bytes, size: int = 32) -> bytes:
    """Independent BLAKE2b (CPython's, not libsodium's)."""
    return hashlib.blake2b(data, digest_size=size, key=key, person=person).digest()


# -- known-answer vectors ----------------------------------------------------


def test_vector_master_seed_is_the_conftest_test_seed(master_hex):
    assert vectors()["master_seed_hex"] == master_hex
    assert MasterSeed.from_hex(master_hex).fingerprint == vectors()["master_fingerprint_short"]


def test_vectors_cover_the_edge_namespaces():
    names = [e["namespace"] for e in vectors()["namespaces"]]
    assert len(names) >= 5
    assert "a" in names and any(len(n) == 64 for n in names)
    assert any("-" in n for n in names) and any("_" in n for n in names)


@pytest.mark.parametrize("entry", vectors()["namespaces"], ids=lambda e: e["namespace"][:12])
def test_namespace_vector_byte_for_byte(entry):
    master = bytes.fromhex(vectors()["master_seed_hex"])
    ns = entry["namespace"].encode("utf-8")
    assert ns.hex() == entry["namespace_utf8_hex"]

    # Recompute every value independently of walrus_mem (hashlib + PyNaCl only).
    sign_seed = _b2b(ns, master, b"walrusmem.sign")
    verify_key = bytes(nacl.signing.SigningKey(sign_seed).verify_key)
    fpr = _b2b(verify_key, b"", b"walrusmem.fpr", 16)
    seal_key = _b2b(ns, master, b"walrusmem.seal")
    dedupe_key = _b2b(ns, master, b"walrusmem.dedup")
    sample = entry["dedupe_hash"]
    assert sign_seed.hex() == entry["signing_seed_hex"]
    assert verify_key.hex() == entry["verify_key_hex"]
    assert fpr.hex() == entry["fingerprint_hex"]
    assert entry["fingerprint_short"] == f"{fpr.hex()[:8]}…{fpr.hex()[-4:]}"
    assert seal_key.hex() == entry["sealing_key_hex"]
    assert dedupe_key.hex() == entry["dedupe_key_hex"]
    assert _b2b(sample["text"].encode(), dedupe_key, b"walrusmem.dhash").hex() == sample["hash_hex"]

    # ... and the library agrees.
    keys = NamespaceKeys.derive(MasterSeed(master), entry["namespace"])
    assert bytes(keys.signing_key) == sign_seed
    assert keys.verify_key == verify_key
    assert keys.fingerprint_bytes == fpr == fingerprint_of(verify_key)
    assert keys.fingerprint == entry["fingerprint_short"]
    assert keys.sealing_key == seal_key
    assert keys.dedupe_key == dedupe_key
    assert keys.dedupe_hash(sample["text"]) == sample["hash_hex"]
    assert not keys.independent


def test_public_keys_match_a_second_ed25519_implementation():
    ed = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    entries = [*vectors()["namespaces"], vectors()["independent_agent"]]
    for entry in entries:
        seed = bytes.fromhex(entry.get("signing_seed_hex") or entry["agent_seed_hex"])
        pub = ed.Ed25519PrivateKey.from_private_bytes(seed).public_key()
        assert pub.public_bytes(Encoding.Raw, PublicFormat.Raw).hex() == entry["verify_key_hex"]


def test_independent_agent_vector_byte_for_byte():
    v = vectors()["independent_agent"]
    seed = bytes.fromhex(v["agent_seed_hex"])
    # Every published encoding parses to the same seed.
    for field in (
        "agent_seed_hex",
        "agent_secret_key_64_hex",
        "agent_seed_base64",
        "agent_seed_base64url_unpadded",
    ):
        assert parse_ed25519_key(v[field]) == seed, field
    assert v["agent_secret_key_64_hex"] == v["agent_seed_hex"] + v["verify_key_hex"]

    ns = v["namespace"].encode()
    verify_key = bytes(nacl.signing.SigningKey(seed).verify_key)
    assert verify_key.hex() == v["verify_key_hex"]
    assert _b2b(verify_key, b"", b"walrusmem.fpr", 16).hex() == v["fingerprint_hex"]
    assert _b2b(ns, seed, b"walrusmem.iseal").hex() == v["sealing_key_hex"]
    assert _b2b(ns, seed, b"walrusmem.idedup").hex() == v["dedupe_key_hex"]

    keys = NamespaceKeys.from_agent_key(seed, v["namespace"])
    assert keys.independent
    assert keys.verify_key.hex() == v["verify_key_hex"]
    assert keys.fingerprint_bytes.hex() == v["fingerprint_hex"]
    assert keys.fingerprint == v["fingerprint_short"]
    assert keys.sealing_key.hex() == v["sealing_key_hex"]
    assert keys.dedupe_key.hex() == v["dedupe_key_hex"]
    assert keys.dedupe_hash(v["dedupe_hash"]["text"]) == v["dedupe_hash"]["hash_hex"]


def test_generator_reproduces_the_published_file():
    gen = generator()
    assert gen.render(gen.build_vectors()) == gen.VECTORS_PATH.read_text(encoding="utf-8")


def test_kdf_table_in_vectors_matches_the_code():
    from walrus_mem import keys as k

    kdf = vectors()["kdf"]
    assert kdf["sign"]["person"].encode() == k.PERSON_SIGN
    assert kdf["seal"]["person"].encode() == k.PERSON_SEAL
    assert kdf["dedupe"]["person"].encode() == k.PERSON_DEDUP
    assert kdf["independent_seal"]["person"].encode() == k.PERSON_ISEAL
    assert kdf["independent_dedupe"]["person"].encode() == k.PERSON_IDEDUP
    assert kdf["fingerprint"]["person"].encode() == k.PERSON_FPR
    assert kdf["dedupe_hash"]["person"].encode() == k.PERSON_DHASH
    persons = [v["person"] for v in kdf.values() if isinstance(v, dict)]
    assert len(set(persons)) == len(persons) and all(len(p) <= 16 for p in persons)


# -- derivation --------------------------------------------------------------


def test_derivation_is_deterministic(master_hex):
    a = NamespaceKeys.derive(MasterSeed.from_hex(master_hex), "notes")
    b = NamespaceKeys.derive(MasterSeed.from_hex(master_hex.upper()), "notes")
    assert a == b and hash(a) == hash(b)
    assert bytes(a.signing_key) == bytes(b.signing_key)


def test_sign_seal_and_dedupe_keys_are_all_distinct(master_hex):
    keys = NamespaceKeys.derive(MasterSeed.from_hex(master_hex), "notes")
    parts = [bytes(keys.signing_key), keys.verify_key, keys.sealing_key, keys.dedupe_key]
    assert len(set(parts)) == 4
    assert all(len(p) == 32 for p in parts)
    agent = NamespaceKeys.from_agent_key(seed_bytes(1), "notes")
    parts = [bytes(agent.signing_key), agent.sealing_key, agent.dedupe_key]
    assert len(set(parts)) == 3


def test_namespaces_and_masters_give_unrelated_keys(master_hex):
    master = MasterSeed.from_hex(master_hex)
    names = ["a", "b", "notes", "notes-", "notes_", "0"]
    derived = [NamespaceKeys.derive(master, n) for n in names]
    for attr in ("verify_key", "sealing_key", "dedupe_key", "fingerprint_bytes"):
        values = {getattr(k, attr) for k in derived}
        assert len(values) == len(names), attr
    other = NamespaceKeys.derive(MasterSeed(seed_bytes(2)), "notes")
    assert other != derived[2]
    assert other.verify_key != derived[2].verify_key
    assert other.sealing_key != derived[2].sealing_key


def test_independent_key_differs_from_derived_mode_even_with_same_bytes(master_hex):
    seed = bytes.fromhex(master_hex)
    derived = NamespaceKeys.derive(MasterSeed(seed), "notes")
    independent = NamespaceKeys.from_agent_key(seed, "notes")
    assert derived.sealing_key != independent.sealing_key
    assert derived.verify_key != independent.verify_key
    # Same agent key, other namespace: same signing key, other sealing key.
    other = NamespaceKeys.from_agent_key(seed, "other")
    assert other.verify_key == independent.verify_key
    assert other.sealing_key != independent.sealing_key


def test_dedupe_hash_is_namespace_scoped(master_hex):
    master = MasterSeed.from_hex(master_hex)
    a, b = NamespaceKeys.derive(master, "a"), NamespaceKeys.derive(master, "b")
    assert a.dedupe_hash("same text") == a.dedupe_hash("same text")
    assert a.dedupe_hash("same text") != b.dedupe_hash("same text")
    assert a.dedupe_hash("same text") != a.dedupe_hash("same text.")


def test_derive_rejects_bad_arguments(master_hex):
    with pytest.raises(MalformedKey, match="MasterSeed"):
        NamespaceKeys.derive(bytes.fromhex(master_hex), "a")  # type: ignore[arg-type]
    with pytest.raises(InvalidNamespace):
        NamespaceKeys.derive(MasterSeed.from_hex(master_hex), "Bad")
    for bad in (b"short", "x" * 32, bytes(31), bytes(33)):
        with pytest.raises(MalformedKey, match="32 bytes"):
            NamespaceKeys.from_agent_key(bad, "a")  # type: ignore[arg-type]
    with pytest.raises(InvalidNamespace):
        NamespaceKeys.from_agent_key(bytes(32), "")


def test_keys_cannot_be_pickled(master_hex):
    master = MasterSeed.from_hex(master_hex)
    for obj in (master, NamespaceKeys.derive(master, "a")):
        with pytest.raises(TypeError):
            pickle.dumps(obj)


def test_repr_shows_fingerprint_only(master_hex):
    master = MasterSeed.from_hex(master_hex)
    keys = NamespaceKeys.derive(master, "default")
    assert repr(master) == str(master) == f"<MasterSeed fingerprint={keys.fingerprint}>"
    assert (
        repr(keys) == f"<NamespaceKeys namespace='default' derived fingerprint={keys.fingerprint}>"
    )
    agent = NamespaceKeys.from_agent_key(seed_bytes(3), "default")
    assert "independent" in repr(agent)
    assert master_hex not in repr(master) + repr(keys) + f"{master}{keys}"
    assert master == MasterSeed.from_hex(master_hex) and master != MasterSeed(seed_bytes(4))
    assert len({master, MasterSeed.from_hex(master_hex)}) == 1


def test_generate_master_seed_is_random():
    a, b = generate_master_seed(), generate_master_seed()
    assert a != b and len(a.secret_bytes()) == 32


# -- namespace rule ----------------------------------------------------------

VALID_NS = st.from_regex(r"\A[a-z0-9][a-z0-9_-]{0,63}\Z", fullmatch=True)


@given(VALID_NS)
def test_valid_namespaces_are_accepted(name):
    assert validate_namespace(name) == name


@given(st.text(max_size=80))
def test_namespace_rule_on_arbitrary_text(name):
    ok = (
        1 <= len(name) <= 64
        and all(c in "abcdefghijklmnopqrstuvwxyz0123456789_-" for c in name)
        and name[0] not in "-_"
    )
    if ok:
        assert validate_namespace(name) == name
    else:
        with pytest.raises(InvalidNamespace) as info:
            validate_namespace(name)
        assert NAMESPACE_RULE in str(info.value)


@pytest.mark.parametrize(
    "name",
    ["", "-a", "_a", "A", "aB", "a b", "a.b", "a/b", "é", "a\n", "\na", "x" * 65, "ａ"],
)
def test_invalid_namespaces_name_the_rule(name):
    with pytest.raises(InvalidNamespace, match=r"1-64 characters of \[a-z0-9_-\]") as info:
        validate_namespace(name)
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("name", [None, 1, b"abc", ["a"]])
def test_non_string_namespace_is_invalid(name):
    with pytest.raises(InvalidNamespace, match="starting with a letter or digit"):
        validate_namespace(name)


def test_edge_namespaces_are_valid():
    for name in ("a", "0", "x" * 64, "a-", "a_", "9-lives_x"):
        assert validate_namespace(name) == name


# -- MasterSeed --------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["", "00", "0" * 63, "0" * 65, "g" * 64, "0x" + "0" * 62, "0" * 32 + " " + "0" * 31, "０" * 64],
)
def test_master_seed_from_hex_rejects(text):
    with pytest.raises(MalformedKey, match="64 hexadecimal"):
        MasterSeed.from_hex(text)


def test_master_seed_from_hex_accepts_case_and_surrounding_whitespace(master_hex):
    assert MasterSeed.from_hex(f"  {master_hex.upper()}\n") == MasterSeed.from_hex(master_hex)


@pytest.mark.parametrize("value", [b"", bytes(31), bytes(33), "0" * 32, None, 5])
def test_master_seed_constructor_rejects(value):
    with pytest.raises(MalformedKey, match="32 bytes"):
        MasterSeed(value)


def test_master_seed_from_hex_rejects_non_string():
    with pytest.raises(MalformedKey):
        MasterSeed.from_hex(b"00" * 32)  # type: ignore[arg-type]


# -- parse_ed25519_key -------------------------------------------------------


def _agent_encodings(seed: bytes) -> dict[str, str]:
    full = seed + bytes(nacl.signing.SigningKey(seed).verify_key)
    return {
        "hex": seed.hex(),
        "HEX": seed.hex().upper(),
        "0x-hex": "0x" + seed.hex(),
        "hex64": full.hex(),
        "base64": base64.b64encode(seed).decode(),
        "base64-unpadded": base64.b64encode(seed).decode().rstrip("="),
        "base64url": base64.urlsafe_b64encode(seed).decode(),
        "base64-64": base64.b64encode(full).decode(),
        "base64url-64-unpadded": base64.urlsafe_b64encode(full).decode().rstrip("="),
        "whitespace": f"\n  {seed.hex()}  \n",
    }


@pytest.mark.parametrize("kind", list(_agent_encodings(bytes(32))))
def test_parse_ed25519_key_encodings(kind):
    # A seed whose base64 uses both '+'/'/' (std) and '-'/'_' (url) characters.
    seed = bytes([0xFB, 0xFF, 0xBF] * 10 + [1, 2])
    assert parse_ed25519_key(_agent_encodings(seed)[kind]) == seed


def test_parse_ed25519_key_rejects_mismatched_public_half():
    seed = seed_bytes(5)
    wrong_pub = bytes(nacl.signing.SigningKey(seed_bytes(6)).verify_key)
    for text in ((seed + wrong_pub).hex(), base64.b64encode(seed + wrong_pub).decode()):
        with pytest.raises(MalformedKey, match="public half does not match"):
            parse_ed25519_key(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "zz" * 32,
        "00" * 31,
        "00" * 33,
        "00" * 48,
        base64.b64encode(bytes(31)).decode(),
        base64.b64encode(b"\x01" * 48).decode(),
        "not a key at all",
        "é" * 44,
        "A",
        "!!!!",
        "AAAA====AAAA",
    ],
)
def test_parse_ed25519_key_rejects_garbage(text):
    with pytest.raises(MalformedKey, match="Ed25519 private key") as info:
        parse_ed25519_key(text)
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_parse_ed25519_key_rejects_non_string():
    with pytest.raises(MalformedKey):
        parse_ed25519_key(bytes(32))  # type: ignore[arg-type]


@given(st.text(max_size=200))
def test_parse_ed25519_key_only_raises_malformed_key(text):
    try:
        seed = parse_ed25519_key(text)
    except MalformedKey:
        return
    assert len(seed) == 32


# -- key files ---------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_key_file_written_0600_in_new_0700_dir(tmp_path):
    path = tmp_path / "deep" / "keys" / "master.key"
    seed = MasterSeed(seed_bytes(7))
    assert write_key_file(path, seed) == path
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700 and _mode(path.parent.parent) == 0o700
    assert path.read_text() == seed.to_hex() + "\n"
    assert load_key_file(path) == seed
    assert [p.name for p in path.parent.iterdir()] == ["master.key"]  # no temp file left


def test_key_file_mode_ignores_umask(tmp_path):
    old = os.umask(0)
    try:
        path = write_key_file(tmp_path / "k" / "master.key", MasterSeed(seed_bytes(8)))
    finally:
        os.umask(old)
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700


def test_key_file_does_not_chmod_an_existing_directory(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    path = write_key_file(shared / "master.key", MasterSeed(seed_bytes(9)))
    assert _mode(shared) == 0o755  # e.g. a home directory must not be changed
    assert _mode(path) == 0o600


def test_key_file_refuses_to_overwrite_without_force(tmp_path):
    path = tmp_path / "keys" / "master.key"
    first, second = MasterSeed(seed_bytes(10)), MasterSeed(seed_bytes(11))
    write_key_file(path, first)
    with pytest.raises(KeyExists, match="force"):
        write_key_file(path, second)
    assert load_key_file(path) == first
    write_key_file(path, second, force=True)
    assert load_key_file(path) == second
    assert _mode(path) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["master.key"]


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o606, 0o610, 0o601, 0o777])
def test_key_file_refused_when_group_or_other_can_access(tmp_path, mode):
    path = write_key_file(tmp_path / "keys" / "master.key", MasterSeed(seed_bytes(12)))
    os.chmod(path, mode)
    with pytest.raises(InsecureKeyFile, match=r"chmod 600") as info:
        load_key_file(path)
    assert f"{mode:04o}" in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_key_file_private_modes_are_accepted(tmp_path, mode):
    seed = MasterSeed(seed_bytes(13))
    path = write_key_file(tmp_path / "keys" / "master.key", seed)
    os.chmod(path, mode)
    assert load_key_file(path) == seed


def test_key_file_missing_or_not_a_file(tmp_path):
    with pytest.raises(KeyNotFound, match="does not exist"):
        load_key_file(tmp_path / "nope.key")
    (tmp_path / "dir.key").mkdir(mode=0o700)
    with pytest.raises(KeyNotFound):
        load_key_file(tmp_path / "dir.key")


@pytest.mark.parametrize(
    "content",
    [b"", b"00" * 31, b"zz" * 32, bytes(range(32)), b"\xff" * 64, b"00" * 32 + b"x", b"0" * 5000],
)
def test_key_file_malformed_content(tmp_path, content):
    path = tmp_path / "bad.key"
    path.write_bytes(content)
    os.chmod(path, 0o600)
    with pytest.raises(MalformedKey, match="64-hex-character") as info:
        load_key_file(path)
    # Never chained to a decoder error that would carry the file's bytes.
    exc = info.value
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)


def test_key_file_write_failure_is_typed(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(KeyMaterialError, match="cannot create key file"):
        write_key_file(blocker / "sub" / "master.key", MasterSeed(seed_bytes(14)))


# -- keyring -----------------------------------------------------------------


def test_keyring_store_and_load_with_memory_backend(memory_keyring):
    seed = MasterSeed(seed_bytes(15))
    assert keyring_load() is None
    keyring_store(seed)
    assert memory_keyring.store[(KEYRING_SERVICE, KEYRING_USERNAME)] == seed.to_hex()
    assert keyring_load() == seed


def test_keyring_store_refuses_to_replace_without_force(memory_keyring):
    first, second = MasterSeed(seed_bytes(16)), MasterSeed(seed_bytes(17))
    keyring_store(first)
    with pytest.raises(KeyExists, match="force"):
        keyring_store(second)
    assert keyring_load() == first
    keyring_store(second, force=True)
    assert keyring_load() == second


def test_keyring_custom_service_and_username(memory_keyring):
    seed = MasterSeed(seed_bytes(18))
    keyring_store(seed, service="svc", username="user")
    assert keyring_load("svc", "user") == seed
    assert keyring_load() is None


def test_keyring_malformed_entry(memory_keyring):
    memory_keyring.set_password(KEYRING_SERVICE, KEYRING_USERNAME, "not-hex")
    with pytest.raises(MalformedKey, match="keyring entry"):
        keyring_load()


@pytest.mark.parametrize("backend", [fail.Keyring, null.Keyring])
def test_no_keyring_backend_names_the_alternatives(backend):
    keyring.set_keyring(backend())
    for call in (keyring_load, lambda: keyring_store(MasterSeed(seed_bytes(19)))):
        with pytest.raises(KeyringUnavailable) as info:
            call()
        msg = str(info.value)
        assert MASTER_KEY_ENV in msg and "key file" in msg and backend.__name__ in msg


def test_store_to_null_backend_does_not_succeed_and_writes_nothing(tmp_path, clean_environ):
    keyring.set_keyring(null.Keyring())
    before = sorted(p for p in tmp_path.rglob("*"))
    with pytest.raises(KeyringUnavailable):
        keyring_store(MasterSeed(seed_bytes(20)))
    assert sorted(p for p in tmp_path.rglob("*")) == before  # no plaintext fallback


class _DroppingKeyring(KeyringBackend):
    """A backend that claims success but keeps nothing (like a broken agent)."""

    priority = 1

    def get_password(self, service, username):
        return None

    def set_password(self, service, username, password):
        pass

    def delete_password(self, service, username):
        pass


class _ExplodingKeyring(_DroppingKeyring):
    def get_password(self, service, username):
        raise RuntimeError("dbus went away")


def test_keyring_that_drops_secrets_is_an_error():
    keyring.set_keyring(_DroppingKeyring())
    with pytest.raises(KeyringUnavailable, match="did not keep the secret"):
        keyring_store(MasterSeed(seed_bytes(21)))


def test_keyring_backend_exception_is_typed():
    keyring.set_keyring(_ExplodingKeyring())
    with pytest.raises(KeyringUnavailable, match="RuntimeError"):
        keyring_load()
    with pytest.raises(KeyringUnavailable, match="RuntimeError"):
        keyring_store(MasterSeed(seed_bytes(22)))


# -- resolution and precedence -------------------------------------------------


@pytest.fixture
def sources(tmp_path, memory_keyring, monkeypatch):
    """One distinct seed in every source: argument, config, env, keyring, key file."""
    seeds = {
        name: MasterSeed(seed_bytes(30 + i))
        for i, name in enumerate(["argument", "config", "env", "keyring", "key_file"])
    }
    key_file = write_key_file(tmp_path / "keys" / "master.key", seeds["key_file"])
    keyring_store(seeds["keyring"])
    monkeypatch.setenv(MASTER_KEY_ENV, seeds["env"].to_hex())
    return seeds, key_file


def test_precedence_argument_first(sources):
    seeds, key_file = sources
    for explicit in (
        seeds["argument"],
        seeds["argument"].to_hex(),
        seeds["argument"].secret_bytes(),
    ):
        got = resolve_master_seed(
            explicit, config_value=seeds["config"].to_hex(), key_file=key_file
        )
        assert got == (seeds["argument"], "argument")


def test_precedence_config_over_env(sources):
    seeds, key_file = sources
    got = resolve_master_seed(config_value=seeds["config"].to_hex(), key_file=key_file)
    assert got == (seeds["config"], "config")


def test_config_value_may_be_a_secretstr(sources):
    from pydantic import SecretStr

    seeds, key_file = sources
    got = resolve_master_seed(config_value=SecretStr(seeds["config"].to_hex()), key_file=key_file)
    assert got == (seeds["config"], "config")


def test_precedence_env_over_keyring(sources):
    seeds, key_file = sources
    assert resolve_master_seed(key_file=key_file) == (seeds["env"], "env")
    assert resolve_master_seed(config_value="", key_file=key_file) == (seeds["env"], "env")


def test_precedence_keyring_over_key_file(sources, monkeypatch):
    seeds, key_file = sources
    monkeypatch.delenv(MASTER_KEY_ENV)
    assert resolve_master_seed(key_file=key_file) == (seeds["keyring"], "keyring")
    monkeypatch.setenv(MASTER_KEY_ENV, "")  # empty counts as unset
    assert resolve_master_seed(key_file=key_file) == (seeds["keyring"], "keyring")


def test_key_file_last(sources, monkeypatch):
    seeds, key_file = sources
    monkeypatch.delenv(MASTER_KEY_ENV)
    assert resolve_master_seed(key_file=key_file, use_keyring=False) == (
        seeds["key_file"],
        "key_file",
    )
    keyring.set_keyring(fail.Keyring())  # no backend: skipped quietly
    assert resolve_master_seed(key_file=key_file) == (seeds["key_file"], "key_file")


def test_explicit_environ_mapping_replaces_os_environ(sources):
    seeds, key_file = sources
    other = MasterSeed(seed_bytes(40))
    got = resolve_master_seed(environ={MASTER_KEY_ENV: other.to_hex()}, key_file=key_file)
    assert got == (other, "env")
    got = resolve_master_seed(environ={}, key_file=key_file)
    assert got == (seeds["keyring"], "keyring")


def test_nothing_found_lists_every_source(tmp_path):
    with pytest.raises(KeyNotFound) as info:
        resolve_master_seed(key_file=tmp_path / "none.key")
    msg = str(info.value)
    for needle in (
        "explicitly",
        "master_key",
        MASTER_KEY_ENV,
        "keyring",
        "no entry",
        str(tmp_path / "none.key"),
    ):
        assert needle in msg
    keyring.set_keyring(fail.Keyring())
    with pytest.raises(KeyNotFound, match="keyring: unavailable"):
        resolve_master_seed()


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [
        ({"explicit": "abc"}, "the argument"),
        ({"explicit": b"abc"}, "the argument"),
        ({"config_value": "abc"}, "config"),
        ({"environ": {MASTER_KEY_ENV: "abc"}}, MASTER_KEY_ENV),
    ],
)
def test_malformed_value_names_its_source_and_does_not_fall_through(sources, kwargs, where):
    _, key_file = sources
    with pytest.raises(MalformedKey, match="64 hexadecimal") as info:
        resolve_master_seed(key_file=key_file, **kwargs)
    assert where in str(info.value)


def test_insecure_key_file_is_not_skipped(sources, monkeypatch):
    _, key_file = sources
    monkeypatch.delenv(MASTER_KEY_ENV)
    os.chmod(key_file, 0o644)
    with pytest.raises(InsecureKeyFile):
        resolve_master_seed(key_file=key_file, use_keyring=False)
