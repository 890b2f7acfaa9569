"""Replacing a stored master key without losing it (``init``, ``keys import``).

A different master key already stored is replaced only when the user names its
fingerprint (``--replace-key FINGERPRINT``): memories sealed with it are
unreadable without it. Before it is replaced it is always kept next to the key
file, 0600, as ``master.key.<fingerprint>.bak``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import KeyExists, KeyMaterialError, KeyringUnavailable
from ..keys import MasterSeed, keyring_load, load_key_file, write_key_file

__all__ = ["StoredKey", "backup_path", "confirm_replacement", "keep_old_keys", "stored_keys"]


@dataclass(frozen=True)
class StoredKey:
    """A master key this machine keeps: where (for messages) and the seed."""

    where: str
    seed: MasterSeed
    kind: str  # "file" or "keyring"


def stored_keys(key_file: Path, *, use_keyring: bool) -> list[StoredKey]:
    """The master keys stored in ``key_file`` and (if used) the OS keyring.

    A key file or keyring entry that cannot be read is not silently replaced:
    :class:`KeyExists` says so (its fingerprint, hence a confirmation, is unknown).
    """
    found: list[StoredKey] = []
    if key_file.exists():
        try:
            found.append(StoredKey(f"in the key file {key_file}", load_key_file(key_file),
                                   "file"))
        except KeyMaterialError as exc:
            raise KeyExists(
                f"{exc}; it is not replaced. Restore it from your backup, or move it "
                "aside yourself and run the command again"
            ) from None
    if use_keyring:
        try:
            in_keyring = keyring_load()
        except KeyringUnavailable:
            in_keyring = None
        except KeyMaterialError as exc:
            raise KeyExists(f"{exc}; it is not replaced. Remove the entry yourself "
                            "(service walrus-mem) and run the command again") from None
        if in_keyring is not None:
            found.append(StoredKey("in the OS keyring", in_keyring, "keyring"))
    return found


def _plain(fingerprint: str) -> str:
    return "".join(ch for ch in fingerprint.strip().lower() if ch in "0123456789abcdef")


def confirm_replacement(others: list[StoredKey], replace_key: str | None, *,
                        retry: str) -> None:
    """Refuse (:class:`KeyExists`) unless ``replace_key`` names every key in ``others``.

    ``retry`` is the command to repeat, e.g. ``walrus-mem init``; the message shows it
    with ``--replace-key`` and the fingerprint, after the advice to export the key.
    """
    for other in others:
        fpr = other.seed.fingerprint
        if replace_key is not None and _plain(replace_key) == _plain(fpr):
            continue
        mismatch = (f"--replace-key {replace_key} does not match it. "
                    if replace_key is not None else "")
        raise KeyExists(
            f"a master key (fingerprint {fpr}) is already stored {other.where}; memories "
            f"sealed with it are unreadable without it. {mismatch}Back it up first "
            f"(walrus-mem keys export). To replace it anyway (the old key is kept next to "
            f"the key file): {retry} --replace-key {fpr}"
        )


def backup_path(key_file: Path, seed: MasterSeed) -> Path:
    """Where the replaced key ``seed`` is kept: ``<key file>.<fingerprint>.bak``."""
    return key_file.with_name(f"{key_file.name}.{_plain(seed.fingerprint)}.bak")


def keep_old_keys(key_file: Path, old: list[StoredKey]) -> list[Path]:
    """Write each old key to its backup file (0600, atomic, never overwriting a
    different key); return the paths. Done before anything is replaced."""
    kept: list[Path] = []
    for stored in old:
        path = backup_path(key_file, stored.seed)
        if path.exists():
            if load_key_file(path) != stored.seed:  # pragma: no cover - same fingerprint
                raise KeyExists(f"{path} holds another key; move it aside and run again")
        else:
            write_key_file(path, stored.seed)
        if path not in kept:
            kept.append(path)
    return kept
