"""Shared fixtures. Autouse ones keep every test off the user's real state:
a temp data dir, a clean WALRUS_MEM_* environment, and an in-memory keyring."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import keyring
import pytest
from keyring.backend import KeyringBackend

from walrus_mem.testing import HashEmbedder


class MemoryKeyring(KeyringBackend):
    """In-memory keyring backend (the real one is unusable on headless CI)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.store.pop((service, username), None)


def pytest_configure(config: pytest.Config) -> None:
    """Keep session- and module-scoped fixtures off the real per-user state dir
    (walrus_mem._log.heads_mirror) too: each test then gets its own (clean_environ)."""
    state = Path(tempfile.mkdtemp(prefix="walrus-mem-test-state-"))
    config.add_cleanup(lambda: shutil.rmtree(state, ignore_errors=True))
    # No test writes the real home (issue 27): HOME (what platformdirs and "~" fall back
    # to, here and in subprocesses) and WALRUS_MEM_HOME (stripped per test by
    # clean_environ, so it covers collection and session fixtures) are temp dirs.
    saved = {name: os.environ.get(name) for name in ("HOME", "WALRUS_MEM_HOME")}
    config.add_cleanup(lambda: _restore_environ(saved))
    (state / "home").mkdir()
    os.environ["HOME"] = str(state / "home")
    os.environ["WALRUS_MEM_HOME"] = str(state / "walrus-mem-home")
    os.environ["WALRUS_MEM_STATE_DIR"] = str(state / "walrus-mem")
    os.environ["XDG_STATE_HOME"] = str(state)
    # Derived model files (ONNX graph, prototype vectors): one cache for the session,
    # never the user's (clean_environ puts it back after stripping WALRUS_MEM_*).
    os.environ["WALRUS_MEM_MODEL_CACHE"] = _MODEL_CACHE[0] = str(state / "model-cache")


_MODEL_CACHE = [""]


