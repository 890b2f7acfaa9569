"""Issue 23, items 16, 17, 18b, 18c and the two undecided points.

* 16: a password inside a publisher/aggregator URL (``https://user:pw@host``) is sent
  as HTTP basic auth and shown nowhere: not in sync errors, the catalog's
  ``outbox.last_error``, ``doctor`` and its curl line, ``-vv`` logs, reprs.
* 17: ``export -o`` onto an existing file or symlink: a fresh 0600 file, atomically,
  never written through the link.
* 18b: grant blobs are padded to the envelope's size buckets.
* 18c: path settings expand ``$VAR`` exactly once.
* core dumps are off in the CLI (and so the MCP server it starts), not on import.
* ``keys import`` reads from a terminal without echo; a pipe still works.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_cli import invoke
from tests.helpers_log import machine
from tests.helpers_memory import MASTER_HEX, OTHER_MASTER_HEX
from walrus_mem import Memory, Settings
from walrus_mem._cli.doctor import run_checks
from walrus_mem._memory.grants import GRANT_MAGIC
from walrus_mem.envelope import bucket_size
from walrus_mem.errors import PublisherUnavailable
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import WalrusClient

PASSWORD = "Pw-5ecret-9a7f"  # a test credential
USER = "alice"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _with_userinfo(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{PASSWORD}@")


@pytest.fixture
def server(tmp_path: Path):
    with RelayerServer(tmp_path / "walrus", admin=False) as srv:
        yield srv


# -- 16: userinfo in endpoint URLs ---------------------------------------------------


def test_userinfo_becomes_basic_auth_and_leaves_the_url():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(500, text="boom")

    client = WalrusClient(f"http://{USER}:{PASSWORD}@pub.example",
                          [f"http://{USER}:{PASSWORD}@agg.example"],
                          transport=httpx.MockTransport(handler), publish_deadline=0.3,
                          read_deadline=0.3)
    with client:
        with pytest.raises(PublisherUnavailable) as caught:
            client.store_blob(b"x" * 10)
        status = client.status()
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert seen and all(r.headers["authorization"] == expected for r in seen)
    assert all(PASSWORD not in str(r.url) and "@" not in str(r.url) for r in seen)
    shown = [str(caught.value), repr(client), *status, *client.publisher_urls,
             *client.aggregator_urls, *(str(n) for n in getattr(caught.value, "__notes__", []))]
    assert all(PASSWORD not in text for text in shown), shown


def test_a_password_from_a_variable_is_shown_nowhere(tmp_path, server, monkeypatch, caplog):
    """Over loopback HTTP: a working publisher (basic auth sent, -vv logs clean), then a
    dead one (sync error, outbox.last_error, the CLI's error line and traceback)."""
    monkeypatch.setenv("WM_PUBLISHER", _with_userinfo(server.url))
    config = tmp_path / "wm.toml"
    config.write_text('publisher_url = "${WM_PUBLISHER}"\naggregator_urls = ["${WM_PUBLISHER}"]\n'
                      'embedding_model = "test-hash"\nuse_keyring = false\n', encoding="utf-8")
    monkeypatch.setenv("WALRUS_MEM_CONFIG", str(config))
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", MASTER_HEX)
    caplog.set_level(logging.DEBUG)
    settings = Settings.load()
    assert PASSWORD not in repr(settings) and PASSWORD not in str(settings)
    with Memory(settings, embedder=HashEmbedder(64)) as mem:
        mem.remember("stored through an authenticated publisher", namespace="n")
        report = mem.sync("n")
        assert report.errors == [] and report.published == 0  # already on Walrus
        assert mem.list("n")[0].status == "published"
    assert "HTTP Request: PUT http://127.0.0.1" in caplog.text  # httpx's -v line, clean

    dead = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("WM_PUBLISHER", _with_userinfo(dead))
    with Memory(Settings.load(publish_deadline=0.5, read_deadline=0.5),
                embedder=HashEmbedder(64)) as mem:
        mem.remember("queued while the publisher is down", namespace="n")
        report = mem.sync("n")
        assert report.errors and report.still_queued
        catalog = mem.catalog_path
    errors = [row[0] for row in sqlite3.connect(catalog).execute(
        "SELECT last_error FROM outbox WHERE last_error IS NOT NULL")]
    assert errors and all(dead.replace("http://", "") in e for e in errors)
    result = invoke(["-vv", "sync"], expect=None)
    shown = [*report.errors, *errors, caplog.text, result.stdout, result.stderr]
    assert all(PASSWORD not in text for text in shown)


def test_doctor_and_its_curl_line_hide_the_password(tmp_path):
    dead = _with_userinfo(f"http://127.0.0.1:{_closed_port()}")
    config = tmp_path / "wm.toml"
    config.write_text(f'publisher_url = "{dead}"\naggregator_urls = ["{dead}"]\n'
                      f'data_dir = "{tmp_path / "d"}"\n', encoding="utf-8")
    checks = run_checks(config, model=False)
    failed = [c for c in checks if c.name in ("publisher", "aggregator")]
    assert failed and all(c.status == "fail" and "curl" in c.fix for c in failed)
    assert all("curl -u USER:PASSWORD http" in c.fix for c in failed)  # where, not what
    assert all(PASSWORD not in f"{c.detail} {c.fix}" for c in checks)
    result = invoke(["--config", str(config), "doctor", "--no-model"], expect=None)
    assert PASSWORD not in result.stdout + result.stderr and "curl" in result.stdout


# -- 17: export -o -----------------------------------------------------------------


def _export_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    invoke(["remember", "a plaintext fact to export"])


def test_export_onto_an_existing_world_readable_file_ends_0600(tmp_path, monkeypatch):
    _export_env(monkeypatch, tmp_path)
    out = tmp_path / "export.jsonl"
    out.write_text("old\n", encoding="utf-8")
    os.chmod(out, 0o644)
    invoke(["export", "-o", str(out)])
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert json.loads(out.read_text(encoding="utf-8"))["text"] == "a plaintext fact to export"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".export")] == []


