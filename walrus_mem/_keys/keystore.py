"""Where the master key file lives, and keys in and out: backup and import.

* :func:`key_file_in_use`: the configured ``key_file``, else the user's config
  dir (:func:`walrus_mem.config.default_key_file`). A master key left in a data
  dir by an older version (``<data_dir>/keys/master.key``) is moved there once.
* :func:`to_mnemonic` / :func:`parse_backup`: a 32-byte secret as a 24-word
  BIP39 mnemonic (English word list, checksum included; the reference
  implementation, PyPI ``mnemonic``) or as 64 hex characters, and back.
* :func:`new_agent_key`: a fresh independent Ed25519 seed.

No function here logs, returns in an error, or chains an exception holding
secret material: the BIP39 library's errors may quote the words they rejected.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Final

import nacl.utils

from ..config import Settings, default_key_file
from ..errors import InsecureKeyFile, KeyMaterialError, MalformedKey
from ..keys import SEED_SIZE, load_key_file, write_key_file

__all__ = [
    "BACKUP_FORMATS",
    "agent_env_var",
    "key_file_in_use",
    "new_agent_key",
    "parse_backup",
    "to_mnemonic",
]

log = logging.getLogger(__name__)

BACKUP_FORMATS: Final = "a 24-word BIP39 mnemonic (English) or 64 hexadecimal characters"
_HEX64: Final = re.compile(r"(?:0[xX])?[0-9a-fA-F]{64}")


def _bip39() -> object:
    from mnemonic import Mnemonic  # lazy: only key backup and import need it

    return Mnemonic("english")


def to_mnemonic(secret: bytes) -> str:
    """The 24-word BIP39 mnemonic of a 32-byte secret (256 bits + 8 checksum bits)."""
    if not isinstance(secret, bytes | bytearray) or len(secret) != SEED_SIZE:
        raise MalformedKey(f"a backup holds exactly {SEED_SIZE} bytes")
    words: str = _bip39().to_mnemonic(bytes(secret))  # type: ignore[attr-defined]
    return words


def parse_backup(text: str) -> bytes:
    """The 32 bytes of a backup: a 24-word BIP39 mnemonic or 64 hex characters,
    or what ``keys export`` prints (both, one line each, or its ``--json`` object).

    Words are matched case-insensitively and any whitespace separates them. A
    wrong word, a wrong count or a failed BIP39 checksum is :class:`MalformedKey`
    (which never quotes the input); so are words and hex that name different keys.
    """
    if not isinstance(text, str):
        raise MalformedKey(f"a key backup is {BACKUP_FORMATS}")
    stripped = text.strip()
    if stripped.startswith("{"):
        return _parse_export_json(stripped)
    if _HEX64.fullmatch(stripped):
        return bytes.fromhex(stripped[-64:])
    tokens = stripped.split()
    hexes = [t for t in tokens if _HEX64.fullmatch(t)]
    if len(hexes) == 1 and len(tokens) == 25:  # export's two lines: words, then hex
        return _agreeing(_parse_words([t for t in tokens if t not in hexes]),
                         bytes.fromhex(hexes[0][-64:]))
    return _parse_words(tokens)


def _agreeing(first: bytes, second: bytes) -> bytes:
    if first != second:
        raise MalformedKey("the backup's words and hex do not match: they are two different "
                           "keys (import one of them alone)")
    return first


def _parse_export_json(text: str) -> bytes:
    """The key of ``walrus-mem --json keys export``'s object (mnemonic and/or hex), bare
    or in the envelope's ``data``."""
    import json

    try:
        doc = json.loads(text)
    except ValueError:
        doc = None  # the parser's message may quote the input: never chain it
    if isinstance(doc, dict) and isinstance(doc.get("data"), dict) and "command" in doc:
        doc = doc["data"]  # the CLI's --json envelope (docs/cli.md) around the object
    if not isinstance(doc, dict) or not (doc.get("mnemonic") or doc.get("hex")):
        raise MalformedKey(f"a key backup is {BACKUP_FORMATS}, or the JSON keys export prints")
    parts = [parse_backup(str(doc[k])) for k in ("mnemonic", "hex") if doc.get(k)]
    return _agreeing(parts[0], parts[-1])


def _parse_words(tokens: list[str]) -> bytes:
    words = [t.lower() for t in tokens]
    if len(words) != 24:
        raise MalformedKey(
            f"a key backup is {BACKUP_FORMATS}; got {len(words)} word(s)"
            if words and all(w.isalpha() for w in words) else
            f"a key backup is {BACKUP_FORMATS}"
        )
    phrase = " ".join(words)
    m = _bip39()
    ok = False
    try:
        ok = bool(m.check(phrase))  # type: ignore[attr-defined]
    except Exception:  # the library's message may quote a word: never chain it
        ok = False
    if not ok:
        raise MalformedKey(
            "the mnemonic is not a valid 24-word BIP39 phrase (a word is not in the English "
            "list, or the checksum does not match: check for a mistyped or swapped word)"
        )
    entropy = bytes(m.to_entropy(phrase))  # type: ignore[attr-defined]
    if len(entropy) != SEED_SIZE:  # pragma: no cover - 24 checked words are 32 bytes
        raise MalformedKey(f"a key backup is {BACKUP_FORMATS}")
    return entropy


def new_agent_key() -> bytes:
    """A fresh independent Ed25519 seed (32 bytes from the OS CSPRNG, via libsodium)."""
    return nacl.utils.random(SEED_SIZE)


def agent_env_var(agent: str) -> str:
    """The environment variable suggested for an agent's key: ``RESEARCHER_KEY``."""
    stem = re.sub(r"[^A-Za-z0-9]+", "_", agent).strip("_").upper() or "AGENT"
    if stem[0].isdigit():
        stem = f"AGENT_{stem}"
    return f"{stem}_KEY"


def key_file_in_use(settings: Settings) -> Path:
    """The master key file for ``settings``, moving an older data-dir key file once.

    ``key_file`` (or ``WALRUS_MEM_KEY_FILE``) wins. Otherwise the key lives in
    :func:`~walrus_mem.config.default_key_file`. If the data dir still holds
    ``keys/master.key`` from an older version:

    * no key at the new place: the key is written there (0600 in 0700 dirs,
      atomically) and the old file removed;
    * the same key already there: the old copy is removed;
    * a *different* key there (e.g. two data dirs, each with its own key): the
      data dir keeps using its own file, with a warning to set ``key_file``.
    """
    if settings.key_file is not None:
        return settings.key_file
    target = default_key_file()
    legacy = settings.legacy_key_file
    if not legacy.is_file():
        return target
    seed = load_key_file(legacy)  # refuses insecure or foreign files, like any key file
    if not target.exists():
        write_key_file(target, seed)
        _remove(legacy)
        log.warning("moved the master key file from %s to %s (fingerprint %s)",
                    legacy, target, seed.fingerprint)
        return target
    try:
        current = load_key_file(target)
    except (InsecureKeyFile, KeyMaterialError):
        return legacy  # the new file is unusable: do not lose the working one
    if current == seed:
        _remove(legacy)
        log.warning("removed %s: the same master key is in %s", legacy, target)
        return target
    log.warning(
        "the data dir %s has its own master key (fingerprint %s), different from %s "
        "(fingerprint %s); still using the data dir's. Set key_file to say which to use.",
        settings.data_dir, seed.fingerprint, target, current.fingerprint,
    )
    return legacy


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError as exc:
        log.warning("could not remove the old key file %s: %s", path, exc.strerror)