def _restore_environ(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value

# The quick tier (`make check` = `pytest -m "not slow"`) leaves these out; `make test`
# runs everything. One table, so what is slow is decided in one place: whole files
# (stateful, stress, fuzz, real HTTP servers and processes, benchmarks run as tests),
# single tests measured at 1.5 s or more on these 2 cores, and every test of the real
# model (`model`).
SLOW_FILES: Final = frozenset({
    "test_namespace_log_stateful.py", "test_log_features_stateful.py",
    "test_features_replayed.py",
    "test_bad_input.py", "test_isolation.py", "test_secrets_leak.py",
    "test_walrus_client_fuzz.py", "test_index_fuzz.py",
    "test_relayer_mock_server.py", "test_walrus_integration.py", "test_memory_processes.py",
    "test_bench_locomo.py", "test_extract_locomo.py",
    "test_import_cost.py",
})
SLOW_TESTS: Final = frozenset({
    "test_errors_raised_when_a_placeholder_setting_is_used_name_the_placeholder",
    "test_fuzz_errors_never_show_a_placeholder_value",
    "test_walrus_mem_mcp_serves_the_tools_over_stdio", "test_round_trip",
    "test_sync_probes_an_unknown_epoch_and_never_lists_an_expired_blob",
    "test_a_forget_on_an_unknown_epoch_leaves_the_manifest_to_sync",
    "test_expiring_says_the_epoch_is_unknown_instead_of_answering_0",
    "test_sync_renews_expired_blobs_so_no_manifest_lists_them",
    "test_expiring_counts_without_the_mock_admin_routes",
    "test_forget_while_sync_is_storing_the_memory_deletes_what_got_published",
    "test_forget_keeps_a_quilt_that_a_known_manifest_lists_a_live_memory_in",
    "test_a_forgotten_head_whose_manifest_is_gone_does_not_block_sync",
    "test_every_build_of_a_batch_is_the_same_graph_and_reaches_every_memory",
    "test_whole_text_is_scanned_without_a_window",
    "test_a_head_past_its_end_epoch_is_still_recorded_gone",
    "test_a_resumed_restore_through_a_404ing_aggregator_stays_incomplete",
    "test_a_mistyped_digest_blames_the_reference_not_the_aggregator",
    "test_stdio_server_with_sdk_client",
    "test_the_server_imports_only_the_low_level_sdk_and_the_rest_stays_reachable",
    "test_read_only_server", "test_manifest_pages_are_reused_when_unchanged",
    "test_batch_manifest_is_one_store_call", "test_restore_rebuilds_everything_from_walrus_alone",
    "test_aggregator_serving_an_older_manifest_is_a_typed_error",
    "test_interrupted_restore_is_marked_refuses_to_publish_and_resumes",
    "test_corrupt_page_cache_is_checked_before_reuse", "test_restore_killed_with_sigkill_resumes",
    "test_stale_backup_merges_the_newer_head_before_publishing",
    "test_another_writers_unreadable_entry_never_stops_this_machine_publishing",
    "test_a_batch_refused_for_good_is_split_then_poisoned_and_manifests_go_on",
    "test_a_transient_aggregator_error_does_not_blacklist_a_head",
    "test_twin_merges_do_not_depend_on_pull_order",
    "test_a_memory_whose_blob_answered_404_is_carried_forward_and_retried",
    "test_a_heads_file_line_that_cannot_be_merged_does_not_block_sync",
    "test_a_wall_clock_ahead_during_the_first_stores_does_not_break_the_epoch_length",
    "test_renewed_counts_the_memories_stored_again",
    "test_extend_replaces_a_location_the_network_lost",
    "test_fuse_arrays_gives_the_plain_formulas_floats_and_fused_order_its_order",
    "test_doctor_and_repair_end_to_end_through_the_cli",
    "test_a_repair_killed_mid_restore_salvages_the_moved_aside_file_next_time",
    "test_repair_rebuilds_rotted_text_from_the_sealed_copy_and_never_publishes_it",
    "test_repair_keeps_a_forget_that_only_the_damaged_catalog_knew",
    "test_a_memory_cannot_open_the_data_dir_while_a_repair_holds_it",
    "test_a_failed_restore_of_a_rotated_namespace_registers_nothing",
    "test_doctor_calls_a_running_pull_running_not_an_interrupted_restore",
    "test_a_pull_that_ends_while_sync_looks_at_its_mark_is_not_an_interrupted_restore",
    "test_pending_entries_follow_a_rotation_on_both_machines",
    "test_locomo_dialogue_is_not_flagged", "test_huge_input_is_scanned_everywhere",
    "test_stored_text_cannot_close_or_forge_the_block", "test_mock_admin_probe_is_bounded_too",
    "test_peak_rss_stays_bounded_against_huge_answers", "test_memory_calls_against_drips",
    "test_huge_bodies_are_cut_off_typed", "test_no_fact_stays_published_after_sync",
    "test_unknown_model_fails_offline_with_embedding_error",
    "test_a_cli_session_writes_only_under_walrus_mem_home",
    "test_the_onnxruntime_path_writes_nothing_in_home",
    # README's and docs' commands replayed in a bash session per page (about 8 s and 20 s)
    "test_the_page_replays_in_a_fresh_home",
    # 60 KB facts by the hundred through a capped relayer_mock (about 20 s each)
    "test_a_413_halves_the_batch_and_the_learned_cap_survives_a_new_process",
    "test_200_facts_of_60kb_under_a_10_mib_cap_go_as_a_few_quilts",
    # another network behind the endpoints: on three profiles (about 2-3.5 s each), the
    # CLI's doctor twice after a change of system object, python -m relayer_mock
    "test_a_different_network_ahead_is_healed_by_one_sync",
    "test_a_changed_system_object_is_followed_and_named_by_doctor",
    "test_python_m_relayer_mock_serves_the_metrics_gauge",
})


# `make test` hands whole files to two xdist workers (--dist loadfile) in collection order
# (--no-loadscope-reorder: xdist's own reorder sends the files with the most tests first,
# which left the two stateful files, one test each and minutes long, for the end of the
# run, on one worker). The longest files go first so the two workers end together:
# seconds each took in one full run (session 18, 2 cores under load).
HEAVY_FILES: Final = {
    "test_features_replayed.py": 550, "test_log_features_stateful.py": 290,
    "test_fuzz.py": 230, "test_namespace_log_stateful.py": 180, "test_crashes.py": 150,
    "test_faults.py": 130, "test_walrus_publisher_limits.py": 95,
    "test_network_reset.py": 70, "test_concurrency.py": 55, "test_log_transient_404.py": 55,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: -HEAVY_FILES.get(item.path.name, 0))  # stable: files stay whole
    slow = pytest.mark.slow
    for item in items:
        name = getattr(item, "originalname", None) or item.name.split("[")[0]
        if (item.path.name in SLOW_FILES or name in SLOW_TESTS
                or item.get_closest_marker("model") is not None):
            item.add_marker(slow)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Strip WALRUS_MEM_* and proxy vars; point the data dir and the per-user state dir
    (seen-heads mirror) at temp dirs of this test, so tests never see each other's."""
    for name in list(os.environ):
        if name.startswith("WALRUS_MEM_") or name.lower() in {
            "http_proxy", "https_proxy", "all_proxy", "no_proxy"
        }:
            monkeypatch.delenv(name, raising=False)
    data_dir = tmp_path / "walrus-data"
    monkeypatch.setenv("WALRUS_MEM_DATA_DIR", str(data_dir))
    monkeypatch.setenv("WALRUS_MEM_STATE_DIR", str(tmp_path / "walrus-state"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    if _MODEL_CACHE[0]:
        monkeypatch.setenv("WALRUS_MEM_MODEL_CACHE", _MODEL_CACHE[0])
    yield data_dir


@pytest.fixture(autouse=True)
def memory_keyring() -> Iterator[MemoryKeyring]:
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


@pytest.fixture
def fake_embedder() -> HashEmbedder:
    return HashEmbedder(dim=64)


@pytest.fixture
def master_hex() -> str:
    """A fixed, test-only master key (the keys/ test vector seed)."""
    return "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"


@pytest.fixture(scope="session")
def real_embedder():
    """The real all-MiniLM-L6-v2 embedder, loaded once per session (mark users `model`)."""
    from walrus_mem._recall.embeddings import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    embedder.embed(["warm up"])
    return embedder


# Memory-engine fixtures (mem_dir, mem_settings, mem): defined in tests/helpers_memory.py.
from tests.helpers_memory import mem, mem_dir, mem_settings  # noqa: E402, F401


@pytest.fixture(autouse=True)
def isolated_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings (so Memory()) and the CLI read <user config dir>/walrus-mem/config.toml
    when nothing names another file: keep the developer's out. XDG_CONFIG_HOME covers
    subprocesses (on Linux); patching default_config_path covers every platform
    in-process (platformdirs ignores XDG on macOS and Windows)."""
    config_home = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))

    def temp_default_config_path() -> Path:
        return config_home / "walrus-mem" / "config.toml"

    # cli imports the name, so both bindings are patched.
    for target in ("walrus_mem.config.default_config_path",
                   "walrus_mem._cli.main.default_config_path"):
        monkeypatch.setattr(target, temp_default_config_path)


# Hypothesis: the same examples on every run and no per-example deadline, so a
# property test cannot fail by chance on a slow shared machine (the default
# 200 ms deadline and fresh random examples each run could). This is what
# Hypothesis already does under CI=true (its "ci" profile); here it holds for
# local runs too. HYPOTHESIS_PROFILE=explore draws new random examples.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "deterministic", derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("explore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))
