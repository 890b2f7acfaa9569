"""The catalog's schema: one migration per version, applied in order (see catalog.py)."""

from __future__ import annotations

from typing import Final

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

MIGRATIONS: Final[tuple[str, ...]] = (
    # 1: initial schema
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE namespaces (
        name TEXT PRIMARY KEY,
        model_id TEXT,
        dim INTEGER,
        key_fingerprint TEXT,
        created_at REAL NOT NULL,
        manifest_blob_id TEXT,
        manifest_seq INTEGER NOT NULL DEFAULT 0,
        manifest_at REAL,
        writes_since_manifest INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE memories (
        key INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL REFERENCES namespaces(name),
        text TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        category TEXT,
        importance REAL NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        expires_at REAL,
        version INTEGER NOT NULL,
        dedupe_hash TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('queued', 'published')),
        blob_id TEXT,
        quilt_patch_id TEXT,
        object_id TEXT,
        end_epoch INTEGER,
        deletable INTEGER,
        sealed BLOB,
        vector BLOB NOT NULL,
        UNIQUE (namespace, dedupe_hash)
    );
    CREATE INDEX memories_ns_key ON memories (namespace, key);
    CREATE INDEX memories_ns_created ON memories (namespace, created_at);
    CREATE INDEX memories_ns_end_epoch ON memories (namespace, end_epoch);
    CREATE INDEX memories_blob ON memories (blob_id);
    CREATE TABLE versions (
        memory_id TEXT NOT NULL,
        namespace TEXT NOT NULL,
        version INTEGER NOT NULL,
        event TEXT NOT NULL,
        text TEXT,
        metadata TEXT,
        at REAL NOT NULL,
        blob_id TEXT,
        quilt_patch_id TEXT,
        end_epoch INTEGER,
        deletable INTEGER,
        PRIMARY KEY (memory_id, version)
    );
    CREATE INDEX versions_blob ON versions (blob_id);
    CREATE TABLE outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('blob', 'quilt')),
        created_at REAL NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT
    );
    CREATE TABLE outbox_items (
        outbox_id INTEGER NOT NULL REFERENCES outbox(id) ON DELETE CASCADE,
        memory_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        PRIMARY KEY (outbox_id, memory_id)
    );
    CREATE INDEX outbox_items_memory ON outbox_items (memory_id);
    CREATE TABLE changes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace TEXT NOT NULL,
        key INTEGER NOT NULL
    );
    CREATE INDEX changes_ns_seq ON changes (namespace, seq);
    CREATE TABLE manifests (
        namespace TEXT NOT NULL,
        seq INTEGER NOT NULL,
        blob_id TEXT NOT NULL,
        prev_blob_id TEXT,
        entries INTEGER NOT NULL,
        pages INTEGER NOT NULL,
        at REAL NOT NULL,
        end_epoch INTEGER,
        PRIMARY KEY (namespace, seq)
    );
    CREATE TABLE manifest_pages (
        namespace TEXT NOT NULL,
        digest TEXT NOT NULL,
        blob_id TEXT NOT NULL,
        end_epoch INTEGER,
        PRIMARY KEY (namespace, digest)
    );
    CREATE TABLE idempotency (
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        result TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (namespace, key)
    );
    """,
    # 2: manifest pages may be quilt patches
    """
    ALTER TABLE manifest_pages ADD COLUMN patch_id TEXT;
    """,
    # 3: the namespace log (docs/sync.md): merged heads, unfinished restores, fact
    # digests, head references, and history rows that share a version (a merge
    # keeps the losing version of a conflict next to the winner)
    """
    ALTER TABLE namespaces ADD COLUMN log_heads TEXT;
    ALTER TABLE namespaces ADD COLUMN restoring TEXT;
    ALTER TABLE memories ADD COLUMN digest TEXT;
    ALTER TABLE manifests ADD COLUMN head TEXT;
    ALTER TABLE manifests ADD COLUMN parents TEXT;
    CREATE TABLE versions_v3 (
        memory_id TEXT NOT NULL,
        namespace TEXT NOT NULL,
        version INTEGER NOT NULL,
        event TEXT NOT NULL,
        text TEXT,
        metadata TEXT,
        at REAL NOT NULL,
        blob_id TEXT,
        quilt_patch_id TEXT,
        end_epoch INTEGER,
        deletable INTEGER,
        PRIMARY KEY (memory_id, version, event)
    );
    INSERT INTO versions_v3 SELECT memory_id, namespace, version, event, text, metadata, at,
        blob_id, quilt_patch_id, end_epoch, deletable FROM versions;
    DROP TABLE versions;
    ALTER TABLE versions_v3 RENAME TO versions;
    CREATE INDEX versions_blob ON versions (blob_id);
    CREATE INDEX versions_ns_event ON versions (namespace, event);
    """,
    # 4: blobs of forgotten memories still to delete, recorded in the forget's own
    # transaction so a crash before the deletion leaves it to the next sync (forget.md)
    """
    CREATE TABLE pending_deletions (
        blob_id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        deletable INTEGER,
        at REAL NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT
    );
    """,
    # 5: the postings recall scores bm25 from (postings.py). The per-namespace tables are
    # made (or rebuilt from the FTS5 index) when the catalog opens; the version bump keeps
    # older walrus_mem, which would write FTS5 rows without postings, out of the file.
    """
    CREATE TABLE IF NOT EXISTS lexicon_stats (
        namespace TEXT PRIMARY KEY,
        rows INTEGER NOT NULL,
        tokens INTEGER NOT NULL
    );
    """,
    # 6: the postings' blocks are varint-encoded (postings.FORMAT "2", about 3 bytes a
    # posting instead of 16). The catalog re-encodes them when it opens (meta 'postings');
    # the version bump keeps older walrus_mem, which would read the blocks as int64 keys,
    # out of the file.
    """
    UPDATE meta SET value = 'stale' WHERE key = 'postings' AND value = '1';
    """,
    # 7: a row's ``vector`` may be empty: its sealed copy carries the vector (vectors.py).
    # Rows written before keep theirs until ``vacuum`` (compact) empties them; the version
    # bump keeps older walrus_mem, which would read an empty vector as damage, out.
    """
    DELETE FROM meta WHERE key = 'vectors_shed';
    """,
    # 8: a live memory's current version is its history row (``event``, ``event_at``;
    # reads.py HISTORY_NOW): ``versions`` keeps superseded versions, conflicts and
    # tombstones only, so a memory never updated has no ``versions`` row (347 B a memory
    # at 10k). A current row that differs from its memory in any way (possible in older
    # catalogs) stays in ``versions`` and its memory's ``event`` stays NULL.
    """
    ALTER TABLE memories ADD COLUMN event TEXT;
    ALTER TABLE memories ADD COLUMN event_at REAL;
    UPDATE memories SET event = v.event, event_at = v.at FROM versions AS v
        WHERE v.memory_id = memories.id AND v.namespace = memories.namespace
        AND v.version = memories.version AND v.event NOT IN ('CONFLICT', 'DELETE')
        AND v.text IS memories.text AND v.metadata IS memories.metadata
        AND v.blob_id IS memories.blob_id AND v.quilt_patch_id IS memories.quilt_patch_id
        AND v.end_epoch IS memories.end_epoch AND v.deletable IS memories.deletable
        AND (SELECT count(*) FROM versions AS w WHERE w.memory_id = memories.id
             AND w.version = memories.version AND w.event != 'CONFLICT') = 1;
    DELETE FROM versions WHERE (memory_id, version, event) IN
        (SELECT id, version, event FROM memories WHERE event IS NOT NULL);
    """,
    # 9: the FTS5 tables keep no copy of the text (``content=''``; memories.text is the
    # text): the catalog recreates them from ``memories`` when it opens (meta
    # 'fts_content', catalog._ensure_fts). The version bump keeps older walrus_mem, which
    # reads a row's text back from FTS5 to delete it, out.
    """
    DELETE FROM meta WHERE key = 'fts_content';
    """,
    # 10: a published row may keep no ``sealed`` copy when the embedded relayer of the data
    # dir holds it (held.py; read back from there, checked against ``digest``). The version
    # bump keeps older walrus_mem, which would take such a row for one without a copy, out.
    """
    DELETE FROM meta WHERE key = 'sealed_held';
    """,
    # 11: a text's dedupe hash is kept as its first 128 bits in base64url (22 characters:
    # dedupe.py stored_dedupe_hash, which the catalog registers for this step), a twin's
    # ``<hash>:<id>`` likewise: 84 B a memory less, in the row and in UNIQUE (namespace,
    # dedupe_hash). The version bump keeps older walrus_mem, which would look for whole
    # hashes and keep a second memory of a known text, out. (The rows shrink in place:
    # ``compact`` gives the space back to the file.)
    """
    UPDATE memories SET
        dedupe_hash = stored_dedupe_hash(substr(dedupe_hash, 1, 64)) || substr(dedupe_hash, 65)
        WHERE length(dedupe_hash) >= 64 AND instr(dedupe_hash, ':') IN (0, 65)
    """,
)
SCHEMA_VERSION: Final = len(MIGRATIONS)
