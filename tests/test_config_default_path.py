"""The library and the CLI read the same config file: argument > WALRUS_MEM_CONFIG
(> WALRUS_MEM_CONFIG_FILE) > the file ``walrus-mem init`` writes, if it is there > none."""

from __future__ import annotations

import sys
from pathlib import Path

import platformdirs
import pytest
from pydantic import ValidationError

import walrus_mem._cli.main
import walrus_mem.config
from walrus_mem import Memory
from walrus_mem._cli.doctor import check_config
from walrus_mem.config import Settings, default_config_path, resolve_config_file
from walrus_mem.errors import ConfigError, PlaceholderError

from .helpers_cli import invoke, invoke_json

SECRET = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"


@pytest.fixture
def default_file() -> Path:
    """The (test-isolated) default config path, parent created, file not yet written."""
    path = default_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- isolation -------------------------------------------------------------------


def test_default_path_is_isolated_for_library_and_cli(tmp_path):
    # conftest: no test may see the developer's real config, in-process or not.
    expected = tmp_path / "xdg-config" / "walrus-mem" / "config.toml"
    assert walrus_mem.config.default_config_path() == expected
    assert walrus_mem._cli.main.default_config_path() == expected
    assert resolve_config_file() is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG_CONFIG_HOME is Linux-only")
def test_platformdirs_location_follows_xdg_config_home(tmp_path):
    # What the unpatched function (and a subprocess) computes: also under the temp dir.
    real = Path(platformdirs.user_config_dir("walrus-mem", appauthor=False)) / "config.toml"
    assert real == tmp_path / "xdg-config" / "walrus-mem" / "config.toml"


def test_cli_uses_the_config_module_definition():
    assert "default_config_path" not in vars(walrus_mem._cli.main) or (
        walrus_mem._cli.main.default_config_path is walrus_mem.config.default_config_path
    )


# -- precedence ------------------------------------------------------------------


def test_missing_default_file_means_defaults(default_file):
    assert not default_file.exists()
    for settings in (Settings.load(), Settings()):
        assert settings.config_file is None
        assert settings.epochs == 5 and settings.agents == {}


def test_settings_load_and_settings_read_the_default_file(default_file):
    write(default_file, 'epochs = 9\n[agents.researcher]\nmax_recall_results = 3\n')
    for settings in (Settings.load(), Settings(), Settings.load(use_keyring=False)):
        assert settings.config_file == default_file
        assert settings.epochs == 9
        assert settings.agents["researcher"].max_recall_results == 3
    # explicit values still win over the file, env still wins over the file
    assert Settings(epochs=2).epochs == 2


def test_env_beats_default_file_for_ordinary_settings(default_file, monkeypatch):
    write(default_file, "epochs = 9\n")
    monkeypatch.setenv("WALRUS_MEM_EPOCHS", "4")
    assert Settings.load().epochs == 4


def test_memory_reads_the_default_file(default_file, tmp_path, monkeypatch, fake_embedder,
                                       master_hex):
    monkeypatch.delenv("WALRUS_MEM_DATA_DIR")
    data_dir = tmp_path / "data-from-default-config"
    write(default_file, f'data_dir = "{data_dir.as_posix()}"\nepochs = 7\n'
                        '[agents.researcher]\nnamespace = "research"\n')
    with Memory(embedder=fake_embedder, master_key=master_hex) as mem:
        assert mem.settings.config_file == default_file
        assert mem.settings.data_dir == data_dir and mem.settings.epochs == 7
        assert mem.settings.agents["researcher"].namespace == "research"
    assert data_dir.is_dir()  # the catalog went where the default config says


@pytest.mark.parametrize("env_name", ["WALRUS_MEM_CONFIG", "WALRUS_MEM_CONFIG_FILE"])
def test_env_var_beats_default_file(default_file, tmp_path, monkeypatch, env_name):
    write(default_file, "epochs = 9\n")
    named = write(tmp_path / "named.toml", "epochs = 3\n")
    monkeypatch.setenv(env_name, str(named))
    for settings in (Settings.load(), Settings()):
        assert settings.config_file == named and settings.epochs == 3


