"""Key material: the master seed, per-namespace keys, and where keys come from.

Derivation (exact, reproducible; byte by byte in docs/keys.md). ``BLAKE2b-n``
is keyed BLAKE2b (RFC 7693) with an ``n``-byte digest, no salt, and the
personalisation string zero-padded to 16 bytes (what libsodium and
``hashlib.blake2b`` do):

* master seed ``M``: 32 random bytes per installation.
* namespace ``ns`` (validated, UTF-8 bytes ``N``):

  - signing seed  = BLAKE2b-32(data=N, key=M, person=b"walrusmem.sign")
  - sealing key   = BLAKE2b-32(data=N, key=M, person=b"walrusmem.seal")
  - dedupe key    = BLAKE2b-32(data=N, key=M, person=b"walrusmem.dedup")

* independent agent key (an Ed25519 seed ``S`` supplied by the user):

  - signing seed  = S
  - sealing key   = BLAKE2b-32(data=N, key=S, person=b"walrusmem.iseal")
  - dedupe key    = BLAKE2b-32(data=N, key=S, person=b"walrusmem.idedup")

* key generation ``g >= 1`` of a namespace (after ``rotate_key``): the same
  formulas with ``N`` replaced by ``N || b"#" || ASCII(g)`` (``#`` cannot occur
  in a namespace name), and for an independent key the signing seed also
  derived: BLAKE2b-32(data=N#g, key=S, person=b"walrusmem.isign"). Generation
  0 is exactly the derivation above, so existing namespaces are unchanged.

* fingerprint = BLAKE2b-16(data=verify_key, no key, person=b"walrusmem.fpr");
  shown as the first 8 and last 4 hex characters of its hex form.

Every purpose has its own personalisation, so no derived bytes are reused for
both signing and encryption.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
import re
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import nacl.hash
import nacl.signing
import nacl.utils

from ._keys.hardening import disable_core_dumps
from ._local.private_dirs import make_private_dirs
from .errors import (
    InsecureKeyFile,
    InvalidNamespace,
    KeyExists,
    KeyMaterialError,
    KeyNotFound,
    KeyringUnavailable,
    MalformedKey,
)

__all__ = [
    "FINGERPRINT_SIZE",
    "KEYRING_SERVICE",
    "KEYRING_USERNAME",
    "MASTER_KEY_ENV",
    "NAMESPACE_RULE",
    "SEED_SIZE",
    "MasterSeed",
    "NamespaceKeys",
    "disable_core_dumps",
    "fingerprint_of",
    "generate_master_seed",
    "keyring_load",
    "keyring_store",
    "load_key_file",
    "parse_ed25519_key",
    "resolve_master_seed",
    "short_fingerprint",
    "validate_namespace",
    "write_key_file",
]

log = logging.getLogger(__name__)

SEED_SIZE: Final = 32
FINGERPRINT_SIZE: Final = 16
MASTER_KEY_ENV: Final = "WALRUS_MEM_MASTER_KEY"
KEYRING_SERVICE: Final = "walrus-mem"
KEYRING_USERNAME: Final = "master-seed"

PERSON_SIGN: Final = b"walrusmem.sign"
PERSON_SEAL: Final = b"walrusmem.seal"
PERSON_DEDUP: Final = b"walrusmem.dedup"
PERSON_ISEAL: Final = b"walrusmem.iseal"
PERSON_IDEDUP: Final = b"walrusmem.idedup"
PERSON_ISIGN: Final = b"walrusmem.isign"
PERSON_FPR: Final = b"walrusmem.fpr"
PERSON_DHASH: Final = b"walrusmem.dhash"
PERSON_QIDENT: Final = b"walrusmem.qident"

NAMESPACE_RULE: Final = "1-64 characters of [a-z0-9_-], starting with a letter or digit"
_NAMESPACE_RE: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_HEX64_RE: Final = re.compile(r"[0-9a-fA-F]{64}")
_HEX_RE: Final = re.compile(r"[0-9a-fA-F]+")
_MAX_KEY_FILE: Final = 4096  # a key file is one line; refuse to slurp anything big


def validate_namespace(name: object) -> str:
    """Return ``name`` if it is a valid namespace, else raise :class:`InvalidNamespace`.

    The rule: 1-64 characters of ``[a-z0-9_-]``, the first a letter or digit.
    """
    if not isinstance(name, str) or not _NAMESPACE_RE.fullmatch(name):
        shown = repr(name)[:80] if isinstance(name, str) else type(name).__name__
        raise InvalidNamespace(f"invalid namespace {shown}: must be {NAMESPACE_RULE}")
    return name


def _blake2b(data: bytes, *, key: bytes, person: bytes, size: int = 32) -> bytes:
    # libsodium's keyed BLAKE2b with a personalisation (zero-padded to 16 bytes), as
    # hashlib computes it: the same bytes (keys/vectors.json), about 8x less overhead
    # per call (every write and every restored memory hashes its text).
    return hashlib.blake2b(data, digest_size=size, key=key, person=person).digest()


MAX_GENERATION: Final = 10_000


def _kdf_input(namespace: str, generation: int) -> bytes:
    ns = validate_namespace(namespace).encode()
    if isinstance(generation, bool) or not isinstance(generation, int) \
            or not 0 <= generation <= MAX_GENERATION:
        raise MalformedKey(f"key generation must be an integer from 0 to {MAX_GENERATION}")
    return ns if generation == 0 else ns + b"#" + str(generation).encode()


def fingerprint_of(verify_key: bytes) -> bytes:
    """16-byte fingerprint of an Ed25519 public key (what blobs carry)."""
    return _blake2b(verify_key, key=b"", person=PERSON_FPR, size=FINGERPRINT_SIZE)


def short_fingerprint(fpr: bytes) -> str:
    """Display form of a fingerprint: first 8 and last 4 hex characters."""
    h = fpr.hex()
    return f"{h[:8]}…{h[-4:]}"


class _SecretLike(Protocol):
    def get_secret_value(self) -> str: ...


class MasterSeed:
    """The 32-byte installation secret. ``repr``/``str`` show only a fingerprint.

    The fingerprint is that of the key derived for namespace ``default``: a
    public value that identifies the seed without revealing it.
    """

    __slots__ = ("_fpr", "_seed")

    def __init__(self, seed: bytes | bytearray) -> None:
        if not isinstance(seed, bytes | bytearray) or len(seed) != SEED_SIZE:
            raise MalformedKey(f"master seed must be exactly {SEED_SIZE} bytes")
        self._seed = bytes(seed)
        self._fpr: str | None = None

    @classmethod
    def from_hex(cls, text: str) -> MasterSeed:
        """Parse 64 hex characters (surrounding whitespace allowed)."""
        if not isinstance(text, str):
            raise MalformedKey("master key must be a string of 64 hexadecimal characters")
        text = text.strip()
        if not _HEX64_RE.fullmatch(text):
            raise MalformedKey("master key must be 64 hexadecimal characters (32 bytes)")
        return cls(bytes.fromhex(text))

    @property
    def fingerprint(self) -> str:
        """Public identifier: short fingerprint of the ``default`` namespace key."""
        if self._fpr is None:
            self._fpr = NamespaceKeys.derive(self, "default").fingerprint
        return self._fpr

    def to_hex(self) -> str:
        """The secret itself, hex encoded. Only for writing to a key store."""
        return self._seed.hex()

    def secret_bytes(self) -> bytes:
        """The raw 32 secret bytes. Only for key derivation."""
        return self._seed

    def __repr__(self) -> str:
        return f"<MasterSeed fingerprint={self.fingerprint}>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MasterSeed):
            return NotImplemented
        return hmac.compare_digest(self._seed, other._seed)

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __reduce__(self) -> Any:
        raise TypeError("MasterSeed cannot be pickled or copied")


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
    generation: int = 0

    @classmethod
    def derive(cls, master: MasterSeed, namespace: str, generation: int = 0) -> NamespaceKeys:
        """Derive the namespace's signing, sealing and dedupe keys from the master seed
        (``generation`` > 0: the keys after that many rotations)."""
        if not isinstance(master, MasterSeed):
            raise MalformedKey("derive() needs a MasterSeed (use MasterSeed.from_hex)")
        ns = _kdf_input(namespace, generation)
        seed = master.secret_bytes()
        return cls(
            namespace=namespace,
            signing_key=nacl.signing.SigningKey(_blake2b(ns, key=seed, person=PERSON_SIGN)),
            sealing_key=_blake2b(ns, key=seed, person=PERSON_SEAL),
            dedupe_key=_blake2b(ns, key=seed, person=PERSON_DEDUP),
            generation=generation,
        )

    @classmethod
    def from_agent_key(
        cls, agent_seed: bytes, namespace: str, generation: int = 0
    ) -> NamespaceKeys:
        """Keys for an agent with its own Ed25519 seed (see :func:`parse_ed25519_key`)."""
        if not isinstance(agent_seed, bytes | bytearray) or len(agent_seed) != SEED_SIZE:
            raise MalformedKey(f"Ed25519 private key seed must be {SEED_SIZE} bytes")
        seed = bytes(agent_seed)
        ns = _kdf_input(namespace, generation)
        signing = seed if generation == 0 else _blake2b(ns, key=seed, person=PERSON_ISIGN)
        return cls(
            namespace=namespace,
            signing_key=nacl.signing.SigningKey(signing),
            sealing_key=_blake2b(ns, key=seed, person=PERSON_ISEAL),
            dedupe_key=_blake2b(ns, key=seed, person=PERSON_IDEDUP),
            independent=True,
            generation=generation,
        )

    @property
    def verify_key(self) -> bytes:
        """The 32-byte Ed25519 public key."""
        return bytes(self.signing_key.verify_key)

    @property
    def fingerprint_bytes(self) -> bytes:
        """The 16-byte fingerprint every envelope of this namespace carries."""
        return fingerprint_of(self.verify_key)

    @property
    def fingerprint(self) -> str:
        """Short display form of :attr:`fingerprint_bytes`."""
        return short_fingerprint(self.fingerprint_bytes)

    def dedupe_hash(self, normalised_text: str) -> str:
        """Keyed hash of normalised text: equal texts collide only within this namespace.

        BLAKE2b-32(data=UTF-8 text, key=dedupe key, person=b"walrusmem.dhash"), hex.
        """
        return _blake2b(
            normalised_text.encode("utf-8"), key=self.dedupe_key, person=PERSON_DHASH
        ).hex()

    def quilt_identifier(self, memory_id: str, version: int) -> str:
        """The public name of a memory version's patch in a quilt (quilt indexes are
        readable by anyone): a keyed hash, so it names no memory id and ties neither
        two versions nor two key generations of one memory together.

        BLAKE2b-16(data=UTF-8 ``memory_id:version``, key=dedupe key,
        person=b"walrusmem.qident"), hex.
        """
        return _blake2b(f"{memory_id}:{version}".encode(), key=self.dedupe_key,
                        person=PERSON_QIDENT, size=16).hex()

    def __repr__(self) -> str:
        mode = "independent" if self.independent else "derived"
        gen = f" generation={self.generation}" if self.generation else ""
        return (f"<NamespaceKeys namespace={self.namespace!r} {mode}{gen} "
                f"fingerprint={self.fingerprint}>")

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NamespaceKeys):
            return NotImplemented
        return self.namespace == other.namespace and hmac.compare_digest(
            self.verify_key + self.sealing_key + self.dedupe_key,
            other.verify_key + other.sealing_key + other.dedupe_key,
        )

    def __hash__(self) -> int:
        return hash((self.namespace, self.verify_key))

    def __reduce__(self) -> Any:
        raise TypeError("NamespaceKeys cannot be pickled or copied")


def generate_master_seed() -> MasterSeed:
    """A fresh random master seed from the OS CSPRNG (via libsodium)."""
    return MasterSeed(nacl.utils.random(SEED_SIZE))


_AGENT_KEY_FORMAT: Final = (
    "agent key must be an Ed25519 private key: a 32-byte seed or a 64-byte secret key "
    "(seed followed by public key), as hex or base64"
)


def parse_ed25519_key(text: str) -> bytes:
    """Parse an independent agent key; return its 32-byte Ed25519 seed.

    Accepts a 32-byte seed or a 64-byte libsodium secret key (``seed || public``),
    as hex (optionally ``0x``-prefixed) or base64 (standard or URL-safe, padding
    optional). In a 64-byte key the public half must match the seed.
    """
    if not isinstance(text, str):
        raise MalformedKey(_AGENT_KEY_FORMAT)
    s = text.strip()
    if s[:2] in ("0x", "0X"):
        s = s[2:]
    raw: bytes | None = None
    if _HEX_RE.fullmatch(s) and len(s) in (64, 128):
        raw = bytes.fromhex(s)
    else:
        try:
            padded = s + "=" * (-len(s) % 4)
            raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            raw = None  # binascii messages carry no key bytes, but do not chain them anyway
    if raw is None or len(raw) not in (SEED_SIZE, 2 * SEED_SIZE):
        raise MalformedKey(_AGENT_KEY_FORMAT)
    seed = raw[:SEED_SIZE]
    if len(raw) == 2 * SEED_SIZE and not hmac.compare_digest(
        bytes(nacl.signing.SigningKey(seed).verify_key), raw[SEED_SIZE:]
    ):
        raise MalformedKey("agent key: the public half does not match the private seed")
    return seed


# -- key files ---------------------------------------------------------------


def _make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and any missing parents with mode 0700.

    An existing directory keeps its mode (we never chmod a directory we did not
    create, e.g. a home directory); a warning is logged if others can write it.
    """
    existed = directory.exists()
    make_private_dirs(directory)
    if existed and os.name == "posix":
        mode = stat.S_IMODE(directory.stat().st_mode)
        if mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX:
            log.warning(
                "key directory %s is writable by group or others (mode %04o)", directory, mode
            )


