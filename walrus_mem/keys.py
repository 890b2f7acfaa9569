"""Key material: the master seed, per-namespace keys, and where keys come from.

Derivation (exact, reproducible; see docs/keys.md):

* master seed ``M``: 32 random bytes per installation.
* namespace ``ns`` (validated, UTF-8 bytes ``N``):

  - signing seed  = BLAKE2b-256(data=N, key=M, person=b"walrusmem.sign")
  - sealing key   = BLAKE2b-256(data=N, key=M, person=b"walrusmem.seal")
  - dedupe key    = BLAKE2b-256(data=N, key=M, person=b"walrusmem.dedup")

* independent agent key (an Ed25519 seed ``S`` supplied by the user):

  - signing seed  = S
  - sealing key   = BLAKE2b-256(data=N, key=S, person=b"walrusmem.iseal")
  - dedupe key    = BLAKE2b-256(data=N, key=S, person=b"walrusmem.idedup")

* fingerprint = BLAKE2b-128(data=verify_key, person=b"walrusmem.fpr"); shown
  as the first 8 and last 4 hex characters of its hex form.

Personalisation strings are zero-padded to 16 bytes by libsodium/PyNaCl.
Every purpose has its own personalisation, so no derived bytes are reused for
both signing and encryption.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import nacl.hash
import nacl.signing
import nacl.utils
from nacl.encoding import RawEncoder

from .errors import (
    InsecureKeyFile,
    InvalidNamespace,
    KeyExists,
    KeyNotFound,
    KeyringUnavailable,
    MalformedKey,
)

__all__ = [
    "KEYRING_SERVICE",
    "KEYRING_USERNAME",
    "MASTER_KEY_ENV",
    "MasterSeed",
    "NamespaceKeys",
    "fingerprint_of",
    "generate_master_seed",
    "load_key_file",
    "parse_ed25519_key",
    "resolve_master_seed",
    "validate_namespace",
    "write_key_file",
    "keyring_load",
    "keyring_store",
]

log = logging.getLogger(__name__)

SEED_SIZE: Final = 32
MASTER_KEY_ENV: Final = "WALRUS_MEM_MASTER_KEY"
KEYRING_SERVICE: Final = "walrus-mem"
KEYRING_USERNAME: Final = "master-seed"

PERSON_SIGN: Final = b"walrusmem.sign"
PERSON_SEAL: Final = b"walrusmem.seal"
PERSON_DEDUP: Final = b"walrusmem.dedup"
PERSON_ISEAL: Final = b"walrusmem.iseal"
PERSON_IDEDUP: Final = b"walrusmem.idedup"
PERSON_FPR: Final = b"walrusmem.fpr"

NAMESPACE_RULE: Final = "1-64 characters of [a-z0-9_-], starting with a letter or digit"
_NAMESPACE_RE: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_HEX64_RE: Final = re.compile(r"[0-9a-fA-F]{64}")


def validate_namespace(name: object) -> str:
    """Return ``name`` if it is a valid namespace, else raise :class:`InvalidNamespace`."""
    if not isinstance(name, str) or not _NAMESPACE_RE.fullmatch(name):
        shown = repr(name)[:80] if isinstance(name, str) else type(name).__name__
        raise InvalidNamespace(f"invalid namespace {shown}: must be {NAMESPACE_RULE}")
    return name


def _blake2b(data: bytes, *, key: bytes, person: bytes, size: int = 32) -> bytes:
    return nacl.hash.blake2b(  # type: ignore[no-any-return]
        data, digest_size=size, key=key, person=person, encoder=RawEncoder
    )


def fingerprint_of(verify_key: bytes) -> bytes:
    """16-byte fingerprint of an Ed25519 public key (what blobs carry)."""
    return _blake2b(verify_key, key=b"", person=PERSON_FPR, size=16)


def _short(fpr: bytes) -> str:
    h = fpr.hex()
    return f"{h[:8]}…{h[-4:]}"


class MasterSeed:
    """The 32-byte installation secret. ``repr``/``str`` show only a fingerprint."""

    __slots__ = ("_seed",)

    def __init__(self, seed: bytes) -> None:
        if not isinstance(seed, bytes | bytearray) or len(seed) != SEED_SIZE:
            raise MalformedKey(f"master seed must be exactly {SEED_SIZE} bytes")
        self._seed = bytes(seed)

    @classmethod
    def from_hex(cls, text: str) -> MasterSeed:
        text = text.strip()
        if not _HEX64_RE.fullmatch(text):
            raise MalformedKey("master key must be 64 hexadecimal characters (32 bytes)")
        return cls(bytes.fromhex(text))

    @property
    def fingerprint(self) -> str:
        """Public identifier: fingerprint of the key derived for namespace ``default``."""
        return NamespaceKeys.derive(self, "default").fingerprint

    def to_hex(self) -> str:
        """The secret itself, hex encoded. Only for writing to a key store."""
        return self._seed.hex()

    def secret_bytes(self) -> bytes:
        return self._seed

    def __repr__(self) -> str:
        return f"<MasterSeed fingerprint={self.fingerprint}>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MasterSeed):
            return NotImplemented
        return hmac.compare_digest(self._seed, other._seed)

    def __hash__(self) -> int:
        return hash(fingerprint_of(self._seed))

    def __reduce__(self) -> Any:  # pragma: no cover - pickling a secret is a bug
        raise TypeError("MasterSeed cannot be pickled")


@dataclass(frozen=True, repr=False, eq=False)
class NamespaceKeys:
    """All keys of one namespace. Secret parts are never shown.

    Build with :meth:`derive` (from a master seed) or :meth:`from_agent_key`
    (an independent Ed25519 key).
    """

    namespace: str
    signing_key: nacl.signing.SigningKey
    sealing_key: bytes
    dedupe_key: bytes
    independent: bool = False

    @classmethod
    def derive(cls, master: MasterSeed, namespace: str) -> NamespaceKeys:
        ns = validate_namespace(namespace).encode()
        seed = master.secret_bytes()
        return cls(
            namespace=namespace,
            signing_key=nacl.signing.SigningKey(_blake2b(ns, key=seed, person=PERSON_SIGN)),
            sealing_key=_blake2b(ns, key=seed, person=PERSON_SEAL),
            dedupe_key=_blake2b(ns, key=seed, person=PERSON_DEDUP),
        )

    @classmethod
    def from_agent_key(cls, agent_seed: bytes, namespace: str) -> NamespaceKeys:
        if len(agent_seed) != SEED_SIZE:
            raise MalformedKey("Ed25519 private key seed must be 32 bytes")
        ns = validate_namespace(namespace).encode()
        return cls(
            namespace=namespace,
            signing_key=nacl.signing.SigningKey(bytes(agent_seed)),
            sealing_key=_blake2b(ns, key=agent_seed, person=PERSON_ISEAL),
            dedupe_key=_blake2b(ns, key=agent_seed, person=PERSON_IDEDUP),
            independent=True,
        )

    @property
    def verify_key(self) -> bytes:
        return bytes(self.signing_key.verify_key)

    @property
    def fingerprint_bytes(self) -> bytes:
        return fingerprint_of(self.verify_key)

    @property
    def fingerprint(self) -> str:
        return _short(self.fingerprint_bytes)

    def dedupe_hash(self, normalised_text: str) -> str:
        """Keyed hash of normalised text: equal texts collide only within this namespace."""
        return _blake2b(normalised_text.encode(), key=self.dedupe_key, person=b"walrusmem.dhash").hex()

    def __repr__(self) -> str:
        mode = "independent" if self.independent else "derived"
        return f"<NamespaceKeys namespace={self.namespace!r} {mode} fingerprint={self.fingerprint}>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NamespaceKeys):
            return NotImplemented
        return self.namespace == other.namespace and hmac.compare_digest(
            self.verify_key + self.sealing_key, other.verify_key + other.sealing_key
        )

    def __hash__(self) -> int:
        return hash((self.namespace, self.verify_key))


def generate_master_seed() -> MasterSeed:
    return MasterSeed(nacl.utils.random(SEED_SIZE))


def parse_ed25519_key(text: str) -> bytes:
    """Parse an independent agent key: 32-byte seed or 64-byte secret key, hex or base64.

    A 64-byte libsodium secret key is ``seed || public``; the public half must
    match the seed, otherwise the key is malformed.
    """
    raw: bytes | None = None
    s = text.strip()
    if s.startswith("0x"):
        s = s[2:]
    if re.fullmatch(r"[0-9a-fA-F]+", s) and len(s) in (64, 128):
        raw = bytes.fromhex(s)
    else:
        try:
            padded = s + "=" * (-len(s) % 4)
            raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) not in (32, 64):
        raise MalformedKey(
            "agent key must be an Ed25519 private key: 32-byte seed or 64-byte secret key, "
            "as hex or base64"
        )
    seed = raw[:32]
    if len(raw) == 64 and bytes(nacl.signing.SigningKey(seed).verify_key) != raw[32:]:
        raise MalformedKey("agent key: the public half does not match the private seed")
    return seed


# -- key files ---------------------------------------------------------------


def write_key_file(path: Path, seed: MasterSeed, *, force: bool = False) -> Path:
    """Write ``seed`` as hex to ``path`` with mode 0600 inside a 0700 directory."""
    path = Path(path)
    if path.exists() and not force:
        raise KeyExists(f"key file {path} already exists; pass force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, (seed.to_hex() + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    log.info("wrote master key file %s (fingerprint %s)", path, seed.fingerprint)
    return path


def load_key_file(path: Path) -> MasterSeed:
    """Read a master seed key file, refusing files that group or others can read."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError as exc:
        raise KeyNotFound(f"key file {path} does not exist") from exc
    if os.name == "posix" and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InsecureKeyFile(
            f"key file {path} is accessible by group or others "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); run: chmod 600 {path}"
        )
    try:
        return MasterSeed.from_hex(path.read_text(encoding="ascii"))
    except (UnicodeDecodeError, MalformedKey) as exc:
        raise MalformedKey(f"key file {path} does not hold a 64-hex-character master key") from exc


