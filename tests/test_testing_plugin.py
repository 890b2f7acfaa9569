"""The pytest plugin for users' suites (issue 27 item 7); examples/test_my_agent.py uses
it as a user would, these check what it promises."""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from walrus_mem.testing import HashEmbedder


def test_the_plugin_is_registered_for_pytest():
    (plugin,) = [ep for ep in entry_points(group="pytest11") if ep.name == "walrus_mem"]
    assert plugin.value == "walrus_mem._testing.pytest_plugin"


def test_walrus_memory_keeps_everything_under_tmp_path(walrus_memory, tmp_path):
    settings = walrus_memory.settings
    for path in (settings.data_dir, settings.state_dir, settings.resolved_key_file):
        assert Path(path).is_relative_to(tmp_path), path
    assert settings.use_keyring is False and settings.embedded
    assert Path(os.environ["WALRUS_MEM_HOME"]).is_relative_to(tmp_path)
    assert isinstance(walrus_memory.embedder, HashEmbedder)
    fact = walrus_memory.remember("I'm allergic to peanuts")
    assert fact.status == "published"
    assert [h.text for h in walrus_memory.recall("peanuts", min_score=0.0)] == [fact.text]


def test_walrus_home_drops_the_users_settings(monkeypatch, request):
    monkeypatch.setenv("WALRUS_MEM_PUBLISHER_URL", "https://example.invalid")
    request.getfixturevalue("walrus_home")
    assert "WALRUS_MEM_PUBLISHER_URL" not in os.environ


def test_walrus_agents_hold_independent_keys(walrus_agents):
    alice, bob = walrus_agents["alice"], walrus_agents["bob"]
    carol = walrus_agents.add("carol")
    assert list(walrus_agents) == ["alice", "bob", "carol"] and len(walrus_agents) == 3
    for mem in (alice, bob, carol):
        mem.remember("a fact")  # in the agent's own namespace
    prints = {mem.stats().key_fingerprint for mem in (alice, bob, carol)}
    assert len(prints) == 3 and None not in prints
    assert alice.data_dir != bob.data_dir
    with pytest.raises(ValueError, match="exists already"):
        walrus_agents.add("bob")


def test_walrus_relayer_serves_http_on_loopback_with_fault_knobs(walrus_relayer):
    import httpx

    assert walrus_relayer.url.startswith("http://127.0.0.1:")
    assert httpx.get(f"{walrus_relayer.url}/status").status_code == 200
    walrus_relayer.faults(probabilities={"503": 1.0})
    assert httpx.put(f"{walrus_relayer.url}/v1/blobs", content=b"x").status_code == 503
    assert walrus_relayer.fault_log[-1]["kind"] == "503"
    walrus_relayer.faults()
    assert httpx.put(f"{walrus_relayer.url}/v1/blobs", content=b"x").status_code == 200


@pytest.mark.walrus_relayer(initial_epoch=7)
def test_the_marker_passes_app_options(walrus_relayer):
    assert walrus_relayer.server.relayer.store.current_epoch() == 7


def test_loading_the_plugin_does_not_import_the_engine() -> None:
    """pytest loads the plugin in every project with walrus-mem installed: `import
    walrus_mem` is lazy (PEP 562), so that costs the error classes, not the engine."""
    import subprocess
    import sys

    code = ("import sys, walrus_mem._testing.pytest_plugin, walrus_mem\n"
            "heavy = ['walrus_mem.memory', 'walrus_mem.config', 'numpy', 'httpx', 'pydantic']\n"
            "print([m for m in heavy if m in sys.modules])\n"
            "assert walrus_mem.Memory.__module__ == 'walrus_mem.memory'\n"
            "print('walrus_mem.memory' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "True", out


@pytest.mark.walrus_relayer(profile="testnet")
def test_the_testnet_profile_through_the_fixture(walrus_relayer):
    """The marker's profile answers as Testnet (10 MiB cap, null certifiedEpoch, a
    404 window after a store, store latency) at 1/20 of its times, and an agent's
    Memory remembers, syncs and restores through it."""
    import httpx

    assert walrus_relayer.profile == "testnet"
    too_big = httpx.put(f"{walrus_relayer.url}/v1/blobs", content=b"x" * (10 * 2**20 + 1),
                        timeout=30)
    assert too_big.status_code == 413
    stored = httpx.put(f"{walrus_relayer.url}/v1/blobs", content=b"x", timeout=30).json()
    assert stored["newlyCreated"]["blobObject"]["certifiedEpoch"] is None

    from walrus_mem.keys import generate_master_seed

    seed = generate_master_seed()
    laptop = walrus_relayer.memory("laptop", master_key=seed)
    fact = laptop.remember("I'm allergic to peanuts")
    assert laptop.get(fact.id).status == "published"
    head = laptop.sync().manifests["default"]
    desktop = walrus_relayer.memory("desktop", master_key=seed)
    assert desktop.restore("default", head).restored == 1
    assert [r.text for r in desktop.list("default")] == ["I'm allergic to peanuts"]
