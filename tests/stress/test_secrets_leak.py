"""Secrets: credentials fed through auto-capture and the memory tools are never stored.

The corpus is tests/data/secrets_corpus.json (55 fake credentials of 36 kinds).
Each credential goes, inside an otherwise ordinary message or fact, through

* ``MemoryHooks.agent_end`` (background auto-capture, redact and drop policies),
* ``call_tool(memory, "memory_store", ...)`` in a fact, and in the fact's metadata
  (in a free-text value, nested in a list, and bare under a credential-named key),
* ``call_tool(memory, "memory_update", ...)`` as the new text and metadata of a memory.

Then nothing may hold it: not the opened plaintext of any blob on the relayer,
not any row of any catalog table (memories, versions/history, FTS5 and its
shadow tables, outbox, idempotency ...), not the raw catalog, WAL, index or
relayer files (lower-cased too: FTS5 stores lower-cased tokens), and not any log
record at DEBUG. The DEBUG logs must also hold no key material: the master seed
and every namespace's signing seed, sealing key and dedupe key, in hex, base64
or raw form, nor any 16-character piece of their hex.
"""

from __future__ import annotations

import base64
import json
import logging
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.stress.helpers import (
    MASTER_HEX,
    open_memory,
    relayer_files,
    split_blob,
    write_figures,
)
from walrus_mem.envelope import open_envelope
from walrus_mem.errors import EnvelopeError
from walrus_mem.hooks import MemoryHooks
from walrus_mem.keys import MasterSeed
from walrus_mem.memory import Memory
from walrus_mem.tools import call_tool

CORPUS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "secrets_corpus.json").read_text()
)["positives"]
# Kinds whose value alone has a recognisable shape (prefix, structure). The others
# (passwords, generic hex keys, a PEM body without its header ...) are only
# credentials because of their context, so they are only fed with it.
SELF_IDENTIFYING = frozenset({
    "openai_api_key", "anthropic_api_key", "github_token", "github_pat", "gitlab_token",
    "slack_token", "slack_webhook", "discord_webhook", "aws_access_key_id", "google_api_key",
    "stripe_key", "twilio_api_key", "sendgrid_api_key", "mailgun_api_key", "jwt", "npm_token",
    "pypi_token", "huggingface_token", "telegram_bot_token", "google_oauth_secret",
    "shopify_token", "digitalocean_token", "sui_private_key", "discord_bot_token", "webhook_url",
})
FILLER = ("I moved to Porto last spring and I now run the billing service for the "
          "Lisbon office.")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _key_forms(secret: bytes) -> set[str]:
    h = secret.hex()
    forms = {h, h.upper(), secret.decode("latin-1")}
    for enc in (base64.b64encode(secret), base64.urlsafe_b64encode(secret)):
        forms |= {enc.decode(), enc.decode().rstrip("=")}
    forms |= {h[i : i + 16] for i in range(len(h) - 15)}
    return forms


@pytest.fixture
def fed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[dict[str, Any]]:
    """A data dir that has been fed every credential through every channel."""
    caplog.set_level(logging.DEBUG)
    mem = open_memory(tmp_path / "data")
    outcomes: dict[str, list[Any]] = {"agent_end": [], "memory_store": [],
                                      "memory_store_metadata": [], "memory_update": []}
    try:
        for policy in ("redact", "drop"):
            hooks = MemoryHooks(mem, secret_policy=policy)
            tickets = []
            for i, entry in enumerate(CORPUS):
                messages = [  # phrasings the heuristic extractor turns into facts
                    {"role": "user", "content": "I decided that the staging deploy always "
                                                f"uses this: {entry['text']} (note {i})"},
                    {"role": "assistant", "content": "Understood, I will keep that in mind."},
                    {"role": "user", "content": FILLER},
                ]
                if entry["kind"] in SELF_IDENTIFYING:  # the bare value, no hint around it
                    messages.append({"role": "user", "content": f"I always use {entry['secret']}"
                                                                " for the billing deploys."})
                tickets.append(hooks.agent_end(
                    messages, session_key=f"agent:capture-{policy}:{uuid.uuid4()}"))
            assert hooks.flush(120)
            outcomes["agent_end"] += [t.wait(1) for t in tickets]
            hooks.close()
        for i, entry in enumerate(CORPUS):
            outcomes["memory_store"].append(call_tool(mem, "memory_store", {
                "facts": [f"For the deploy: {entry['text']}", f"Fact {i}: {FILLER}"],
                "category": "configuration"}, namespace="tools"))
            outcomes["memory_store_metadata"].append(call_tool(mem, "memory_store", {
                "facts": [f"The staging deploy runs from Porto, variant {i}."],
                "metadata": {"note": entry["text"], "api_token": entry["secret"],
                             "context": {"seen_in": [entry["text"]]}}},
                namespace="tools-meta"))
        target = mem.remember("The release checklist lives in the team wiki.",
                              namespace="tools-update")
        for entry in CORPUS:
            outcomes["memory_update"].append(call_tool(mem, "memory_update", {
                "id": target.id, "text": f"Release note: {entry['text']} {FILLER}",
                "metadata": {"note": entry["text"], "password": entry["secret"]}},
                namespace="tools-update"))
        report = mem.sync()
        assert report.still_queued == 0 and report.errors == []
        keys = {ns: mem.keys_for(ns) for ns in mem.namespaces()}
        yield {"mem": mem, "dir": tmp_path / "data", "outcomes": outcomes, "keys": keys,
               "caplog": caplog}
    finally:
        mem.close()