def test_export_never_writes_through_a_symlink(tmp_path, monkeypatch):
    _export_env(monkeypatch, tmp_path)
    target = tmp_path / "shared" / "public.jsonl"
    target.parent.mkdir()
    target.write_text("", encoding="utf-8")
    os.chmod(target, 0o644)
    link = tmp_path / "export.jsonl"
    link.symlink_to(target)
    invoke(["export", "-o", str(link)])
    assert target.read_text(encoding="utf-8") == ""  # the link's target is untouched
    assert not link.is_symlink() and stat.S_IMODE(link.stat().st_mode) == 0o600
    assert "a plaintext fact to export" in link.read_text(encoding="utf-8")


def test_export_into_a_missing_directory_is_a_clear_error(tmp_path, monkeypatch):
    _export_env(monkeypatch, tmp_path)
    result = invoke(["export", "-o", str(tmp_path / "no" / "such" / "x.jsonl")], expect=1)
    assert "cannot write" in result.stderr and "[InvalidInput]" in result.stderr


# -- 18b: grant blobs padded ----------------------------------------------------------


def test_grant_blobs_are_padded_to_the_envelope_buckets(tmp_path, server):
    sizes = []
    with machine(tmp_path / "a", server.url) as a, \
            machine(tmp_path / "b", server.url, key=OTHER_MASTER_HEX) as b:
        to = b.keys_for("bob").verify_key.hex()
        texts = ["short secret", "a longer secret: the invoice amount is 4,212.50", "x" * 300]
        for text in texts:
            record = a.remember(text, namespace="alice")
            grant = a.share([record.id], to=to, namespace="alice")
            blob = a.walrus.read_blob(grant.blob_id)
            inner = len(blob) - len(GRANT_MAGIC) - 48  # sealed box: ephemeral key + MAC
            assert inner == bucket_size(inner), inner
            sizes.append(len(blob))
            assert b.accept(grant.reference, namespace="bob").stored == 1
        assert sizes[0] == sizes[1]  # 12 and 47 characters: one size
        assert sorted(r.text for r in b.list("bob")) == sorted(texts)


