"""No secret bytes in any repr, str, exception message (whole chain) or DEBUG log.

Every key and sealing operation, and every error path, runs under one scanner
that knows all the secrets in play and looks for them in hex (lower/upper),
base64 (standard/URL-safe, padded/unpadded), raw bytes (latin-1), and any 8+
character piece of their hex form.
"""

from __future__ import annotations

import base64
import logging
import os
import pickle
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import keyring
import nacl.signing
import nacl.utils
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail, null

from walrus_mem.config import Settings
from walrus_mem.envelope import open_envelope, seal
from walrus_mem.errors import WalrusMemError
from walrus_mem.keys import (
    MASTER_KEY_ENV,
    MasterSeed,
    NamespaceKeys,
    generate_master_seed,
    keyring_load,
    keyring_store,
    load_key_file,
    parse_ed25519_key,
    resolve_master_seed,
    write_key_file,
)

WINDOW = 8


def _forms(secret: bytes) -> set[str]:
    h = secret.hex()
    forms = {h, h.upper(), secret.decode("latin-1")}
    for enc in (base64.b64encode(secret), base64.urlsafe_b64encode(secret)):
        text = enc.decode()
        forms |= {text, text.rstrip("=")}
    for hx in (h, h.upper()):
        forms |= {hx[i : i + WINDOW] for i in range(len(hx) - WINDOW + 1)}
    return forms


class Scanner:
    """Collects every text the code under test produced, then looks for secrets."""

    def __init__(self) -> None:
        self.secrets: dict[str, bytes] = {}
        self.texts: list[tuple[str, str]] = []

    def secret(self, label: str, value: bytes) -> bytes:
        self.secrets[label] = bytes(value)
        return value

    def keys(self, label: str, keys: NamespaceKeys) -> NamespaceKeys:
        self.secret(f"{label}.signing_seed", bytes(keys.signing_key))
        self.secret(f"{label}.sealing_key", keys.sealing_key)
        self.secret(f"{label}.dedupe_key", keys.dedupe_key)
        self.text(f"{label} repr", repr(keys), str(keys), f"{keys}", f"{keys!r}", repr([keys]))
        return keys

    def text(self, where: str, *texts: str) -> None:
        self.texts.extend((where, t) for t in texts)

    def exc(self, where: str, exc: BaseException) -> None:
        """Scan an exception and everything reachable through __cause__ and __context__."""
        seen: set[int] = set()
        todo: list[BaseException] = [exc]
        while todo:
            e = todo.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            self.text(where, str(e), repr(e), repr(e.args), repr(vars(e)))
            todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
        self.text(where, "".join(traceback.format_exception(exc)))

    def raises(self, where: str, func: Callable[[], Any]) -> BaseException:
        """Run ``func``, which must fail with a walrus_mem error; scan the error."""
        try:
            func()
        except WalrusMemError as exc:
            self.exc(where, exc)
            return exc
        raise AssertionError(f"{where}: expected a walrus_mem error")

    def check(self) -> None:
        assert self.secrets
        forms = {label: _forms(v) for label, v in self.secrets.items()}
        for where, text in self.texts:
            for label, needles in forms.items():
                for needle in needles:
                    assert needle not in text, f"{label} leaked in {where}: {text[:200]!r}"


@pytest.fixture
def scan(caplog: pytest.LogCaptureFixture) -> Iterator[Scanner]:
    scanner = Scanner()
    caplog.set_level(logging.DEBUG)  # root logger: every library's DEBUG records
    yield scanner
    for record in caplog.records:
        scanner.text(
            f"log {record.name}",
            record.getMessage(),
            repr(record.args),
            str(record.exc_text or ""),
        )
    scanner.text("captured log", caplog.text)
    scanner.check()


@pytest.fixture
def master(scan: Scanner) -> MasterSeed:
    seed = generate_master_seed()
    scan.secret("master", seed.secret_bytes())
    scan.text("master repr", repr(seed), str(seed), f"{seed}", repr({"m": seed}))
    return seed


@pytest.fixture
def agent_seed(scan: Scanner) -> bytes:
    seed = scan.secret("agent", nacl.utils.random(32))
    scan.secret("agent.secret_key_64", seed + bytes(nacl.signing.SigningKey(seed).verify_key))
    return seed


def test_derivation_and_agent_keys(scan, master, agent_seed):
    for ns in ("default", "a", "team-alpha", "x" * 64):
        scan.keys(f"derived {ns}", NamespaceKeys.derive(master, ns))
        scan.keys(f"agent {ns}", NamespaceKeys.from_agent_key(agent_seed, ns))
    scan.raises("derive bad ns", lambda: NamespaceKeys.derive(master, "Bad"))
    scan.raises("derive bytes", lambda: NamespaceKeys.derive(master.secret_bytes(), "a"))
    scan.raises("agent short", lambda: NamespaceKeys.from_agent_key(agent_seed[:31], "a"))
    scan.raises("agent bad ns", lambda: NamespaceKeys.from_agent_key(agent_seed, "-"))
    scan.raises("master short", lambda: MasterSeed(master.secret_bytes()[:31]))
    scan.raises("from_hex short", lambda: MasterSeed.from_hex(master.to_hex()[:-1]))
    scan.raises("from_hex junk", lambda: MasterSeed.from_hex(master.to_hex() + "zz"))
    with pytest.raises(TypeError) as info:
        pickle.dumps(master)
    scan.exc("pickle", info.value)


