"""Bad input: every case gives its typed error with a clear message; the data dir is unchanged.

Each case runs on a private copy of one prepared data dir (two namespaces with
published memories and manifests, one namespace with a queued memory). The
input damage of a case (a corrupt file, a config file, loose permissions) is
applied *before* the first snapshot; then the case runs, its Memory is closed,
and a second snapshot must equal the first.

What a snapshot compares, and why:

* every SQLite file (catalog, relayer index) as a **logical dump**: schema and
  every row of every table, in key order. Raw bytes are the wrong test: opening a
  WAL database may checkpoint the ``-wal`` file into the main file, changing
  bytes without changing one row. A file that does not open as SQLite is
  compared by raw bytes (it must not be "repaired" or recreated).
* every other file (USearch index, its metadata, key files, relayer blob files)
  by SHA-256; every file's permission bits; the set of file names;
* not compared: ``*-wal`` / ``*-shm`` (SQLite's journal, covered by the dump),
  ``*.lock`` (filelock's lock files, empty), and the relayer's ``counters``
  table (request metrics: the failed request itself is counted there).

Two kinds of case legitimately change something, and say so in their row:
``outbox`` cases (a failed publish records ``attempts`` / ``last_error`` on its
outbox batch: those two columns are masked) and ``index`` cases (a corrupt index
is not an error but is rebuilt from the catalog, with a warning: the index
files are excluded, the catalog must be unchanged).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.stress.helpers import (
    EMBED_DIM,
    MASTER_HEX,
    make_facts,
    open_memory,
    relayer_blobs,
    settings_for,
    write_figures,
)
from walrus_mem import errors as E
from walrus_mem._recall.index import VERIFIED_KEY, index_file_stem
from walrus_mem.config import Settings
from walrus_mem.keys import MasterSeed, write_key_file
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import WalrusClient

PUBLISHER = "http://publisher.test"
AGGREGATOR = "http://aggregator.test"
OTHER_MASTER = "ff" * 32


@dataclass
class Base:
    """The prepared data dir and what is in it."""

    path: Path
    alpha: list[str]  # ids; alpha[0] is a single blob, alpha[-1] in a quilt
    beta: list[str]
    gamma_queued: str
    manifests: dict[str, str]
    blob_of: dict[str, str]  # memory id -> blob id
    blobs: dict[str, bytes]  # relayer blob id -> bytes


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    path = tmp_path_factory.mktemp("bad-input") / "data"
    facts = make_facts(12, seed=99)
    mem = open_memory(path)
    try:
        alpha = [mem.remember(t, namespace="alpha").id for t in facts[:4]]
        alpha += [r.id for r in mem.remember_many(facts[4:8], namespace="alpha").records]
        beta = [mem.remember(t, namespace="beta").id for t in facts[8:10]]
        mem.recall(facts[0], namespace="alpha")  # an index file exists
        report = mem.sync()
        assert report.still_queued == 0
        blob_of = {r.id: str(r.blob_id) for ns in ("alpha", "beta") for r in mem.list(ns)}
    finally:
        mem.close()
    down = open_memory(path, publisher_url="http://127.0.0.1:9",
                       aggregator_urls=["http://127.0.0.1:9"])
    try:  # a refused port: the memory stays queued in the outbox
        gamma = down.remember(facts[10], namespace="gamma")
        assert gamma.status == "queued"
    finally:
        down.close()
    return Base(path, alpha, beta, gamma.id, report.manifests, blob_of,
                relayer_blobs(path / "relayer"))


# -- snapshots -----------------------------------------------------------------------------


def _dump(path: Path, *, mask_outbox: bool, skip_index: bool = False) -> str:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            lines = []
            tables = con.execute(
                "SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index') "
                "ORDER BY name").fetchall()
            for name, sql in tables:
                lines.append(f"schema {name}: {sql}")
                if sql is None or not sql.startswith("CREATE TABLE") or name == "counters":
                    continue
                columns = [c[1] for c in con.execute(f'PRAGMA table_info("{name}")')]
                if mask_outbox and name == "outbox":
                    columns = [c for c in columns if c not in ("attempts", "last_error")]
                select = ", ".join(f'"{c}"' for c in columns)
                for row in con.execute(f'SELECT {select} FROM "{name}" ORDER BY 1'):
                    if skip_index and name == "meta" and str(row[0]).startswith(VERIFIED_KEY):
                        continue  # the index's own checksum record: part of the index
                    lines.append(f"{name}: {row!r}")
            return hashlib.sha256("\n".join(lines).encode()).hexdigest()
        finally:
            con.close()
    except sqlite3.DatabaseError:
        return "raw:" + hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(root: Path, *, mask_outbox: bool = False, skip_index: bool = False
             ) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_dir() or rel.endswith(("-wal", "-shm", ".lock")):
            continue
        if skip_index and rel.startswith("index" + os.sep):
            continue
        if p.suffix == ".sqlite3":
            content = _dump(p, mask_outbox=mask_outbox, skip_index=skip_index)
        else:
            content = hashlib.sha256(p.read_bytes()).hexdigest()
        out[rel] = f"{content} {p.stat().st_mode:o}"
    return out


# -- the cases -----------------------------------------------------------------------------


@dataclass
class Ctx:
    data: Path
    base: Base
    tmp: Path
    caplog: pytest.LogCaptureFixture
    master: str = MASTER_HEX

    def memory(self, **overrides: Any) -> Memory:
        return Memory(settings_for(self.data, **overrides), embedder=HashEmbedder(dim=EMBED_DIM),
                      master_key=self.master)

    def mocked(self, handler: Callable[[httpx.Request], httpx.Response]) -> Memory:
        """A Memory whose Walrus client talks to ``handler`` (publisher and aggregator)."""
        client = WalrusClient(PUBLISHER, [AGGREGATOR], transport=httpx.MockTransport(handler),
                              publish_deadline=1.0, read_deadline=1.0)
        settings = settings_for(self.data, publisher_url=PUBLISHER, aggregator_urls=[AGGREGATOR],
                                publish_deadline=1.0, read_deadline=1.0)
        return Memory(settings, embedder=HashEmbedder(dim=EMBED_DIM), master_key=MASTER_HEX,
                      walrus=client)


def _with(ctx: Ctx, action: Callable[[Memory], Any]) -> Any:
    mem = ctx.memory()
    try:
        return action(mem)
    finally:
        mem.close()


def _mocked(ctx: Ctx, handler: Callable[[httpx.Request], httpx.Response],
            action: Callable[[Memory], Any]) -> Any:
    mem = ctx.mocked(handler)
    try:
        return action(mem)
    finally:
        mem.close()


def _serve(transform: Callable[[bytes], httpx.Response]
           ) -> Callable[[Ctx], Callable[[httpx.Request], httpx.Response]]:
    """An aggregator that answers every blob read with ``transform(real bytes)``."""
    def make(ctx: Ctx) -> Callable[[httpx.Request], httpx.Response]:
        def handler(request: httpx.Request) -> httpx.Response:
            blob_id = request.url.path.rsplit("/", 1)[-1]
            return transform(ctx.base.blobs[blob_id])
        return handler
    return make


def _verify_alpha0(ctx: Ctx, make: Callable[[Ctx], Callable[[httpx.Request], httpx.Response]]
                   ) -> None:
    _mocked(ctx, make(ctx), lambda m: m.get(ctx.base.alpha[0], namespace="alpha", verify=True))


def _publisher(status: int, body: bytes, headers: dict[str, str] | None = None
               ) -> Callable[[Ctx], None]:
    """Sync the queued memory against a publisher that always answers ``status``/``body``."""
    def run(ctx: Ctx) -> None:
        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(status, content=body, headers=headers or {})

        report = _mocked(ctx, handler, lambda m: m.sync())
        assert report.still_queued == 1
        # The same publisher also refuses the one small store that reads an unknown epoch,
        # so every namespace's manifest waits, each saying why (docs/reliability.md#expiry).
        batch, *rest = report.errors
        assert all(e.startswith("epoch probe: ") or "epoch is unknown" in e for e in rest), rest
        assert any(e.startswith("epoch probe: ") for e in rest), rest
        raise _Reported(batch)
    return run


class _Reported(Exception):
    """sync() reports storage errors instead of raising: the report's text, re-raised here."""


