"""Settings: env prefix, TOML config file with ${VAR}, precedence, agents, typed errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from walrus_mem.config import (
    AgentConfig,
    Settings,
    default_config_path,
    default_key_file,
    load_config_file,
)
from walrus_mem.errors import ConfigError, MalformedKey, PlaceholderError
from walrus_mem.keys import MASTER_KEY_ENV

from .helpers_keys import seed_bytes

SECRET = "sk-live-0a1b2c3d4e5f60718293a4b5c6d7e8f9"


@pytest.fixture
def toml(tmp_path: Path):
    def write(text: str, name: str = "walrus-mem.toml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


def test_defaults(clean_environ):
    s = Settings.load()
    assert s.data_dir == clean_environ  # conftest points WALRUS_MEM_DATA_DIR here
    assert s.epochs == 5 and s.max_fact_bytes == 64 * 1024 and s.default_namespace == "default"
    assert s.master_key is None and s.config_file is None and s.agents == {}
    # the master key lives with the user's config, not in a data dir (conftest: XDG temp dir)
    assert s.embedded and s.resolved_key_file == default_key_file()
    assert s.resolved_key_file.parent.parent == default_config_path().parent


def test_env_prefix(monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_EPOCHS", "7")
    monkeypatch.setenv("WALRUS_MEM_PUBLISHER_URL", " http://127.0.0.1:9000/ ")
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    monkeypatch.setenv("EPOCHS", "9")  # unprefixed: ignored
    s = Settings.load()
    assert s.epochs == 7 and s.publisher_url == "http://127.0.0.1:9000" and not s.use_keyring
    assert not s.embedded


def test_aggregator_urls_comma_separated_env(monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_AGGREGATOR_URLS", "http://a:1, http://b:2,,  http://c:3 ,")
    assert Settings.load().aggregator_urls == ["http://a:1", "http://b:2", "http://c:3"]


def test_aggregator_urls_list_in_toml(toml):
    path = toml('aggregator_urls = ["http://a:1", "http://b:2"]\n')
    assert Settings.load(config_file=path).aggregator_urls == ["http://a:1", "http://b:2"]


@pytest.mark.parametrize("short", ["0x1234", "0x" + "a" * 63, "a" * 64, "0x" + "g" * 64])
def test_send_object_to_must_be_a_full_sui_address(toml, monkeypatch, short):
    """Caught when the config loads (doctor FAILs), not after remember stored a fact locally."""
    path = toml(f'send_object_to = "{short}"\n')
    with pytest.raises(ConfigError, match="32-byte Sui address"):
        Settings.load(config_file=path)
    monkeypatch.setenv("WALRUS_MEM_SEND_OBJECT_TO", short)
    with pytest.raises(ConfigError, match="send_object_to"):
        Settings.load()
    monkeypatch.setenv("WALRUS_MEM_SEND_OBJECT_TO", " 0x" + "AB" * 32 + " ")
    assert Settings.load().send_object_to == "0x" + "ab" * 32


@pytest.mark.parametrize("env_name", ["WALRUS_MEM_CONFIG", "WALRUS_MEM_CONFIG_FILE"])
def test_config_file_from_env(toml, monkeypatch, env_name):
    path = toml("epochs = 11\n")
    monkeypatch.setenv(env_name, str(path))
    s = Settings.load()
    assert s.epochs == 11 and s.config_file == path


def test_config_file_argument_wins_over_env(toml, monkeypatch):
    env_file = toml("epochs = 11\n", "env.toml")
    arg_file = toml("epochs = 12\n", "arg.toml")
    monkeypatch.setenv("WALRUS_MEM_CONFIG", str(env_file))
    s = Settings.load(config_file=arg_file)
    assert s.epochs == 12 and s.config_file == arg_file


def test_precedence_argument_env_file_default(toml, monkeypatch):
    path = toml("epochs = 3\nmanifest_every = 30\nrequest_timeout = 3.5\n")
    monkeypatch.setenv("WALRUS_MEM_EPOCHS", "2")
    monkeypatch.setenv("WALRUS_MEM_MANIFEST_EVERY", "20")
    s = Settings.load(config_file=path, epochs=1)
    assert s.epochs == 1  # argument
    assert s.manifest_every == 20  # env over file
    assert s.request_timeout == 3.5  # file over default
    assert s.read_deadline == 30.0  # default


def test_walrus_mem_table_is_accepted(toml):
    path = toml('[walrus_mem]\nepochs = 4\ndefault_namespace = "work"\n')
    s = Settings.load(config_file=path)
    assert s.epochs == 4 and s.default_namespace == "work"


def test_placeholders_in_the_config_file(toml, monkeypatch):
    monkeypatch.setenv("WM_TEST_TOKEN", SECRET)
    monkeypatch.setenv("WM_TEST_HOST", "127.0.0.1")
    monkeypatch.setenv("WM_TEST_NS", "bot-notes")
    path = toml(
        'publisher_url = "http://${WM_TEST_HOST}:31415"\n'
        'publisher_token = "${WM_TEST_TOKEN}"\n'
        'aggregator_urls = ["http://${WM_TEST_HOST}:1", "http://${WM_TEST_HOST}:2"]\n'
        "[agents.bot]\n"
        'namespace = "${WM_TEST_NS}"\n'
    )
    s = Settings.load(config_file=path)
    assert s.publisher_url == "http://127.0.0.1:31415"
    assert s.publisher_token is not None and s.publisher_token.get_secret_value() == SECRET
    assert s.aggregator_urls == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    assert s.agents["bot"].namespace == "bot-notes"
    assert SECRET not in repr(s) and SECRET not in str(s)


def test_unset_placeholder_in_file_is_placeholder_error(toml):
    path = toml('publisher_token = "${WM_TEST_UNSET_VAR}"\n')
    with pytest.raises(PlaceholderError, match="WM_TEST_UNSET_VAR is not set") as info:
        Settings.load(config_file=path)
    assert "publisher_token" in str(info.value)


def test_master_key_is_not_taken_from_env(monkeypatch):
    monkeypatch.setenv(MASTER_KEY_ENV, seed_bytes(1).hex())
    s = Settings.load()
    assert s.master_key is None  # the key resolver reads the env var at its own rank


def test_master_key_from_config_placeholder(toml, monkeypatch):
    hex_key = seed_bytes(2).hex()
    monkeypatch.setenv("WM_TEST_MASTER", hex_key)
    s = Settings.load(config_file=toml('master_key = "${WM_TEST_MASTER}"\n'))
    # kept as written; resolved only by a process that needs the master seed
    assert isinstance(s.master_key, SecretStr)
    assert s.master_key.get_secret_value() == "${WM_TEST_MASTER}"
    assert s.master_key_value() == hex_key
    assert hex_key not in repr(s) and hex_key not in str(s.model_dump())


@pytest.mark.parametrize(
    "text",
    ["epochs = ", "[[[", 'x = "unterminated', "a = 1\na = 2\n", "epochs = 5 6"],
)
def test_malformed_toml_is_config_error(toml, text):
    path = toml(text)
    for build in (lambda: Settings.load(config_file=path), lambda: Settings(config_file=path)):
        with pytest.raises(ConfigError, match="not valid TOML") as info:
            build()
        assert str(path) in str(info.value)


def test_missing_unreadable_and_non_utf8_config(tmp_path, toml):
    with pytest.raises(ConfigError, match="does not exist"):
        Settings.load(config_file=tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="cannot be read"):
        Settings.load(config_file=tmp_path)  # a directory
    bad = tmp_path / "latin1.toml"
    bad.write_bytes('publisher_url = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        Settings.load(config_file=bad)


def test_unknown_keys_are_rejected(toml):
    with pytest.raises(ConfigError, match="epoch"):
        Settings.load(config_file=toml("epoch = 5\n"))
    with pytest.raises(ConfigError, match="no_such_setting"):
        Settings.load(no_such_setting=1)
    with pytest.raises(ConfigError, match=r"agents\.bot\.colour"):
        Settings.load(config_file=toml('[agents.bot]\ncolour = "blue"\n'))


def test_config_file_cannot_name_another_config_file(toml):
    with pytest.raises(ConfigError, match="config_file cannot be set inside"):
        Settings.load(config_file=toml('config_file = "other.toml"\n'))


def test_agents_tables(toml):
    agent_hex = seed_bytes(3).hex()
    path = toml(
        "[agents.researcher]\n"
        "max_recall_results = 8\n"
        'recall_strategy = "manual"\n'
        "[agents.Writer]\n"
        'namespace = "shared-notes"\n'
        f'key = "{agent_hex}"\n'
    )
    s = Settings.load(config_file=path)
    r, w = s.agents["researcher"], s.agents["Writer"]
    assert isinstance(r, AgentConfig) and r.namespace is None and r.key is None
    assert r.max_recall_results == 8 and r.recall_strategy == "manual" and r.auto_recall
    assert w.namespace == "shared-notes"
    assert w.key is not None and w.key.get_secret_value() == agent_hex
    assert agent_hex not in repr(s)


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ('[agents.bot]\nnamespace = "Bad Name"\n', r"agents\.bot\.namespace.*1-64 characters"),
        ("[agents.Bot]\nauto_recall = true\n", r"agent 'Bot' needs an explicit namespace"),
        ("[agents.bot]\nmax_recall_results = 0\n", r"agents\.bot\.max_recall_results"),
        ("[agents.bot]\nmin_relevance = 1.5\n", r"agents\.bot\.min_relevance"),
        ('[agents.bot]\nrecall_strategy = "sometimes"\n', r"agents\.bot\.recall_strategy"),
        ('[agents.bot]\nkey = "not-a-key"\n', r"agents\.bot\.key.*Ed25519 private key"),
        ('default_namespace = "UPPER"\n', r"default_namespace.*1-64 characters"),
        ("epochs = 0\n", r"epochs"),
        ("epochs = 54\n", r"epochs"),
        ('epochs = "many"\n', r"epochs"),
        ("max_fact_bytes = 10\n", r"max_fact_bytes"),
    ],
)
def test_invalid_values_are_config_errors(toml, table, match):
    with pytest.raises(ConfigError, match=match) as info:
        Settings.load(config_file=toml(table))
    # The ValidationError (which holds the inputs) is neither the cause nor the context.
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_plain_settings_still_raises_validation_error_without_inputs():
    with pytest.raises(ValidationError) as info:
        Settings(publisher_token=12345678987654321)  # type: ignore[arg-type]
    assert "12345678987654321" not in str(info.value)


def test_config_error_never_echoes_secret_values(toml, monkeypatch):
    bad_key = "Zm9vYmFyYmF6cXV4" + SECRET  # not a valid key, but secret-looking
    monkeypatch.setenv("WM_TEST_BAD_KEY", bad_key)
    path = toml('[agents.bot]\nkey = "${WM_TEST_BAD_KEY}"\n')
    settings = Settings.load(config_file=path)  # the key is resolved when the agent opens
    with pytest.raises(MalformedKey) as info:
        settings.agent("bot").agent_seed("bot")
    msg = str(info.value)
    assert "agent key" in msg and SECRET not in msg and "Zm9vYmFy" not in msg
    assert info.value.__cause__ is None
    for value in ([SECRET], {"a": SECRET}, 3.5):
        with pytest.raises(ConfigError) as info:
            Settings.load(publisher_token=value)
        assert SECRET not in str(info.value)


def test_unparseable_complex_env_is_config_error(monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_AGENTS", '{"bot": {"key": "' + SECRET + '"')
    with pytest.raises(ConfigError, match="WALRUS_MEM_AGENTS cannot be parsed") as info:
        Settings.load()
    assert SECRET not in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_agents_from_env_json(monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_AGENTS", '{"bot": {"max_recall_results": 3}}')
    assert Settings.load().agents["bot"].max_recall_results == 3


def test_load_config_file_direct(toml, monkeypatch):
    monkeypatch.setenv("WM_TEST_X", "x")
    assert load_config_file(toml('a = "${WM_TEST_X}"\n[walrus_mem]\nb = 1\n')) == {
        "a": "x",
        "b": 1,
    }