def _fsync_dir(directory: Path) -> None:
    if os.name != "posix":  # pragma: no cover - directories cannot be opened on Windows
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_key_file(path: Path, seed: MasterSeed, *, force: bool = False) -> Path:
    """Write ``seed`` as one line of hex to ``path``, mode 0600.

    Missing directories are created with mode 0700. The file appears atomically
    (written to a private temp file, then linked/renamed into place). Without
    ``force`` an existing file is never replaced: :class:`KeyExists`.
    """
    path = Path(path)
    if path.exists() and not force:
        raise KeyExists(f"key file {path} already exists; pass force to overwrite it")
    try:
        _make_private_dirs(path.parent)
        # mkstemp: O_EXCL, mode 0600, unpredictable name: no symlink or umask games.
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise KeyMaterialError(f"cannot create key file {path}: {exc.strerror}") from exc
    tmp = Path(tmp_name)
    try:
        try:
            os.write(fd, (seed.to_hex() + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        if force:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # fails if path appeared meanwhile: never overwrite
            except FileExistsError:
                raise KeyExists(
                    f"key file {path} already exists; pass force to overwrite it"
                ) from None
            except OSError:  # no hard links on this filesystem: check, then rename
                if path.exists():
                    raise KeyExists(
                        f"key file {path} already exists; pass force to overwrite it"
                    ) from None
                os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        raise KeyMaterialError(f"cannot write key file {path}: {exc.strerror}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    log.info("wrote master key file %s (fingerprint %s)", path, seed.fingerprint)
    return path


def load_key_file(path: Path) -> MasterSeed:
    """Read a master seed key file, refusing (like ssh) files that group or others
    can access and files another user owns.

    The file holds 64 hex characters (surrounding whitespace allowed).
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError as exc:
        raise KeyNotFound(f"key file {path} does not exist") from exc
    except OSError as exc:
        raise KeyNotFound(f"key file {path} cannot be opened: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)  # check the file we opened, not whatever the path names now
        if not stat.S_ISREG(st.st_mode):
            raise KeyNotFound(f"key file {path} is not a regular file")
        if os.name == "posix" and st.st_uid != os.geteuid():
            raise InsecureKeyFile(
                f"key file {path} is owned by uid {st.st_uid}, not by the current user "
                f"(uid {os.geteuid()}); refusing to use it (as ssh does)"
            )
        if os.name == "posix" and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise InsecureKeyFile(
                f"key file {path} is accessible by group or others "
                f"(mode {stat.S_IMODE(st.st_mode):04o}); refusing to use it. "
                f"Run: chmod 600 {path}"
            )
        raw = os.read(fd, _MAX_KEY_FILE + 1)
    except OSError as exc:
        raise KeyNotFound(f"key file {path} cannot be read: {exc.strerror}") from exc
    finally:
        os.close(fd)
    # No chaining below: a UnicodeDecodeError would carry the raw file bytes.
    if len(raw) > _MAX_KEY_FILE or not raw.isascii():
        raise MalformedKey(f"key file {path} does not hold a 64-hex-character master key")
    try:
        return MasterSeed.from_hex(raw.decode("ascii"))
    except MalformedKey:
        raise MalformedKey(f"key file {path} does not hold a 64-hex-character master key") from None


# -- keyring -----------------------------------------------------------------

_NO_KEYRING: Final = (
    f"no usable OS keyring backend; set {MASTER_KEY_ENV} (64 hex characters) or use a "
    "key file (walrus-mem init writes one with mode 0600)"
)


def _usable_keyring() -> Any:
    """Return the active keyring backend, or raise if it is missing / fail / null."""
    try:
        import keyring
        from keyring.backends import fail, null

        backend = keyring.get_keyring()
    except Exception as exc:  # any import/backend failure means "no keyring"
        raise KeyringUnavailable(_NO_KEYRING) from exc
    if isinstance(backend, fail.Keyring | null.Keyring):
        raise KeyringUnavailable(_NO_KEYRING + f" (active backend: {type(backend).__name__})")
    # A chainer with no members behaves like the null backend.
    if getattr(backend, "backends", None) == []:
        raise KeyringUnavailable(_NO_KEYRING + " (no backends)")
    return backend


def _call_backend(call: Callable[[], Any]) -> Any:
    """Run one keyring backend call, turning any failure into :class:`KeyringUnavailable`.

    The backend's exception is neither chained nor left as ``__context__``: its
    message could quote the secret it was handling. Only its type is kept.
    """
    try:
        return call()
    except Exception as exc:
        failure = type(exc).__name__
    raise KeyringUnavailable(_NO_KEYRING + f" ({failure})")


def keyring_load(
    service: str = KEYRING_SERVICE, username: str = KEYRING_USERNAME
) -> MasterSeed | None:
    """Return the seed stored in the keyring, ``None`` if absent; raise if no keyring."""
    backend = _usable_keyring()
    value = _call_backend(lambda: backend.get_password(service, username))
    if value is None:
        return None
    try:
        return MasterSeed.from_hex(value)
    except MalformedKey:
        raise MalformedKey(
            f"the keyring entry {service}/{username} is not a 64-hex-character master key"
        ) from None


def keyring_store(
    seed: MasterSeed,
    *,
    force: bool = False,
    service: str = KEYRING_SERVICE,
    username: str = KEYRING_USERNAME,
) -> None:
    """Store ``seed`` in the OS keyring; :class:`KeyExists` if one is there and not ``force``.

    The value is read back: a backend that drops secrets silently is an error.
    """
    backend = _usable_keyring()
    secret = seed.to_hex()
    if _call_backend(lambda: backend.get_password(service, username)) is not None and not force:
        raise KeyExists(
            f"a master key is already stored in the keyring ({service}/{username}); "
            "pass force to replace it"
        )
    _call_backend(lambda: backend.set_password(service, username, secret))
    kept = _call_backend(lambda: backend.get_password(service, username))
    if kept is None or not hmac.compare_digest(kept, secret):
        raise KeyringUnavailable(_NO_KEYRING + " (the backend did not keep the secret)")
    log.info(
        "stored master key in keyring %s/%s (fingerprint %s)", service, username, seed.fingerprint
    )


# -- resolution --------------------------------------------------------------


def _seed_from(value: str | bytes | bytearray, source: str) -> MasterSeed:
    try:
        if isinstance(value, bytes | bytearray):
            return MasterSeed(value)
        return MasterSeed.from_hex(value)
    except MalformedKey:
        raise MalformedKey(
            f"master key from {source} must be 64 hexadecimal characters (32 bytes)"
        ) from None


def resolve_master_seed(
    explicit: str | bytes | MasterSeed | None = None,
    *,
    config_value: str | _SecretLike | None = None,
    key_file: Path | None = None,
    use_keyring: bool = True,
    environ: Mapping[str, str] | None = None,
) -> tuple[MasterSeed, str]:
    """Find the master seed. Returns ``(seed, source)``; source is one of
    ``"argument"``, ``"config"``, ``"env"``, ``"keyring"``, ``"key_file"``.

    Precedence (first hit wins):
      1. ``explicit`` argument (hex string, 32 bytes, or a MasterSeed)
      2. ``config_value`` (``${VAR}`` already resolved by the config loader;
         a plain string or a pydantic ``SecretStr``)
      3. environment variable ``WALRUS_MEM_MASTER_KEY``
      4. OS keyring, service ``walrus-mem`` (skipped quietly when no backend works)
      5. ``key_file``

    An empty config value or empty environment variable counts as unset. A
    present but malformed value is an error (no fall-through to a lower rank).
    """
    env = os.environ if environ is None else environ
    if explicit is not None:
        if isinstance(explicit, MasterSeed):
            return explicit, "argument"
        return _seed_from(explicit, "the argument"), "argument"
    if config_value is not None and not isinstance(config_value, str):
        config_value = config_value.get_secret_value()
    if config_value:
        return _seed_from(config_value, "the config (master_key)"), "config"
    if env.get(MASTER_KEY_ENV):
        return _seed_from(env[MASTER_KEY_ENV], MASTER_KEY_ENV), "env"
    keyring_reason = "disabled"
    if use_keyring:
        try:
            found = keyring_load()
        except KeyringUnavailable as exc:
            keyring_reason = "unavailable"
            log.debug("keyring skipped: %s", exc)
        else:
            if found is not None:
                return found, "keyring"
            keyring_reason = "no entry"
    if key_file is not None and Path(key_file).exists():
        return load_key_file(Path(key_file)), "key_file"
    raise KeyNotFound(
        "no master key found: pass one explicitly, set master_key in the config, set "
        f"{MASTER_KEY_ENV} (64 hex chars), store one in the OS keyring (service "
        f"{KEYRING_SERVICE}; keyring: {keyring_reason}), or create a key file"
        f"{f' at {key_file}' if key_file else ''} (walrus-mem init)"
    )