def _config(text: str) -> Callable[[Ctx], Any]:
    def run(ctx: Ctx) -> Any:
        path = ctx.tmp / "walrus-mem.toml"
        path.write_text(text)
        return Settings.load(config_file=path, data_dir=ctx.data)
    return run


def _write_garbage(rel: str, *, keep: int | None = None, data: bytes | None = None
                   ) -> Callable[[Ctx], None]:
    def prepare(ctx: Ctx) -> None:
        path = ctx.data / rel
        original = path.read_bytes()
        if data is not None:
            path.write_bytes(data)
        else:
            assert keep is not None
            path.write_bytes(original[:keep])
        for suffix in ("-wal", "-shm"):  # a corrupt main file, no journal to mend it
            Path(str(path) + suffix).unlink(missing_ok=True)
    return prepare


def _loose_key_file(ctx: Ctx) -> None:
    path = ctx.tmp / "keys" / "master.key"
    write_key_file(path, MasterSeed.from_hex(MASTER_HEX))
    path.chmod(0o644)


def _from_loose_key_file(ctx: Ctx) -> None:
    settings = settings_for(ctx.data, key_file=ctx.tmp / "keys" / "master.key")
    mem = Memory(settings, embedder=HashEmbedder(dim=EMBED_DIM))
    try:
        mem.remember("a perfectly good fact", namespace="alpha")
    finally:
        mem.close()