# -- 18c: paths expanded once ---------------------------------------------------------


def test_a_path_setting_expands_a_variable_exactly_once(tmp_path, monkeypatch):
    monkeypatch.setenv("ALICE_KEY", "deadbeefcafe0123")
    monkeypatch.setenv("TENANT", "$ALICE_KEY")
    monkeypatch.setenv("WM_BASE", str(tmp_path))
    config = tmp_path / "wm.toml"
    config.write_text('data_dir = "${WM_BASE}/tenants/${TENANT}"\nstate_dir = "$WM_BASE/st"\n'
                      'embedding_model = "test-hash"\nuse_keyring = false\n', encoding="utf-8")
    monkeypatch.setenv("WALRUS_MEM_CONFIG", str(config))
    monkeypatch.delenv("WALRUS_MEM_DATA_DIR")  # conftest's: it would win over the file
    monkeypatch.delenv("WALRUS_MEM_STATE_DIR")
    settings = Settings.load()
    assert settings.data_dir == tmp_path / "tenants" / "$ALICE_KEY"
    assert settings.state_dir == tmp_path / "st"  # $VAR without braces still expands
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", MASTER_HEX)
    invoke(["remember", "a fact"])
    result = invoke(["stats"])
    assert "deadbeefcafe0123" not in result.stdout + result.stderr
    assert not (tmp_path / "tenants" / "deadbeefcafe0123").exists()
    # from the environment and the command line: once too
    monkeypatch.delenv("WALRUS_MEM_CONFIG")
    monkeypatch.setenv("WALRUS_MEM_DATA_DIR", "${WM_BASE}/${TENANT}")
    assert Settings.load().data_dir == tmp_path / "$ALICE_KEY"
    assert Settings.load(data_dir="$WM_BASE/$TENANT").data_dir == tmp_path / "$ALICE_KEY"
    # the config file's own path (WALRUS_MEM_CONFIG) too
    literal = tmp_path / "$ALICE_KEY"
    literal.mkdir()
    (literal / "wm.toml").write_text('epochs = 7\n', encoding="utf-8")
    monkeypatch.setenv("WALRUS_MEM_CONFIG", "${WM_BASE}/${TENANT}/wm.toml")
    loaded = Settings.load()
    assert loaded.config_file == literal / "wm.toml" and loaded.epochs == 7


def test_an_unset_placeholder_in_a_path_is_still_an_error(tmp_path, monkeypatch):
    from walrus_mem.errors import PlaceholderError

    config = tmp_path / "wm.toml"
    config.write_text('data_dir = "/srv/${WM_NOT_SET}"\n', encoding="utf-8")
    with pytest.raises(PlaceholderError, match="WM_NOT_SET is not set"):
        Settings.load(config_file=config)


# -- core dumps and keys import ---------------------------------------------------------


