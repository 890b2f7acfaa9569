"""Every file the project writes is 0600, every directory it creates 0700 (issue 14).

One realistic session, under a typical umask (022) and with none of the
directories existing beforehand: init, remember, update, forget, sync through a
heads file, pull, share/accept, rotate, hooks (recall + capture), an export, a
catalog repair (moved-aside catalog and salvage marker) and the model cache
(prototype vectors, the ONNX graph when onnx is installed). Then every path
under the session's home, config, state and cache dirs is walked.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.helpers_cli import invoke
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem import Memory
from walrus_mem._memory.repair import _write_marker
from walrus_mem._memory.repair_run import repair_data_dir
from walrus_mem._recall.embeddings import DEFAULT_MODEL_ID, constant_vectors
from walrus_mem.hooks import MemoryHooks
from walrus_mem.testing import HashEmbedder

AGENTS = {"alpha": {"namespace": "alpha"}, "beta": {"namespace": "beta"}}


class _PackagedModelStandIn(HashEmbedder):
    """A hash embedder under the packaged model's id: constant_vectors caches its vectors."""

    model_id = DEFAULT_MODEL_ID


def _bad_modes(*roots: Path) -> list[str]:
    bad = []
    for root in roots:
        for path in [root, *root.rglob("*")]:
            mode = stat.S_IMODE(path.lstat().st_mode)
            want = 0o700 if path.is_dir() else 0o600
            if mode != want:
                bad.append(f"{path.relative_to(root.parent)}: {mode:o}")
    return bad


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_a_realistic_session_writes_only_owner_only_files(tmp_path, monkeypatch, umask_022):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)  # the user's own: kept as it is
    monkeypatch.setenv("HOME", str(home))
    config_home = tmp_path / "xdg-config"  # conftest's default config dir: created by init
    state = home / ".local" / "state" / "walrus-mem"
    cache = home / ".cache" / "walrus-mem" / "models"
    monkeypatch.setenv("WALRUS_MEM_STATE_DIR", "~/.local/state/walrus-mem")
    monkeypatch.setenv("WALRUS_MEM_MODEL_CACHE", str(cache))
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    monkeypatch.setenv("WALRUS_MEM_DATA_DIR", "~/agents/shared")
    invoke(["init", "--store", "file"])  # config file + key file

    settings = make_settings(home / "agents" / "shared", config_file=None, agents=AGENTS,
                             heads_file=home / "exchange" / "heads.txt", manifest_every=2,
                             master_key=MASTER_HEX)
    with Memory(settings, embedder=HashEmbedder(64)) as mem:
        facts = mem.remember_many([f"alpha fact {i} about herons" for i in range(6)],
                                  namespace="alpha")
        mem.update(facts.records[0].id, "alpha fact 0 about egrets", namespace="alpha")
        mem.forget(facts.records[1].id, namespace="alpha")
        mem.sync()
        mem.pull(namespace="alpha")
        grant = mem.share([r.id for r in facts.records[2:5]], namespace="alpha",
                          to=mem.keys_for("beta").verify_key)
        mem.accept(grant.reference, namespace="beta")
        assert mem.rotate_key("alpha", delete_old=True).complete
        hooks = MemoryHooks(mem, AGENTS)
        hooks.before_prompt_build("what do you remember about herons?", "agent:alpha:main")
        hooks.capture_now([{"role": "user", "content": "I moved to Lisbon last spring."},
                           {"role": "assistant", "content": "Noted."}], "agent:alpha:main")
        mem.sync()
        holders = list((settings.data_dir / "locks" / "open").iterdir())
        assert holders and _bad_modes(settings.data_dir) == []  # while it is open, too
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", MASTER_HEX)  # the key the session used
    invoke(["--data-dir", str(settings.data_dir), "-n", "alpha", "export",
            "-o", str(home / "alpha.jsonl")])
    constant_vectors(_PackagedModelStandIn(64), ["a prototype", "another one"])
    try:
        import onnx  # noqa: F401

        from walrus_mem._recall import minilm_onnx
    except ImportError:
        pass
    else:
        assert minilm_onnx.cached_model().parent == cache  # the ONNX graph, written once

    # a repair that moves an unreadable catalog aside and salvages it
    catalog = settings.data_dir / "catalog.sqlite3"
    catalog.write_bytes(b"not sqlite at all " * 300)
    for suffix in ("-wal", "-shm"):
        Path(str(catalog) + suffix).unlink(missing_ok=True)
    rebuild, _ = repair_data_dir(settings, embedder=HashEmbedder(64))
    assert rebuild is not None and rebuild.moved_to is not None
    _write_marker(settings.data_dir, [rebuild.moved_to])  # as a killed repair leaves it

    roots = [home / n for n in ("agents", "exchange", ".local", ".cache")] + [config_home]
    assert all(r.exists() for r in roots) and (state / "seen-heads.sqlite3").exists()
    assert any(cache.iterdir()) and (settings.data_dir / "relayer").is_dir()
    assert stat.S_IMODE(home.stat().st_mode) == 0o755  # never chmod-ed
    assert _bad_modes(*roots) == []


def test_every_path_setting_expands_tilde_and_variables(tmp_path, monkeypatch):
    from walrus_mem._recall.embeddings import SentenceTransformerEmbedder, model_cache_dir
    from walrus_mem.config import Settings

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("WM_SHARE", str(tmp_path / "share"))
    monkeypatch.delenv("WALRUS_MEM_STATE_DIR")
    (home / "wm.toml").write_text('heads_file = "$WM_SHARE/heads.txt"\n'
                                  'state_dir = "~/state"\n', encoding="utf-8")
    monkeypatch.setenv("WALRUS_MEM_CONFIG", "~/wm.toml")  # e.g. a systemd unit: no shell
    settings = Settings.load()
    assert settings.config_file == home / "wm.toml"
    assert settings.heads_file == tmp_path / "share" / "heads.txt"
    assert settings.state_dir == home / "state"
    monkeypatch.setenv("WALRUS_MEM_HEADS_FILE", "~/h.txt")
    assert Settings.load().heads_file == home / "h.txt"
    assert Settings.load(config_file="~/wm.toml").state_dir == home / "state"
    monkeypatch.setenv("WALRUS_MEM_MODEL_CACHE", "$WM_SHARE/models")
    assert model_cache_dir() == tmp_path / "share" / "models"
    (tmp_path / "share" / "my-model").mkdir(parents=True)
    local = SentenceTransformerEmbedder("$WM_SHARE/my-model")
    assert local.model_id == "local/my-model"