# -- keyring -----------------------------------------------------------------


def _usable_keyring() -> Any:
    """Return the active keyring backend, or raise if it is missing / fail / null."""
    try:
        import keyring
        from keyring.backends import fail, null

        backend = keyring.get_keyring()
    except Exception as exc:  # noqa: BLE001 - any import/backend failure means "no keyring"
        raise KeyringUnavailable(_NO_KEYRING) from exc
    if isinstance(backend, fail.Keyring | null.Keyring):
        raise KeyringUnavailable(_NO_KEYRING + f" (active backend: {type(backend).__name__})")
    # A chainer with no usable members behaves like fail.
    if getattr(backend, "backends", None) == []:
        raise KeyringUnavailable(_NO_KEYRING + " (no backends)")
    return backend


_NO_KEYRING = (
    "no usable OS keyring backend; set WALRUS_MEM_MASTER_KEY or use a key file "
    "(walrus-mem init writes one with mode 0600)"
)


def keyring_load(service: str = KEYRING_SERVICE, username: str = KEYRING_USERNAME) -> MasterSeed | None:
    """Return the seed stored in the keyring, ``None`` if absent; raise if no keyring."""
    backend = _usable_keyring()
    try:
        value = backend.get_password(service, username)
    except Exception as exc:  # noqa: BLE001 - backends raise their own types
        raise KeyringUnavailable(_NO_KEYRING + f" ({type(exc).__name__})") from None
    if value is None:
        return None
    return MasterSeed.from_hex(value)