_PROBE = """
import ctypes, resource, sys
from walrus_mem._cli.main import cli
before = resource.getrlimit(resource.RLIMIT_CORE)[0], ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)
cli.main(sys.argv[1:], prog_name="walrus-mem", standalone_mode=False)
after = resource.getrlimit(resource.RLIMIT_CORE)[0], ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)
print("PROBE", before, after)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_the_cli_turns_core_dumps_off_importing_the_library_does_not(tmp_path):
    import resource

    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    if hard == 0:
        pytest.skip("core dumps are already off for this process tree (hard limit 0)")
    env = {**os.environ, "WALRUS_MEM_EMBEDDING_MODEL": "test-hash",
           "WALRUS_MEM_MASTER_KEY": MASTER_HEX, "WALRUS_MEM_USE_KEYRING": "false"}
    out = subprocess.run(
        [sys.executable, "-c", "import resource; resource.setrlimit(resource.RLIMIT_CORE, "
         "(resource.getrlimit(resource.RLIMIT_CORE)[1],) * 2); exec(open(0).read())",
         "--data-dir", str(tmp_path / "d"), "list"],
        input=_PROBE, capture_output=True, text=True, env=env, timeout=120, check=True)
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("PROBE"))
    assert line == f"PROBE ({hard}, 1) (0, 0)", out.stdout + out.stderr


def test_the_mcp_server_entry_point_turns_them_off_too(monkeypatch):
    from walrus_mem import mcp_server

    calls: list[str] = []
    monkeypatch.setattr(mcp_server, "disable_core_dumps", lambda: calls.append("off"))
    monkeypatch.setattr(mcp_server, "run_stdio", lambda **kw: calls.append("served"))
    assert mcp_server.main([]) == 0 and calls == ["off", "served"]


WORDS = ("abandon " * 23 + "art").strip()  # the all-zero 256-bit BIP39 test vector


def test_keys_import_still_reads_a_pipe(tmp_path, monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_KEY_FILE", str(tmp_path / "k" / "master.key"))
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    result = invoke(["keys", "import", "--store", "file"], input=WORDS + "\n")
    assert "Master key" in result.stdout and WORDS not in result.stdout + result.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pty")
def test_keys_import_does_not_echo_words_typed_in_a_terminal(tmp_path):
    import pty
    import select
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("WALRUS_MEM_")}
    env.update(WALRUS_MEM_KEY_FILE=str(tmp_path / "k" / "master.key"),
               WALRUS_MEM_USE_KEYRING="false", WALRUS_MEM_DATA_DIR=str(tmp_path / "d"),
               WALRUS_MEM_CONFIG=str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("", encoding="utf-8")
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on a terminal
        os.execve(sys.executable, [sys.executable, "-m", "walrus_mem", "keys", "import",
                                   "--store", "file"], env)
    seen = b""

    def read_until(done: str, seconds: float) -> bytes:
        got = b""
        end = time.monotonic() + seconds
        while time.monotonic() < end and done.encode() not in got:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # the child has exited
                    break
                if not chunk:
                    break
                got += chunk
        return got

    try:
        seen += read_until("Key backup", 20.0)  # the prompt (nothing before the fix)
        half = WORDS.split()
        os.write(fd, (" ".join(half[:12]) + "\n").encode())  # pasted as two lines
        seen += read_until("12 of 24", 5.0)
        os.write(fd, (" ".join(half[12:]) + "\n").encode())
        seen += read_until("Master key", 5.0)
        if b"Master key" not in seen:
            os.write(fd, b"\x04")  # EOF, for a reader that waits for it
            seen += read_until("Master key", 20.0)
        seen += read_until("\x00", 1.0)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    text = seen.decode("utf-8", "replace")
    assert "abandon" not in text, text
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert (tmp_path / "k" / "master.key").is_file()


def test_the_heads_file_never_writes_through_a_planted_temp_name(tmp_path):
    """The heads file sits in a shared folder: someone who can write there must not get
    a sync to write through a symlink planted at a predictable temp name."""
    from walrus_mem._log.heads import HeadRef, HeadsFile

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    for pid in range(max(2, os.getpid() - 5), os.getpid() + 5):  # the old name's pattern
        (shared / f"heads.txt.{pid}.tmp").symlink_to(victim)
    heads = HeadsFile(shared / "heads.txt")
    heads.replace("ns", HeadRef(1, "A" * 43, "0" * 64), [])
    assert victim.read_text() == "untouched\n"
    assert [ns for ns, _ in heads.read()] == ["ns"]
    assert stat.S_IMODE((shared / "heads.txt").stat().st_mode) == 0o600
    assert not [p for p in shared.iterdir() if p.name.startswith(".heads.txt.")]


def test_disable_core_dumps_is_reachable_from_the_public_keys_module():
    # docs/security.md tells host applications to call it from walrus_mem.keys.
    import walrus_mem.keys
    from walrus_mem._keys import hardening

    assert walrus_mem.keys.disable_core_dumps is hardening.disable_core_dumps
    assert "disable_core_dumps" in walrus_mem.keys.__all__