def test_walrus_mem_config_beats_walrus_mem_config_file(tmp_path, monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_CONFIG", str(write(tmp_path / "a.toml", "epochs = 1\n")))
    monkeypatch.setenv("WALRUS_MEM_CONFIG_FILE", str(write(tmp_path / "b.toml", "epochs = 2\n")))
    assert Settings.load().epochs == 1


def test_env_var_naming_a_missing_file_is_an_error_not_the_default(default_file, tmp_path,
                                                                  monkeypatch):
    write(default_file, "epochs = 9\n")
    monkeypatch.setenv("WALRUS_MEM_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="nope.toml does not exist"):
        Settings.load()


def test_explicit_argument_beats_env_and_default(default_file, tmp_path, monkeypatch):
    write(default_file, "epochs = 9\n")
    monkeypatch.setenv("WALRUS_MEM_CONFIG", str(write(tmp_path / "env.toml", "epochs = 3\n")))
    arg = write(tmp_path / "arg.toml", "epochs = 2\n")
    for settings in (Settings.load(config_file=arg), Settings(config_file=arg)):
        assert settings.config_file == arg and settings.epochs == 2
    assert resolve_config_file(arg) == arg


def test_explicit_none_reads_no_file(default_file, tmp_path, monkeypatch):
    # The opt-out for code that must not see the user's config (tests, benchmarks).
    write(default_file, "epochs = 9\n")
    monkeypatch.setenv("WALRUS_MEM_CONFIG", str(write(tmp_path / "env.toml", "epochs = 3\n")))
    for settings in (Settings.load(config_file=None), Settings(config_file=None)):
        assert settings.config_file is None and settings.epochs == 5


# -- a broken default file is an error, never skipped ------------------------------


MALFORMED = [
    (f'publisher_token = "{SECRET}\n', "not valid TOML"),          # unterminated string
    (f'epochs = "{SECRET}"\n', "epochs"),                          # invalid value
    (f'epoch = "{SECRET}"\n', "epoch"),                            # unknown setting
    (f'[agents.bot]\nmax_recall_results = "{SECRET}"\n', "agents.bot.max_recall_results"),
]


@pytest.mark.parametrize(("text", "match"), MALFORMED)
def test_malformed_default_file_raises_config_error_naming_it(default_file, text, match,
                                                              fake_embedder):
    write(default_file, text)
    for build in (Settings.load, lambda: Memory(embedder=fake_embedder)):
        with pytest.raises(ConfigError, match=match) as info:
            build()
        message = str(info.value)
        assert str(default_file) in message
        assert SECRET not in message and SECRET not in repr(info.value)
        # no pydantic error (it holds the raw inputs) rides along, no secret anywhere
        linked = [e for e in (info.value.__cause__, info.value.__context__) if e is not None]
        assert not any(isinstance(e, ValidationError) for e in linked)
        assert all(SECRET not in f"{e} {e!r}" for e in linked)


@pytest.mark.parametrize(("text", "match"), MALFORMED)
def test_default_file_fails_exactly_like_the_same_file_given_explicitly(default_file, text,
                                                                        match):
    write(default_file, text)
    for build in (Settings.load, Settings):
        with pytest.raises(Exception) as implicit:
            build()
        with pytest.raises(Exception) as explicit:
            build(config_file=default_file)
        assert type(implicit.value) is type(explicit.value)
        assert str(implicit.value) == str(explicit.value)
        assert SECRET not in str(implicit.value)
    # plain Settings(): unparseable file -> ConfigError; a bad value -> pydantic's
    # ValidationError without inputs (its documented contract, as for an explicit file)
    with pytest.raises((ConfigError, ValidationError)):
        Settings()


def test_placeholder_error_in_default_file_names_it(default_file):
    write(default_file, 'publisher_token = "${WM_TEST_UNSET_TOKEN_VAR}"\n')
    with pytest.raises(PlaceholderError, match="WM_TEST_UNSET_TOKEN_VAR is not set") as info:
        Settings.load()
    assert str(default_file) in str(info.value)
    assert info.value.variable == "WM_TEST_UNSET_TOKEN_VAR"


def test_directory_at_default_path_is_an_error(default_file):
    default_file.mkdir()
    with pytest.raises(ConfigError, match="cannot be read") as info:
        Settings.load()
    assert str(default_file) in str(info.value)


def test_invalid_explicit_value_with_default_file_still_names_the_file(default_file):
    write(default_file, "epochs = 9\n")
    with pytest.raises(ConfigError, match=r"epochs: .*\(config file .*config\.toml\)"):
        Settings.load(epochs=0)


# -- the CLI applies the same rule ---------------------------------------------------


def test_cli_and_library_agree_on_default_file(default_file, master_hex, monkeypatch):
    write(default_file, '[agents.researcher]\nnamespace = "research"\n')
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", master_hex)
    rows = invoke_json(["keys"])["namespaces"]
    assert {r["namespace"] for r in rows} >= {"research"}
    assert Settings.load().agents["researcher"].namespace == "research"


def test_cli_honours_walrus_mem_config_file_over_default(default_file, tmp_path, master_hex,
                                                        monkeypatch):
    # Before the shared rule the CLI passed the default file explicitly, which
    # silently beat WALRUS_MEM_CONFIG_FILE.
    write(default_file, '[agents.fromdefault]\n')
    named = write(tmp_path / "named.toml", '[agents.fromenv]\n')
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", master_hex)
    monkeypatch.setenv("WALRUS_MEM_CONFIG_FILE", str(named))
    agents = {r["agent"] for r in invoke_json(["keys"])["namespaces"]}
    assert "fromenv" in agents and "fromdefault" not in agents


def test_cli_malformed_default_file_fails_naming_it(default_file):
    write(default_file, f'epochs = "{SECRET}"\n')
    res = invoke(["keys"], expect=1)
    assert str(default_file) in res.stderr and "ConfigError" in res.stderr
    assert SECRET not in res.stdout + res.stderr


def test_doctor_checks_the_file_settings_read(default_file):
    write(default_file, "epochs = 9\n")
    checks, settings = check_config(None)
    assert checks[0].name == "config file" and str(default_file) in checks[0].detail
    assert settings is not None and settings.epochs == 9