def keyring_store(
    seed: MasterSeed,
    *,
    force: bool = False,
    service: str = KEYRING_SERVICE,
    username: str = KEYRING_USERNAME,
) -> None:
    backend = _usable_keyring()
    try:
        existing = backend.get_password(service, username)
        if existing is not None and not force:
            raise KeyExists("a master key is already stored in the keyring; pass force to replace it")
        backend.set_password(service, username, seed.to_hex())
        # The null backend and some broken ones drop secrets silently: read back.
        if backend.get_password(service, username) != seed.to_hex():
            raise KeyringUnavailable(_NO_KEYRING + " (the backend did not keep the secret)")
    except (KeyExists, KeyringUnavailable):
        raise
    except Exception as exc:  # noqa: BLE001
        raise KeyringUnavailable(_NO_KEYRING + f" ({type(exc).__name__})") from None


# -- resolution --------------------------------------------------------------


def resolve_master_seed(
    explicit: str | bytes | MasterSeed | None = None,
    *,
    config_value: str | None = None,
    key_file: Path | None = None,
    use_keyring: bool = True,
    environ: dict[str, str] | None = None,
) -> tuple[MasterSeed, str]:
    """Find the master seed. Returns ``(seed, source)`` where source names where it came from.

    Precedence (first hit wins):
      1. ``explicit`` argument
      2. ``config_value`` (``${VAR}`` already resolved by the config loader)
      3. environment variable ``WALRUS_MEM_MASTER_KEY``
      4. OS keyring, service ``walrus-mem`` (skipped quietly when no backend works)
      5. ``key_file``
    """
    env = os.environ if environ is None else environ
    if explicit is not None:
        if isinstance(explicit, MasterSeed):
            return explicit, "argument"
        if isinstance(explicit, bytes):
            return MasterSeed(explicit), "argument"
        return MasterSeed.from_hex(explicit), "argument"
    if config_value:
        return MasterSeed.from_hex(config_value), "config"
    if env.get(MASTER_KEY_ENV):
        try:
            return MasterSeed.from_hex(env[MASTER_KEY_ENV]), "env"
        except MalformedKey as exc:
            raise MalformedKey(f"{MASTER_KEY_ENV} must be 64 hexadecimal characters") from exc
    keyring_reason = "disabled"
    if use_keyring:
        try:
            found = keyring_load()
        except KeyringUnavailable as exc:
            keyring_reason = str(exc)
            log.debug("keyring skipped: %s", exc)
        else:
            if found is not None:
                return found, "keyring"
            keyring_reason = "no entry"
    if key_file is not None and Path(key_file).exists():
        return load_key_file(Path(key_file)), "key_file"
    raise KeyNotFound(
        "no master key found: pass one explicitly, set master_key in the config, set "
        f"{MASTER_KEY_ENV} (64 hex chars), store one in the OS keyring, or create a key file"
        f"{f' at {key_file}' if key_file else ''} (run `walrus-mem init`). "
        f"Keyring: {keyring_reason}"
    )
