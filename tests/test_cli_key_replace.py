"""No destructive defaults (issue 27 item 3): `init` and `keys import` never replace a
different master key unless the user names the old key's fingerprint, and the old key
is always kept next to the key file (0600)."""

from __future__ import annotations

import stat
from pathlib import Path

import keyring
import pytest
from keyring.backends import fail

from walrus_mem.config import default_key_file
from walrus_mem.keys import MasterSeed

from .helpers_cli import TEST_MASTER_HEX, assert_no_secret, invoke

OTHER_HEX = "ff" * 32


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    return tmp_path / "xdg-config"


def _backup_of(seed: MasterSeed) -> Path:
    plain = seed.fingerprint.replace("…", "")
    return default_key_file().parent / f"master.key.{plain}.bak"


def _assert_kept(seed: MasterSeed) -> None:
    backup = _backup_of(seed)
    assert backup.is_file(), f"the old key was not kept at {backup}"
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert backup.read_text().strip() == seed.to_hex()


def _keyring_seed(memory_keyring) -> MasterSeed:
    return MasterSeed.from_hex(memory_keyring.store[("walrus-mem", "master-seed")])


def test_second_init_points_to_keys_export_not_force(memory_keyring):
    invoke(["init"])
    old = _keyring_seed(memory_keyring)
    res = invoke(["init"], expect=1)
    assert "KeyExists" in res.stderr and "keys export" in res.stderr
    assert "--force" not in res.stderr
    assert f"--replace-key {old.fingerprint}" in res.stderr
    assert _keyring_seed(memory_keyring) == old
    assert_no_secret(res, old.to_hex())


def test_init_force_alone_no_longer_replaces(memory_keyring):
    invoke(["init"])
    old = _keyring_seed(memory_keyring)
    res = invoke(["init", "--force"], expect=1)
    assert "--replace-key" in res.stderr
    assert _keyring_seed(memory_keyring) == old


def test_init_replace_key_needs_the_old_fingerprint(memory_keyring):
    invoke(["init"])
    old = _keyring_seed(memory_keyring)
    res = invoke(["init", "--replace-key", "00000000…0000"], expect=1)
    assert old.fingerprint in res.stderr and "does not match" in res.stderr
    assert _keyring_seed(memory_keyring) == old
    assert not _backup_of(old).exists()


@pytest.mark.parametrize("spelling", ["as printed", "three dots", "no dots"])
def test_init_replace_key_keeps_the_old_key_in_the_keyring_case(memory_keyring, spelling):
    invoke(["init"])
    old = _keyring_seed(memory_keyring)
    given = {"as printed": old.fingerprint, "three dots": old.fingerprint.replace("…", "..."),
             "no dots": old.fingerprint.replace("…", "")}[spelling]
    res = invoke(["init", "--replace-key", given])
    new = _keyring_seed(memory_keyring)
    assert new != old
    _assert_kept(old)
    assert str(_backup_of(old)) in res.stdout + res.stderr
    assert_no_secret(res, old.to_hex(), new.to_hex())


def test_init_replace_key_keeps_the_old_key_file(clean_environ):
    keyring.set_keyring(fail.Keyring())
    invoke(["init", "--store", "file"])
    key_file = default_key_file()
    old = MasterSeed.from_hex(key_file.read_text())
    invoke(["init", "--store", "file"], expect=1)
    invoke(["init", "--store", "file", "--force"], expect=1)
    assert MasterSeed.from_hex(key_file.read_text()) == old
    invoke(["init", "--store", "file", "--replace-key", old.fingerprint])
    assert MasterSeed.from_hex(key_file.read_text()) != old
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    _assert_kept(old)


def test_init_on_a_fresh_machine_needs_no_confirmation(clean_environ):
    keyring.set_keyring(fail.Keyring())
    invoke(["init", "--replace-key", "abcd1234…ffff"])  # nothing to replace: harmless
    assert default_key_file().is_file()


def test_keys_import_over_a_different_key_refuses_then_keeps_it(clean_environ):
    keyring.set_keyring(fail.Keyring())
    invoke(["keys", "import", "--store", "file"], input=TEST_MASTER_HEX + "\n")
    old = MasterSeed.from_hex(TEST_MASTER_HEX)
    res = invoke(["keys", "import", "--store", "file"], input=OTHER_HEX + "\n", expect=1)
    assert "KeyExists" in res.stderr and "keys export" in res.stderr
    assert f"--replace-key {old.fingerprint}" in res.stderr
    assert MasterSeed.from_hex(default_key_file().read_text()) == old
    assert_no_secret(res, TEST_MASTER_HEX, OTHER_HEX)

    invoke(["keys", "import", "--store", "file", "--replace-key", "12345678…abcd"],
           input=OTHER_HEX + "\n", expect=1)
    assert MasterSeed.from_hex(default_key_file().read_text()) == old

    res = invoke(["keys", "import", "--store", "file", "--replace-key", old.fingerprint],
                 input=OTHER_HEX + "\n")
    assert MasterSeed.from_hex(default_key_file().read_text()) == MasterSeed.from_hex(OTHER_HEX)
    _assert_kept(old)
    assert_no_secret(res, TEST_MASTER_HEX, OTHER_HEX)


def test_keys_import_replaces_a_keyring_key_and_keeps_it(memory_keyring):
    invoke(["keys", "import"], input=TEST_MASTER_HEX + "\n")
    old = MasterSeed.from_hex(TEST_MASTER_HEX)
    invoke(["keys", "import"], input=OTHER_HEX + "\n", expect=1)
    assert _keyring_seed(memory_keyring) == old
    invoke(["keys", "import", "--replace-key", old.fingerprint], input=OTHER_HEX + "\n")
    assert _keyring_seed(memory_keyring) == MasterSeed.from_hex(OTHER_HEX)
    _assert_kept(old)


def test_same_key_again_is_a_no_op_without_confirmation(memory_keyring):
    invoke(["keys", "import"], input=TEST_MASTER_HEX + "\n")
    invoke(["keys", "import"], input=TEST_MASTER_HEX + "\n")
    assert _keyring_seed(memory_keyring) == MasterSeed.from_hex(TEST_MASTER_HEX)
