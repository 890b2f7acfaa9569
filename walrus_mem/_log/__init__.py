"""The namespace log: how a namespace is published to Walrus and found again.

    Memory.sync/pull -> namespace_log.NamespaceLog
        publish: manifest (+ pages) sealed -> Walrus -> announce (heads.sqlite3,
                 heads file; heads_mirror keeps a per-user copy of seen heads)
        pull:    heads -> manifest (legacy / legacy_manifest: format 1) -> merge (the
                 rule; lineage: which versions descend) -> apply (winners current,
                 losers history); pending: merged, not fetched yet; older /
                 generation: copies sealed under other key generations;
                 gone / expired: a 404 proves a blob gone, the epoch clock proposes
"""
