"""The namespace log: how a namespace is published to Walrus and found again.

    Memory.sync/pull/restore -> namespace_log.NamespaceLog (the heads and the reads;
        host.LogHost: what it needs of its Memory; context.LogContext / LogPart: what
        its parts and mixins see of it, so they never import the log)
        publishing (mixin): merge what was seen, then manifest (+ pages) sealed ->
                 Walrus -> read back -> announce (heads.sqlite3, heads file;
                 heads_mirror keeps a per-user copy of seen heads)
        merging (mixin): heads -> manifest (legacy / legacy_manifest: format 1)
                 -> merge (the rule; lineage: which versions descend) -> apply
                 (winners current, losers history); pending: merged, not fetched
                 yet; older / generation: copies and heads sealed under other key
                 generations; gone / expired: a 404 proves a blob gone, the epoch
                 clock proposes
    head_types: HeadRef and SeenHead, shared by heads and heads_mirror
"""