def test_parse_agent_keys(scan, agent_seed):
    full = agent_seed + bytes(nacl.signing.SigningKey(agent_seed).verify_key)
    for text in (agent_seed.hex(), base64.b64encode(full).decode(), full.hex().upper()):
        assert parse_ed25519_key(text) == agent_seed
    wrong = agent_seed + bytes(32)
    scan.raises("mismatched public half", lambda: parse_ed25519_key(wrong.hex()))
    scan.raises("hex + junk", lambda: parse_ed25519_key(agent_seed.hex() + "zz"))
    scan.raises("short hex", lambda: parse_ed25519_key(agent_seed.hex()[:-2]))
    scan.raises(
        "b64 + junk", lambda: parse_ed25519_key(base64.b64encode(agent_seed).decode() + "!")
    )
    scan.raises(
        "b64 of 33", lambda: parse_ed25519_key(base64.b64encode(agent_seed + b"x").decode())
    )


def test_seal_open_and_every_envelope_error(scan, master, agent_seed):
    keys = scan.keys("a", NamespaceKeys.derive(master, "a"))
    other = scan.keys("b", NamespaceKeys.derive(master, "b"))
    agent = scan.keys("agent", NamespaceKeys.from_agent_key(agent_seed, "a"))
    record = {"id": "m1", "kind": "fact", "text": "hello", "metadata": {"k": [1, 2.5, None]}}
    blob = seal(keys, record)
    assert open_envelope(keys, blob, expected_id="m1") == record
    assert open_envelope(agent, seal(agent, record)) == record
    scan.raises("wrong namespace", lambda: open_envelope(other, blob))
    scan.raises("independent vs derived", lambda: open_envelope(agent, blob))
    scan.raises("flip", lambda: open_envelope(keys, blob[:-1] + bytes([blob[-1] ^ 1])))
    scan.raises("flip ct", lambda: open_envelope(keys, blob[:60] + b"\x00" + blob[61:]))
    scan.raises("truncated", lambda: open_envelope(keys, blob[:100]))
    scan.raises("appended", lambda: open_envelope(keys, blob + b"\x00"))
    scan.raises("version", lambda: open_envelope(keys, blob[:4] + b"\x07" + blob[5:]))
    scan.raises("mismatch", lambda: open_envelope(keys, blob, expected_id="m2"))
    scan.raises("kind", lambda: open_envelope(keys, blob, expected_kind="manifest"))
    scan.raises("too large", lambda: seal(keys, {**record, "text": "x" * 300}, max_plaintext=100))
    scan.raises("nan", lambda: seal(keys, {**record, "x": float("nan")}))
    scan.raises("no id", lambda: seal(keys, {"kind": "fact"}))
    scan.raises("bad nonce", lambda: seal(keys, record, nonce=b"short"))
    other_seal = NamespaceKeys(
        namespace="a",
        signing_key=keys.signing_key,
        sealing_key=other.sealing_key,
        dedupe_key=keys.dedupe_key,
    )
    scan.raises("aead", lambda: open_envelope(other_seal, blob))


def test_resolution_from_every_source_and_its_errors(scan, master, tmp_path, monkeypatch):
    others = [scan.secret(f"seed{i}", nacl.utils.random(32)) for i in range(4)]
    key_file = write_key_file(tmp_path / "keys" / "master.key", MasterSeed(others[3]))
    keyring_store(MasterSeed(others[2]))
    monkeypatch.setenv(MASTER_KEY_ENV, others[1].hex())

    results = [
        resolve_master_seed(master, key_file=key_file),
        resolve_master_seed(master.to_hex(), key_file=key_file),
        resolve_master_seed(master.secret_bytes(), key_file=key_file),
        resolve_master_seed(config_value=others[0].hex(), key_file=key_file),
        resolve_master_seed(key_file=key_file),
    ]
    monkeypatch.delenv(MASTER_KEY_ENV)
    results.append(resolve_master_seed(key_file=key_file))
    keyring.set_keyring(fail.Keyring())
    results.append(resolve_master_seed(key_file=key_file))
    assert [src for _, src in results] == [
        "argument", "argument", "argument", "config", "env", "keyring", "key_file",
    ]  # fmt: skip
    scan.text("results", repr(results))

    near = others[0].hex()[:-1]  # a malformed value made of secret hex
    scan.raises("explicit", lambda: resolve_master_seed(near))
    scan.raises("explicit bytes", lambda: resolve_master_seed(others[0][:-1]))
    scan.raises("config", lambda: resolve_master_seed(config_value=near))
    scan.raises("env", lambda: resolve_master_seed(environ={MASTER_KEY_ENV: near + "g"}))
    scan.raises("nothing", lambda: resolve_master_seed(key_file=tmp_path / "none.key"))