def _stored_texts(mem: Memory, data_dir: Path, keys: dict[str, Any]) -> dict[str, str]:
    """Everything stored, as text: opened blobs, every catalog row, raw files."""
    places: dict[str, str] = {}
    opened = 0
    for path, data in relayer_files(data_dir / "relayer").items():
        places[f"relayer:{path}"] = data.decode("latin-1")
        if not path.startswith("blobs/"):
            continue
        for _, part in split_blob(data):
            for k in keys.values():
                try:
                    record = open_envelope(k, part)
                except EnvelopeError:
                    continue
                places[f"plaintext:{path}:{record['id']}"] = "\n".join(_strings(record))
                opened += 1
                break
            else:
                raise AssertionError(f"blob {path} opens under no namespace key")
    assert opened > 0
    mem._catalog.scrub()
    con = sqlite3.connect(f"file:{data_dir / 'catalog.sqlite3'}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
            places[f"table:{table}"] = "\n".join(
                str(v) if not isinstance(v, bytes) else v.decode("latin-1")
                for row in rows for v in row)
    finally:
        con.close()
    assert any(t.startswith("table:fts") and t != "table:fts" for t in places)  # shadow tables
    for path in sorted(data_dir.rglob("*")):
        if path.is_file() and "relayer" not in path.parts:
            places[f"file:{path.relative_to(data_dir)}"] = path.read_bytes().decode("latin-1")
    return places


def _records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Records of the fixture that fed the data (setup) and of the test itself."""
    return [*caplog.get_records("setup"), *caplog.records]


def _log_text(records: list[logging.LogRecord]) -> str:
    return "\n".join(r.getMessage() + (("\n" + r.exc_text) if r.exc_text else "")
                     for r in records)


def test_no_credential_is_stored_anywhere(fed: dict[str, Any]) -> None:
    mem, data_dir, keys = fed["mem"], fed["dir"], fed["keys"]
    outcomes, caplog = fed["outcomes"], fed["caplog"]
    places = _stored_texts(mem, data_dir, keys)
    records = _records(caplog)
    logs = _log_text(records)
    leaks = []
    for entry in CORPUS:
        needle = entry["secret"]
        for where, text in [*places.items(), ("logs", logs)]:
            if needle in text or needle.lower() in text:
                leaks.append((entry["kind"], where))
    assert leaks == []

    # The pipeline really ran: facts were stored, and credentials were caught on the way.
    captured = [o for o in outcomes["agent_end"] if o is not None]
    assert len(captured) == 2 * len(CORPUS)
    stored_capture = sum(o.stored for o in captured)
    redacted_capture = sum(o.redacted for o in captured)
    rejected_capture = sum(o.rejected for o in captured)
    assert stored_capture > 0
    assert redacted_capture + rejected_capture >= len(captured)  # >= 1 credential per turn
    assert sum(o.redacted for o in outcomes["agent_end"][len(CORPUS):]) == 0  # drop policy
    store_results = outcomes["memory_store"]
    assert all(r["ok"] for r in store_results), [r for r in store_results if not r["ok"]][:2]
    store_redacted = sum(bool(r["result"].get("redacted")) for r in store_results)
    store_rejected = sum(bool(r["result"].get("rejected")) for r in store_results)
    assert store_redacted + store_rejected == len(CORPUS)
    meta_results = outcomes["memory_store_metadata"]
    update_results = outcomes["memory_update"]
    counts = {ns: mem.stats(ns).memories for ns in mem.namespaces()}
    write_figures("secrets", {
        "corpus_entries": len(CORPUS),
        "credential_kinds": len({e["kind"] for e in CORPUS}),
        "bare_self_identifying_fed": sum(e["kind"] in SELF_IDENTIFYING for e in CORPUS),
        "channels": sorted(outcomes),
        "agent_end_turns": len(captured),
        "agent_end_facts_stored": stored_capture,
        "agent_end_facts_redacted": redacted_capture,
        "agent_end_facts_dropped": rejected_capture,
        "memory_store_calls": len(store_results),
        "memory_store_facts_redacted": store_redacted,
        "memory_store_facts_refused": store_rejected,
        "memory_store_metadata_calls": len(meta_results),
        "memory_store_metadata_redacted": sum(
            bool(r["ok"] and r["result"].get("metadata_redacted")) for r in meta_results),
        "memory_update_calls": len(update_results),
        "memory_update_refused": sum(not r["ok"] for r in update_results),
        "memories_by_namespace": counts,
        "places_scanned": len(places) + 1,
        "log_records_scanned": len(records),
        "secrets_found_stored": len(leaks),
    })


def test_no_key_material_in_debug_logs(fed: dict[str, Any]) -> None:
    caplog, keys = fed["caplog"], fed["keys"]
    secrets: dict[str, bytes] = {"master": MasterSeed.from_hex(MASTER_HEX).secret_bytes()}
    for ns, k in keys.items():
        secrets[f"{ns}.signing"] = bytes(k.signing_key)
        secrets[f"{ns}.sealing"] = k.sealing_key
        secrets[f"{ns}.dedupe"] = k.dedupe_key
    records = _records(caplog)
    logs = _log_text(records)
    assert sum(r.levelno == logging.DEBUG for r in records) > 100  # DEBUG really was on
    found = [name for name, secret in secrets.items()
             if any(form in logs for form in _key_forms(secret))]
    assert found == []
    write_figures("secrets", {"key_secrets_checked_in_logs": len(secrets),
                              "key_material_found_in_logs": 0})