def _other_model(ctx: Ctx, action: Callable[[Memory], Any]) -> None:
    mem = Memory(settings_for(ctx.data), embedder=HashEmbedder(dim=EMBED_DIM // 2),
                 master_key=MASTER_HEX)
    try:
        action(mem)
    finally:
        mem.close()


def _index_rel() -> str:
    return f"index/{index_file_stem('alpha')}.usearch"


def _recall_after_rebuild(ctx: Ctx) -> None:
    with ctx.caplog.at_level(logging.WARNING, logger="walrus_mem._recall.index"):
        hits = _with(ctx, lambda m: m.recall(make_facts(12, seed=99)[0], namespace="alpha"))
    assert hits and hits[0].id == ctx.base.alpha[0]
    warnings = [r.getMessage() for r in ctx.caplog.records if r.name == "walrus_mem._recall.index"]
    assert any("rebuild" in w for w in warnings), warnings
    raise _Reported("; ".join(warnings))


@dataclass
class Case:
    name: str
    run: Callable[[Ctx], Any]
    error: type[BaseException]
    phrase: str
    prepare: Callable[[Ctx], None] | None = None
    changes: str = ""  # "" | "outbox" | "index": what may legitimately change
    master: str = MASTER_HEX
    reported_as: str = ""  # how the API reports it when it does not raise


UNKNOWN_ID = "0" * 32
CASES = [
    Case("empty text", lambda c: _with(c, lambda m: m.remember("", namespace="alpha")),
         E.InvalidInput, "empty"),
    Case("whitespace-only text",
         lambda c: _with(c, lambda m: m.remember(" \n\t\u3000 ", namespace="alpha")),
         E.InvalidInput, "only whitespace"),
    Case("oversized text", lambda c: _with(
        c, lambda m: m.remember("x" * (m.settings.max_fact_bytes + 1), namespace="alpha")),
         E.PayloadTooLarge, "limit is"),
    Case("non-UTF-8 bytes", lambda c: _with(c, lambda m: m.remember(b"caf\xe9 \xff",
                                                                     namespace="alpha")),
         E.InvalidInput, "not valid UTF-8"),
    Case("lone surrogate", lambda c: _with(c, lambda m: m.remember("bad \ud800 text",
                                                                    namespace="alpha")),
         E.InvalidInput, "surrogates"),
    Case("text not a string", lambda c: _with(c, lambda m: m.remember(42, namespace="alpha")),
         E.InvalidInput, "must be a string"),
    Case("empty item in remember_many", lambda c: _with(
        c, lambda m: _raise_failed(m.remember_many(["  "], namespace="alpha"))),
         _Reported, "InvalidInput: text is empty",
         reported_as="RememberManyResult.failed: InvalidInput"),
    Case("invalid namespace (path)", lambda c: _with(
        c, lambda m: m.remember("fine fact", namespace="../etc")), E.InvalidNamespace, "namespace"),
    Case("invalid namespace (empty)", lambda c: _with(
        c, lambda m: m.recall("fine query", namespace="")), E.InvalidNamespace, "namespace"),
    Case("invalid namespace (space)", lambda c: _with(
        c, lambda m: m.list("two words")), E.InvalidNamespace, "namespace"),
    Case("unset ${VAR} in config", _config('publisher_url = "${WALRUS_STRESS_UNSET_VAR}"\n'),
         E.PlaceholderError, "WALRUS_STRESS_UNSET_VAR"),
    Case("malformed config TOML", _config("epochs = = 3\n[agents\n"), E.ConfigError,
         "not valid TOML"),
    Case("config value out of range", _config("epochs = 99\n"), E.ConfigError, "epochs"),
    Case("unknown config key", _config("publisher = 'http://x'\n"), E.ConfigError, "publisher"),
    Case("malformed agent key in config", _config('[agents.writer]\nkey = "zz-not-a-key"\n'),
         E.ConfigError, "agents.writer.key"),
    Case("wrong master key", lambda c: _with(
        c, lambda m: m.remember("fine fact", namespace="alpha")), E.KeyMaterialError,
         "was created with key", master=OTHER_MASTER),
    Case("malformed master key", lambda c: _with(
        c, lambda m: m.remember("fine fact", namespace="alpha")), E.MalformedKey, "hex",
         master="not-hex-at-all"),
    Case("key file with loose permissions", _from_loose_key_file, E.InsecureKeyFile,
         "accessible by group or others", prepare=_loose_key_file),
    Case("unknown id (get)", lambda c: _with(c, lambda m: m.get(UNKNOWN_ID, namespace="alpha")),
         E.MemoryNotFound, "no memory"),
    Case("unknown id (forget)", lambda c: _with(
        c, lambda m: m.forget(UNKNOWN_ID, namespace="alpha")), E.MemoryNotFound, "no memory"),
    Case("unknown id (update)", lambda c: _with(
        c, lambda m: m.update(UNKNOWN_ID, "new text", namespace="alpha")),
         E.MemoryNotFound, "no memory"),
    Case("id of another namespace", lambda c: _with(
        c, lambda m: m.get(c.base.beta[0], namespace="alpha")), E.MemoryNotFound, "no memory"),
    Case("malformed id", lambda c: _with(c, lambda m: m.get("../../etc", namespace="alpha")),
         E.InvalidInput, "32 lowercase hex"),
    Case("model mismatch (remember)", lambda c: _other_model(
        c, lambda m: m.remember("fine fact", namespace="alpha")), E.ModelMismatch, "reindex"),
    Case("model mismatch (recall)", lambda c: _other_model(
        c, lambda m: m.recall("fine query", namespace="alpha")), E.ModelMismatch, "reindex"),
    Case("bad filter operator", lambda c: _with(c, lambda m: m.recall(
        "fine query", namespace="alpha", filters={"category": {"$regex": ".*"}})),
         E.InvalidInput, "regex"),
    Case("k out of range", lambda c: _with(c, lambda m: m.recall("q", namespace="alpha", k=0)),
         E.InvalidInput, "k must be"),
    Case("metadata not JSON", lambda c: _with(c, lambda m: m.remember(
        "fine fact", namespace="alpha", metadata={"when": {1, 2}})), E.InvalidInput, "JSON"),
    Case("importance out of range", lambda c: _with(c, lambda m: m.remember(
        "fine fact", namespace="alpha", importance=1.5)), E.InvalidInput, "between 0 and 1"),
    Case("expiry in the past", lambda c: _with(c, lambda m: m.remember(
        "fine fact", namespace="alpha", expires_at="2001-01-01")), E.InvalidInput, "past"),
    Case("forget_all without confirm", lambda c: _with(c, lambda m: m.forget_all("alpha")),
         E.InvalidInput, "confirm=True"),
    Case("corrupt catalog (garbage)", lambda c: c.memory(), E.CatalogCorrupt, "left untouched",
         prepare=_write_garbage("catalog.sqlite3", data=b"this is not a database " * 200)),
    Case("corrupt catalog (truncated)", lambda c: _with(
        c, lambda m: m.list("alpha")), E.CatalogCorrupt, "not a usable SQLite database",
         prepare=_write_garbage("catalog.sqlite3", keep=4096 + 100)),
    Case("corrupt index file", _recall_after_rebuild, _Reported, "rebuilding",
         prepare=_write_garbage(_index_rel(), data=b"\x00garbage" * 64), changes="index",
         reported_as="rebuilt from the catalog, warning logged"),
    Case("truncated blob", lambda c: _verify_alpha0(c, _serve(
        lambda b: httpx.Response(200, content=b[: len(b) // 2]))),
         E.VerificationFailed, "failed verification: InvalidEnvelope"),
    Case("tampered blob", lambda c: _verify_alpha0(c, _serve(
        lambda b: httpx.Response(200, content=b[:-40] + bytes(x ^ 1 for x in b[-40:])))),
         E.VerificationFailed, "failed verification: TamperedBlob"),
    Case("blob from another namespace", lambda c: _verify_alpha0(c, lambda ctx: (
        lambda request: httpx.Response(200, content=ctx.base.blobs[
            ctx.base.blob_of[ctx.base.beta[0]]]))),
         E.VerificationFailed, "failed verification: WrongNamespace"),
    Case("restore from another namespace's manifest", lambda c: _with(
        c, lambda m: m.restore("alpha", manifest_blob_id=c.base.manifests["beta"])),
         E.WrongNamespace, "sealed under another namespace key"),
    Case("aggregator returns an HTML page (200)", lambda c: _verify_alpha0(c, _serve(
        lambda b: httpx.Response(200, content=b"<!doctype html><html><title>Login</title></html>",
                                 headers={"content-type": "text/html"}))),
         E.VerificationFailed, "failed verification: InvalidEnvelope"),
    Case("aggregator returns an HTML error page (502)", lambda c: _verify_alpha0(c, _serve(
        lambda b: httpx.Response(502, content=b"<html><title>502 Bad Gateway</title></html>",
                                 headers={"content-type": "text/html"}))),
         E.AggregatorUnavailable, "502 Bad Gateway"),
    Case("aggregator 404 for a stored blob", lambda c: _verify_alpha0(c, _serve(
        lambda b: httpx.Response(404, content=b""))), E.BlobNotFound, "404"),
    Case("publisher 413", _publisher(413, b"Failed to buffer the request body: length limit "
                                          b"exceeded"), _Reported, ": BodyTooLarge: ",
         changes="outbox", reported_as="sync() report: BodyTooLarge; memory stays queued"),
    Case("publisher 451", _publisher(451, b'{"error":{"status":"UNAVAILABLE_FOR_LEGAL_REASONS",'
                                          b'"code":451,"message":"blocked"}}'),
         _Reported, ": ForbiddenBlob: ", changes="outbox",
         reported_as="sync() report: ForbiddenBlob; memory stays queued"),
    Case("publisher invalid JSON", _publisher(200, b'{"newlyCreated": {"blobObject": '),
         _Reported, ": InvalidResponse: ", changes="outbox",
         reported_as="sync() report: InvalidResponse; memory stays queued"),
    Case("publisher 401", _publisher(401, b"missing token"), _Reported,
         ": AuthenticationFailed: ", changes="outbox",
         reported_as="sync() report: AuthenticationFailed; memory stays queued"),
]


def _raise_failed(result: Any) -> None:
    assert result.stored == 0 and len(result.failed) == 1
    raise _Reported(result.failed[0][1])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, base: Base, tmp_path: Path,
                   caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    shutil.copytree(base.path, data)
    ctx = Ctx(data, base, tmp_path, caplog, master=case.master)
    if case.prepare is not None:
        case.prepare(ctx)
    before = snapshot(data, mask_outbox=case.changes == "outbox",
                      skip_index=case.changes == "index")
    with pytest.raises(case.error) as raised:
        case.run(ctx)
    message = str(raised.value)
    assert case.phrase in message, message
    assert MASTER_HEX not in message and OTHER_MASTER not in message
    after = snapshot(data, mask_outbox=case.changes == "outbox",
                     skip_index=case.changes == "index")
    assert after == before, _diff(before, after)
    _record(case, raised.value)


def _diff(before: dict[str, str], after: dict[str, str]) -> str:
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return f"data dir changed: {changed}"


_RESULTS: dict[str, str] = {}


def _record(case: Case, error: BaseException) -> None:
    _RESULTS[case.name] = case.reported_as or type(error).__name__
    write_figures("bad_input", {
        "cases_defined": len(CASES),
        "cases_passed": len(_RESULTS),
        "results": dict(sorted(_RESULTS.items())),
    })


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 25
    assert len({c.name for c in CASES}) == len(CASES)


def test_snapshot_sees_every_kind_of_change(base: Base, tmp_path: Path) -> None:
    """The invariant is only worth something if a snapshot notices real changes."""
    data = tmp_path / "data"
    shutil.copytree(base.path, data)
    before = snapshot(data)
    mem = open_memory(data)
    try:  # a row change that may still sit in the WAL
        mem.update(base.alpha[1], "a changed text for the snapshot test", namespace="alpha")
    finally:
        mem.close()
    assert snapshot(data) != before
    for change in ("chmod", "new file", "index bytes", "relayer row"):
        data = tmp_path / change.replace(" ", "-")
        shutil.copytree(base.path, data)
        before = snapshot(data)
        if change == "chmod":
            (data / "catalog.sqlite3").chmod(0o640)
        elif change == "new file":
            (data / "index" / "stray.tmp").write_bytes(b"")
        elif change == "index bytes":
            path = data / _index_rel()
            path.write_bytes(path.read_bytes()[:-1] + b"\x01")
        else:
            con = sqlite3.connect(data / "relayer" / "index.sqlite3")
            with con:
                con.execute("DELETE FROM blocked")
                con.execute("INSERT INTO blocked VALUES ('x', 0)")
            con.close()
        assert snapshot(data) != before, change
