"""Issue 14: one agent, one secret; local access checks; key hygiene; backup and import."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers_cli import invoke, invoke_json
from tests.helpers_memory import MASTER_HEX, OTHER_MASTER_HEX, make_settings
from walrus_mem import Memory
from walrus_mem._keys.keystore import agent_env_var, key_file_in_use, parse_backup, to_mnemonic
from walrus_mem.config import AgentConfig, Settings, default_key_file
from walrus_mem.errors import (
    AccessDenied,
    AuthenticationFailed,
    ConfigError,
    EmbeddingError,
    InsecureKeyFile,
    KeyExists,
    MalformedKey,
    PlaceholderError,
    UnknownAgent,
)
from walrus_mem.hooks import MemoryHooks
from walrus_mem.keys import MasterSeed, load_key_file, write_key_file
from walrus_mem.testing import HashEmbedder
from walrus_mem.tools import call_tool

A_KEY = "a1" * 32
B_KEY = "b2" * 32
SECRET_FACT = "the launch code is tangerine-42"

TWO_AGENTS = """\
embedding_model = "test-hash"
use_keyring = false

[agents.alpha]
key = "${ALPHA_KEY}"

[agents.beta]
key = "${BETA_KEY}"
"""


@pytest.fixture
def two_agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cfg = tmp_path / "agents.toml"
    cfg.write_text(TWO_AGENTS, encoding="utf-8")
    monkeypatch.setenv("WALRUS_MEM_CONFIG", str(cfg))
    monkeypatch.delenv("ALPHA_KEY", raising=False)
    monkeypatch.delenv("BETA_KEY", raising=False)
    return cfg


# -- 1. one agent, one secret ---------------------------------------------------------


def test_each_agent_process_needs_only_its_own_variable(two_agents, monkeypatch):
    monkeypatch.setenv("ALPHA_KEY", A_KEY)
    invoke(["--agent", "alpha", "remember", SECRET_FACT])  # alpha's own process
    monkeypatch.delenv("ALPHA_KEY")
    monkeypatch.setenv("BETA_KEY", B_KEY)  # ALPHA_KEY is not set in this process
    settings = Settings.load()
    with Memory(settings, embedder=HashEmbedder(64)) as mem:
        rec = mem.remember("beta likes green tea", namespace="beta")
        assert mem.recall("green tea", namespace="beta", min_score=0)[0].id == rec.id
        with pytest.raises(PlaceholderError, match="ALPHA_KEY") as info:
            mem.remember("x", namespace="alpha")
        assert "agents.alpha.key" in str(info.value) and B_KEY not in str(info.value)
    # the same through the CLI, as a separate process per agent would run it
    invoke(["--agent", "beta", "remember", "beta also likes oolong"])
    hits = invoke_json(["--agent", "beta", "recall", "oolong", "--min-score", "0"])
    assert any("oolong" in json.dumps(h) for h in hits["hits"])
    failed = invoke(["--agent", "alpha", "list"], expect=1)
    assert "ALPHA_KEY" in failed.stderr and B_KEY not in failed.stderr
    assert "tangerine" not in failed.stdout + failed.stderr


def test_an_agent_process_syncs_its_own_namespace_only(two_agents, monkeypatch):
    """`--agent beta sync` in a shared data dir tried every namespace and failed (exit 1,
    'pull for alpha: PlaceholderError') on alpha's, whose key beta never holds."""
    monkeypatch.setenv("ALPHA_KEY", A_KEY)
    invoke(["--agent", "alpha", "remember", SECRET_FACT])
    invoke(["--agent", "alpha", "sync"])
    monkeypatch.delenv("ALPHA_KEY")
    monkeypatch.setenv("BETA_KEY", B_KEY)
    invoke(["--agent", "beta", "remember", "beta likes green tea"])
    res = invoke(["--agent", "beta", "sync"])  # exit 0
    assert "Head for beta" in res.stdout and "alpha" not in res.stdout + res.stderr
    assert "alpha" not in invoke(["--agent", "beta", "expiring", "--within", "100"]).stdout
    every = invoke(["sync"], expect=1)  # without -n / --agent: every namespace, as before
    assert "ALPHA_KEY" in every.stdout and A_KEY not in every.stdout + every.stderr