def test_key_files_and_their_errors(scan, master, tmp_path):
    path = write_key_file(tmp_path / "k" / "master.key", master)
    assert load_key_file(path) == master
    scan.raises("exists", lambda: write_key_file(path, master))
    write_key_file(path, master, force=True)
    os.chmod(path, 0o644)
    scan.raises("insecure", lambda: load_key_file(path))

    for i, content in enumerate(
        [
            master.secret_bytes(),  # raw bytes instead of hex
            master.to_hex().encode() + b"\xff",  # non-ASCII tail: no UnicodeDecodeError chain
            master.to_hex()[:-1].encode(),
            (master.to_hex() + "\n").encode() * 2,
            master.to_hex().encode() * 100,
        ]
    ):
        bad = tmp_path / f"bad{i}.key"
        bad.write_bytes(content)
        os.chmod(bad, 0o600)
        scan.raises(f"malformed file {i}", lambda bad=bad: load_key_file(bad))
    scan.raises("missing", lambda: load_key_file(tmp_path / "missing.key"))
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    scan.raises("unwritable", lambda: write_key_file(blocker / "x" / "m.key", master))


class _LeakyKeyring(KeyringBackend):
    """A backend whose errors quote the secret it was given (the worst case)."""

    priority = 1

    def __init__(self, value: str | None = None) -> None:
        super().__init__()
        self.value = value

    def get_password(self, service: str, username: str) -> str | None:
        if self.value is not None:
            raise RuntimeError(f"backend failed holding {self.value}")
        return None

    def set_password(self, service: str, username: str, password: str) -> None:
        raise RuntimeError(f"cannot store {password}")

    def delete_password(self, service: str, username: str) -> None:
        pass


def test_keyring_store_load_and_every_error(scan, master, memory_keyring):
    keyring_store(master)
    assert keyring_load() == master
    scan.raises("exists", lambda: keyring_store(master))
    keyring_store(master, force=True)
    memory_keyring.set_password("walrus-mem", "master-seed", master.to_hex()[:-1])
    scan.raises("malformed entry", keyring_load)
    for backend in (fail.Keyring(), null.Keyring()):
        keyring.set_keyring(backend)
        scan.raises(f"{backend} load", keyring_load)
        scan.raises(f"{backend} store", lambda: keyring_store(master))
    keyring.set_keyring(_LeakyKeyring())
    scan.raises("leaky store", lambda: keyring_store(master))
    keyring.set_keyring(_LeakyKeyring(master.to_hex()))
    scan.raises("leaky load", keyring_load)


def test_config_errors(scan, tmp_path, monkeypatch, agent_seed):
    bad_agent_key = agent_seed.hex()[:-2]  # malformed, but made of secret hex
    monkeypatch.setenv("WM_AGENT_KEY", bad_agent_key)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[agents.bot]\nkey = "${WM_AGENT_KEY}"\n')
    # resolved (and parsed) when the agent is opened, not when the file is loaded
    scan.raises("agent key", lambda: Settings.load(config_file=cfg).agent("bot").agent_seed("bot"))
    monkeypatch.setenv("WALRUS_MEM_AGENTS", '{"bot": {"key": "' + agent_seed.hex())
    scan.raises("env json", lambda: Settings.load())
    monkeypatch.delenv("WALRUS_MEM_AGENTS")
    monkeypatch.setenv("WM_SECRET", agent_seed.hex())
    cfg.write_text('publisher_token = "${WM_SECRET}"\nmaster_key = "${WM_UNSET}"\n')
    scan.raises("placeholder", lambda: Settings.load(config_file=cfg).master_key_value())
    cfg.write_text('publisher_token = "${WM_SECRET}"\nepochs = "${WM_UNSET}"\n')
    scan.raises("placeholder", lambda: Settings.load(config_file=cfg))
    cfg.write_text(f'publisher_token = "{agent_seed.hex()}"\nepochs = 0\n')
    scan.raises("validation", lambda: Settings.load(config_file=cfg))
    good = Settings.load(publisher_token=agent_seed.hex(), master_key=agent_seed.hex())
    scan.text("settings repr", repr(good), str(good), repr(good.model_dump()))


def test_scanner_catches_leaks():
    """The scanner itself must be able to fail (so passing tests mean something)."""
    secret = nacl.utils.random(32)
    for leak in (
        secret.hex(),
        secret.hex().upper(),
        secret.hex()[10:18],
        base64.b64encode(secret).decode(),
        base64.urlsafe_b64encode(secret).decode().rstrip("="),
        secret.decode("latin-1"),
    ):
        scanner = Scanner()
        scanner.secret("s", secret)
        scanner.secret("t", nacl.utils.random(32))
        scanner.text("probe", f"message with {leak} inside")
        with pytest.raises(AssertionError, match="s leaked"):
            scanner.check()
