"""A write costs what changed, not what exists (issue 28 item 3): no statement a
``remember`` or ``remember_many`` (and the periodic manifest it triggers) runs reads
every row of the namespace. Checked on SQLite's query plans, so it holds at any size."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder

# a full scan of memories / versions, or a walk of a (namespace, ...) index on the
# namespace alone: both read a row per memory of the namespace
_WHOLE_NAMESPACE = re.compile(
    r"SCAN (memories|versions)\b|INDEX (memories_ns_\w+|versions_ns_event) \(namespace=\?\)$")


def test_writes_and_their_manifest_read_no_whole_namespace(tmp_path: Path) -> None:
    mem = Memory(make_settings(tmp_path / "data", manifest_every=50), embedder=HashEmbedder(32),
                 master_key=MASTER_HEX)
    try:
        mem.remember_many([f"fact number {i}" for i in range(300)], namespace="p")
        mem.sync("p")
        mem.recall("fact", namespace="p")
        statements: list[str] = []
        conn = mem._catalog.conn
        conn.set_trace_callback(statements.append)
        try:
            mem.remember("one more", namespace="p")
            mem.remember_many([f"more {i}" for i in range(60)], namespace="p")  # + a manifest
        finally:
            conn.set_trace_callback(None)
        assert any("manifest_dirty" in s for s in statements)  # the manifest ran
        offending = set()
        for sql in statements:
            if not re.match(r"\s*(SELECT|UPDATE|DELETE|INSERT)", sql, re.IGNORECASE):
                continue
            for row in conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall():
                if _WHOLE_NAMESPACE.search(str(row[3])):
                    offending.add((str(row[3]), sql[:160]))
        assert not offending
    finally:
        mem.close()