def test_unknown_agent_lists_the_known_ones(two_agents, monkeypatch):
    monkeypatch.setenv("BETA_KEY", B_KEY)
    with pytest.raises(UnknownAgent, match=r"unknown agent 'gamma'; known agents: alpha, b") as e:
        Settings.load().agent("gamma")
    assert e.value.known == ("alpha", "beta")
    res = invoke(["--agent", "gamma", "list"], expect=1)
    assert "known agents: alpha, beta" in res.stderr
    res = invoke(["--agent", "beta", "-n", "alpha", "list"], expect=2)
    assert "namespace beta" in res.stderr


def test_malformed_placeholder_in_a_key_is_still_reported_at_load(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[agents.x]\nkey = "${NOT CLOSED"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="malformed placeholder"):
        Settings.load(config_file=cfg)


# -- 2. local access checks on every read path -------------------------------------


@pytest.fixture
def owned(tmp_path: Path) -> tuple[Path, str]:
    """A data dir whose namespace 'alpha' was written with MASTER_HEX."""
    data = tmp_path / "shared"
    with Memory(make_settings(data, config_file=None), embedder=HashEmbedder(64),
                master_key=MASTER_HEX) as mem:
        rec = mem.remember(SECRET_FACT, namespace="alpha")
        mem.sync()
    return data, rec.id


def test_every_api_read_path_refuses_another_key(owned):
    data, mid = owned
    with Memory(make_settings(data, config_file=None), embedder=HashEmbedder(64),
                master_key=OTHER_MASTER_HEX) as other:
        for read in (
            lambda: other.recall("launch code", namespace="alpha", min_score=0),
            lambda: other.get(mid, namespace="alpha"),
            lambda: other.list("alpha"),
            lambda: other.history(mid, namespace="alpha"),
            lambda: other.expiring(100, namespace="alpha"),
            lambda: other.stored_vectors([mid], namespace="alpha"),
            lambda: other.reindex("alpha"),
            lambda: other.forget(mid, namespace="alpha"),
            lambda: other.remember("overwrite", namespace="alpha"),
        ):
            with pytest.raises(AccessDenied) as info:
                read()
            assert "tangerine" not in str(info.value)
        assert other.expiring(100) == []  # every namespace: only those this key opens
        # tools (and so MCP, which dispatches to them) and hooks use the same checks
        for name, args in (("memory_search", {"query": "launch code", "min_score": 0}),
                           ("memory_list", {}), ("memory_get", {"id": mid}),
                           ("memory_history", {"id": mid})):
            out = call_tool(other, name, args, namespace="alpha")  # host-bound namespace
            assert not out["ok"] and out["error"]["type"] == "AccessDenied", out
            assert "tangerine" not in json.dumps(out)
        hooks = MemoryHooks(other, {"alpha": {"namespace": "alpha"}})
        ctx = hooks.before_prompt_build("what is the launch code again?", "agent:alpha:main")
        assert ctx.prepend_context == "" and "AccessDenied" in (ctx.error or "")
    with Memory(make_settings(data, config_file=None), embedder=HashEmbedder(64),
                master_key=MASTER_HEX) as owner:  # the right key still reads everything
        assert owner.get(mid, namespace="alpha").text == SECRET_FACT


def test_every_cli_read_path_refuses_another_key(owned, monkeypatch):
    data, mid = owned
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", OTHER_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    base = ["--data-dir", str(data), "-n", "alpha"]
    for args in (["recall", "launch code"], ["list"], ["get", mid], ["history", mid],
                 ["export"], ["expiring", "--within", "100"]):
        res = invoke([*base, *args], expect=1)
        assert "AccessDenied" in res.stderr, args
        assert "tangerine" not in res.stdout + res.stderr


@pytest.mark.anyio
async def test_mcp_server_refuses_another_key(owned):
    pytest.importorskip("mcp")
    from mcp import Client

    from walrus_mem.mcp_server import build_server

    data, _ = owned
    settings = make_settings(data, config_file=None, agents={"alpha": {"namespace": "alpha"}})
    with Memory(settings, embedder=HashEmbedder(64), master_key=OTHER_MASTER_HEX) as other:
        async with Client(build_server(other, agent="alpha")) as client:
            result = await client.call_tool("memory_search", {"query": "launch code"})
            data_out = json.loads(result.content[0].text)
            assert data_out["error"]["type"] == "AccessDenied"
            assert "tangerine" not in result.content[0].text


