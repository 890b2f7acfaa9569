"""The local catalog: one SQLite file (WAL) that is the source of truth on this machine.

    Memory --writes/reads--> catalog.Catalog (schema: migrations in order)
        mixins: reads (memories, history, tombstones), writes (inserts, versions,
                published locations, forgets), dedupe (idempotency keys, dedupe
                hashes and twins), fts (FTS5 bm25),
                postings_reads (postings by query word), outbox (publish batches not
                on Walrus yet; outbox_poison: ones refused for good), log_tables
                (manifests, pages, merged heads), changes (keys touched per namespace)
        guard: sqlite3 errors -> LocalStoreError;  rows: catalog rows -> MemoryRecord
        postings: per-namespace bm25 postings, written with each FTS5 row
"""