def test_independent_agent_with_a_wrong_key_is_refused(tmp_path):
    data = tmp_path / "d"
    right = make_settings(data, config_file=None, agents={"r": {"key": A_KEY}})
    with Memory(right, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        mem.remember(SECRET_FACT, namespace="r")
    wrong = make_settings(data, config_file=None, agents={"r": {"key": B_KEY}})
    with Memory(wrong, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem, \
            pytest.raises(AccessDenied):
        mem.list("r")


# -- 4. hygiene -------------------------------------------------------------------------


def test_tilde_data_dir_is_the_same_from_any_working_directory(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("WALRUS_MEM_DATA_DIR")
    cfg = tmp_path / "c.toml"
    cfg.write_text('data_dir = "~/agent-mem"\nembedding_model = "test-hash"\n'
                   "use_keyring = false\n", encoding="utf-8")
    monkeypatch.setenv("WALRUS_MEM_CONFIG", str(cfg))
    monkeypatch.setenv("WALRUS_MEM_KEY_FILE", "~/keys/master.key")
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    monkeypatch.chdir(one)
    invoke(["init", "--store", "file"])
    invoke(["remember", "written from the first directory"])
    monkeypatch.chdir(two)
    listed = invoke_json(["list"])["memories"]
    assert [r["text"] for r in listed] == ["written from the first directory"]
    assert (home / "keys" / "master.key").is_file()
    assert (home / "agent-mem" / "catalog.sqlite3").is_file()
    assert (home / "agent-mem" / "relayer").is_dir()  # the embedded relayer too
    assert not (one / "~").exists() and not (two / "~").exists()


def test_env_vars_in_paths_are_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("WM_TEST_BASE", str(tmp_path))
    s = Settings.load(data_dir="$WM_TEST_BASE/d", key_file="${WM_TEST_BASE}/k/master.key")
    assert s.data_dir == tmp_path / "d" and s.key_file == tmp_path / "k" / "master.key"


def _every_field() -> dict[str, str]:
    """A ``${V}`` line for every setting and agent setting, those added later included
    (the two keys are resolved lazily: _lazy_errors)."""
    lists = {"aggregator_urls", "publisher_urls", "read_only_session_patterns"}
    out = {n: (f'{n} = ["http://ok.example", "${{V}}"]' if n in lists else f'{n} = "${{V}}"')
           for n in Settings.model_fields if n not in {"agents", "config_file", "master_key"}}
    out.update({f"agents.bot.{n}": f'[agents.bot]\n{n} = "${{V}}"'
                for n in AgentConfig.model_fields if n != "key"})
    return out


_FIELDS = _every_field()


def _config_error(tmp_path: Path, line: str, value: str) -> str | None:
    cfg = tmp_path / "fuzz.toml"
    cfg.write_text(line + "\n", encoding="utf-8")
    try:
        os.environ["V"] = value
        settings = Settings.load(config_file=cfg)
        for name in settings.agents:
            settings.agent(name)
    except ConfigError as exc:
        return str(exc) + repr(exc)
    finally:
        os.environ.pop("V", None)
    return None


@given(value=st.text(min_size=1, max_size=120).filter(lambda v: "\x00" not in v),
       field=st.sampled_from(sorted(_FIELDS)))
def test_fuzz_errors_never_show_a_placeholder_value(tmp_path_factory, value, field):
    tmp = tmp_path_factory.mktemp("fuzz")
    message = _config_error(tmp, _FIELDS[field], value)
    if message is None:
        return
    # the wording for a value set from ${V} is fixed: the same for any other bad value
    reference = _config_error(tmp, _FIELDS[field], "\u2603 not valid ( \u2603")
    assert reference is not None and "${V}" in reference
    assert message.replace(value, "") == message or value in reference, field


def _lazy_errors(value: str) -> str:
    """Messages of resolving and parsing master_key and an agent key set from ${V}."""
    from walrus_mem.keys import resolve_master_seed

    os.environ["V"] = value
    out = []
    try:
        settings = Settings.load(config_file=None, master_key="${V}",
                                 agents={"bot": {"key": "${V}"}})
        for use in (lambda: resolve_master_seed(config_value=settings.master_key_value(),
                                                use_keyring=False),
                    lambda: settings.agent("bot").agent_seed("bot")):
            try:
                use()
            except (ConfigError, MalformedKey) as exc:
                out.append(str(exc) + repr(exc))
    finally:
        os.environ.pop("V", None)
    return "\n".join(out)


@given(value=st.text(min_size=1, max_size=120).filter(lambda v: "\x00" not in v))
def test_fuzz_lazy_secrets_never_show_their_value(value):
    message = _lazy_errors(value)
    reference = _lazy_errors("\u2603 not a key \u2603")
    assert "must be" in reference
    assert value not in message or value in reference


def test_errors_raised_when_a_placeholder_setting_is_used_name_the_placeholder(
        tmp_path, monkeypatch):
    """Not only validation: a model that cannot load, a token command that cannot run."""
    from walrus_mem._walrus.credentials import command_provider

    secret = "sk-live-0123456789abcdef"
    cfg = tmp_path / "c.toml"
    cfg.write_text('embedding_model = "${WM_MODEL}"\nembedding_backend = "torch"\n'
                   'publisher_token_command = "${WM_CMD}"\n', encoding="utf-8")
    monkeypatch.setenv("WM_MODEL", secret)
    monkeypatch.setenv("WM_CMD", secret)
    settings = Settings.load(config_file=cfg)
    assert settings.from_placeholder("embedding_model") == "${WM_MODEL}"
    with Memory(settings, master_key=MASTER_HEX) as mem, \
            pytest.raises(EmbeddingError) as info:
        mem.remember("anything")
    assert "${WM_MODEL}" in str(info.value) and secret not in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None
    with pytest.raises(AuthenticationFailed) as failed:
        command_provider(settings.publisher_token_command or "")()
    assert secret not in str(failed.value) and "publisher_token_command" in str(failed.value)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "from-the-env")  # not a placeholder
    assert Settings.load(config_file=cfg).from_placeholder("embedding_model") is None


def test_publisher_url_error_names_the_placeholder_not_the_value(tmp_path, monkeypatch):
    monkeypatch.setenv("WM_SECRETISH", "sk-live-not-a-url-0123456789")
    cfg = tmp_path / "c.toml"
    cfg.write_text('publisher_url = "${WM_SECRETISH}"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        Settings.load(config_file=cfg)
    assert "${WM_SECRETISH}" in str(info.value) and "sk-live" not in str(info.value)


def test_key_file_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    path = write_key_file(tmp_path / "k" / "master.key", MasterSeed.from_hex(MASTER_HEX))
    if os.geteuid() == 0:  # as root, make it really belong to someone else
        os.chown(path, 65534, -1)
    else:
        monkeypatch.setattr("walrus_mem.keys.os.geteuid", lambda: os.getuid() + 1)
    with pytest.raises(InsecureKeyFile, match="owned by uid") as info:
        load_key_file(path)
    assert MASTER_HEX not in str(info.value)


def test_memory_keeps_no_raw_key(tmp_path):
    with Memory(make_settings(tmp_path / "d", config_file=None), embedder=HashEmbedder(64),
                master_key=MASTER_HEX) as mem:
        mem.remember("something")
        for value in vars(mem).values():
            assert not isinstance(value, str | bytes) or (
                MASTER_HEX not in str(value) and bytes.fromhex(MASTER_HEX) != value
            )
        assert MASTER_HEX not in repr(mem)


def test_every_written_file_is_owner_only(tmp_path):
    data = tmp_path / "d"
    with Memory(make_settings(data, config_file=None, manifest_every=1),
                embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        mem.remember_many([f"fact number {i}" for i in range(5)])
        mem.remember("one more")
        mem.sync()
        mem.compact()
    seen = 0
    for path in [data, *data.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {mode:o}"
        seen += 1
    assert (data / "relayer").is_dir() and seen > 8


# -- 3. backup and import ------------------------------------------------------------


def test_bip39_reference_vectors_and_round_trip():
    # BIP39 test vectors (256-bit entropy)
    assert to_mnemonic(bytes(32)) == " ".join(["abandon"] * 23 + ["art"])
    assert to_mnemonic(b"\xff" * 32) == " ".join(["zoo"] * 23 + ["vote"])
    words = to_mnemonic(bytes.fromhex(MASTER_HEX))
    assert parse_backup(words.upper()) == bytes.fromhex(MASTER_HEX)
    assert parse_backup(f"  {MASTER_HEX}\n") == bytes.fromhex(MASTER_HEX)
    swapped = words.split()
    swapped[0], swapped[1] = swapped[1], swapped[0]
    with pytest.raises(MalformedKey, match="checksum") as info:
        parse_backup(" ".join(swapped))
    assert swapped[0] not in str(info.value) and info.value.__cause__ is None
    with pytest.raises(MalformedKey):
        parse_backup("notaword " * 24)


def test_export_import_on_a_fresh_machine_then_restore(tmp_path, monkeypatch):
    from relayer_mock.server import RelayerServer

    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    with RelayerServer(tmp_path / "walrus") as server:
        monkeypatch.setenv("WALRUS_MEM_PUBLISHER_URL", server.url)
        monkeypatch.setenv("WALRUS_MEM_AGGREGATOR_URLS", server.url)
        first = ["--data-dir", str(tmp_path / "machine-1")]
        invoke([*first, "init", "--store", "file"])
        for fact in ("alpha fact one", "alpha fact two", "alpha fact three"):
            invoke([*first, "remember", fact])
        invoke([*first, "sync"])
        manifest = invoke_json([*first, "stats"])["manifest_blob_id"]
        refused = invoke([*first, "keys", "export"], input="n\n", expect=1)
        assert refused.stdout == ""
        backup = invoke([*first, "keys", "export"], input="y\n").stdout.strip().splitlines()
        words, hex_line = backup[-2], backup[-1]
        assert len(words.split()) == 24 and len(hex_line) == 64

        # a fresh machine: another config dir (so no key file) and another data dir
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "machine-2-config"))
        monkeypatch.setattr("walrus_mem.config.default_config_path",
                            lambda: tmp_path / "machine-2-config" / "walrus-mem" / "config.toml")
        second = ["--data-dir", str(tmp_path / "machine-2")]
        assert invoke([*second, "restore", "--manifest", manifest], expect=1)
        invoke([*second, "keys", "import", "--store", "file"], input=words + "\n")
        again = invoke([*second, "keys", "import"], input=hex_line + "\n")
        assert "already stored" in again.stdout
        other = invoke([*second, "keys", "import"], input="ab" * 32, expect=1)
        assert "KeyExists" in other.stderr
        report = invoke_json([*second, "restore", "--manifest", manifest])
        assert report["restored"] == 3
        texts = sorted(r["text"] for r in invoke_json([*second, "list"])["memories"])
        assert texts == ["alpha fact one", "alpha fact three", "alpha fact two"]


def test_new_agent_prints_one_variable_line_that_works(tmp_path, monkeypatch):
    res = invoke(["keys", "new-agent", "research-bot"])
    (line,) = res.stdout.splitlines()
    var, _, value = line.partition("=")
    assert var == agent_env_var("research-bot") == "RESEARCH_BOT_KEY" and len(value) == 64
    assert '[agents.research-bot]' in res.stderr and 'key = "${RESEARCH_BOT_KEY}"' in res.stderr
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'embedding_model = "test-hash"\n[agents.research-bot]\nkey = "${{{var}}}"\n',
                   encoding="utf-8")
    monkeypatch.setenv(var, value)
    invoke(["--config", str(cfg), "--agent", "research-bot", "remember", "bot fact"])
    out = invoke(["--config", str(cfg), "keys", "export", "--agent", "research-bot", "--yes"])
    assert out.stdout.splitlines()[-1] == value


def test_legacy_key_file_in_the_data_dir_is_moved_once(tmp_path):
    data = tmp_path / "d"
    seed = MasterSeed.from_hex(MASTER_HEX)
    legacy = write_key_file(data / "keys" / "master.key", seed)
    settings = make_settings(data, config_file=None)
    assert key_file_in_use(settings) == default_key_file()
    assert not legacy.exists() and load_key_file(default_key_file()) == seed
    # a second data dir with its own, different key keeps using it
    other_dir = tmp_path / "e"
    own = write_key_file(other_dir / "keys" / "master.key", MasterSeed.from_hex(OTHER_MASTER_HEX))
    assert key_file_in_use(make_settings(other_dir, config_file=None)) == own
    assert own.exists()
    with Memory(make_settings(other_dir, config_file=None), embedder=HashEmbedder(64)) as mem:
        assert mem.keys_for("default").fingerprint != seed.fingerprint


def test_import_refuses_a_different_key(tmp_path):
    write_key_file(default_key_file(), MasterSeed.from_hex(MASTER_HEX))
    res = invoke(["keys", "import", "--store", "file"], input=OTHER_MASTER_HEX, expect=1)
    assert "KeyExists" in res.stderr and OTHER_MASTER_HEX not in res.stderr
    assert load_key_file(default_key_file()) == MasterSeed.from_hex(MASTER_HEX)
    with pytest.raises(KeyExists):
        write_key_file(default_key_file(), MasterSeed.from_hex(OTHER_MASTER_HEX))


def test_agent_key_import_prints_the_variable_and_derived_agents_have_none(tmp_path):
    words = to_mnemonic(bytes.fromhex(A_KEY))
    res = invoke(["keys", "import", "--agent", "alpha"], input=words)
    assert res.stdout.strip() == f"ALPHA_KEY={A_KEY}"
    assert 'key = "${ALPHA_KEY}"' in res.stderr and A_KEY not in res.stderr
    cfg = tmp_path / "c.toml"
    cfg.write_text("[agents.writer]\nnamespace = \"writing\"\n", encoding="utf-8")
    out = invoke(["--config", str(cfg), "keys", "export", "--agent", "writer", "--yes"],
                 expect=1)
    assert "derived from the master key" in out.stderr and out.stdout == ""


def test_init_writes_owner_only_config_and_key(tmp_path):
    invoke(["init", "--store", "file"])
    from walrus_mem.config import default_config_path

    for path in (default_config_path(), default_key_file()):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, path.parent


def _reachable(root: object) -> list[object]:
    """Objects reachable from ``root`` through attributes and containers, stopping at the
    two designated key holders (whose repr shows a fingerprint only) and at code."""
    import gc
    import types

    from walrus_mem.keys import MasterSeed, NamespaceKeys

    stop = (NamespaceKeys, MasterSeed, type, types.ModuleType, types.FunctionType,
            types.BuiltinFunctionType, types.CodeType, types.FrameType)
    seen: set[int] = set()
    out: list[object] = []
    todo = [root]
    while todo and len(out) < 200_000:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, stop):
            continue
        seen.add(id(obj))
        out.append(obj)
        if not isinstance(obj, str | bytes | bytearray | memoryview | int | float):
            todo.extend(gc.get_referents(obj))
    return out


def test_no_object_reachable_from_memory_holds_or_shows_key_material(tmp_path):
    """Memory and every object it holds (catalog, logs, heads stores and mirror, the data
    dir lock, the Walrus client, hooks, grants and rotation state): no key bytes in any
    encoding outside NamespaceKeys / MasterSeed, and no repr showing them."""
    import base64

    agents = {"alpha": {"namespace": "alpha"}, "bot": {"key": "${WM_BOT_KEY}"}}
    os.environ["WM_BOT_KEY"] = A_KEY
    try:
        settings = make_settings(tmp_path / "d", config_file=None, agents=agents,
                                 heads_file=tmp_path / "heads.txt")
        mem = Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX)
        with mem:
            recs = mem.remember_many([f"alpha fact {i}" for i in range(4)], namespace="alpha")
            mem.remember("bot fact", namespace="bot")
            mem.sync()
            grant = mem.share([recs.records[0].id], namespace="alpha",
                              to=mem.keys_for("bot").verify_key)
            mem.accept(grant.reference, namespace="bot")
            mem.rotate_key("alpha")
            hooks = MemoryHooks(mem, {"alpha": {"namespace": "alpha"}})
            hooks.before_prompt_build("what do you know about alpha facts?", "agent:alpha:x")
            secrets: set[bytes] = {bytes.fromhex(MASTER_HEX), bytes.fromhex(A_KEY)}
            for ns in ("alpha", "bot"):
                for gen in (0, 1):
                    keys = mem.derive_keys(ns, generation=gen)
                    secrets |= {keys.sealing_key, keys.dedupe_key, bytes(keys.signing_key)}
            forms = set(secrets)
            for s in secrets:
                forms |= {s.hex().encode(), base64.b64encode(s), base64.urlsafe_b64encode(s)}
            found = _reachable(mem) + _reachable(hooks) + _reachable(grant)
            assert len(found) > 1000
            for obj in found:
                if isinstance(obj, str | bytes | bytearray):
                    raw = obj.encode("utf-8", "surrogatepass") if isinstance(obj, str) \
                        else bytes(obj)
                    assert not any(f in raw for f in forms), type(obj)
            for obj in (mem, hooks, grant, mem._catalog, mem.walrus, mem._log, settings):
                shown = repr(obj) + str(obj)
                assert not any(f.decode("latin-1") in shown for f in forms), type(obj)
    finally:
        os.environ.pop("WM_BOT_KEY", None)
