"""Memory's collaborators: memory.py is the facade, these do the work it delegates.

    Memory.__init__        -> parts (what the others are handed: catalog, indexes, lock,
                              keys (_keys.chain), embedding (_recall.embedding),
                              publisher, epochs (the current Walrus epoch), log)
    Memory.remember/update -> writer (prepare, dedupe, seal, store), inputs (validation),
                              records (a fact's plaintext), restate (re-statements)
    Memory.recall/get/list/history -> reading (local reads; get(verify=True) remote)
    Memory.forget          -> forgetting; deletions (blobs still to delete), publisher
    Memory.sync            -> syncing; renewal (re-publish what is about to expire),
                              network_reset (a wiped network), publisher (the outbox)
    Memory.restore/pull    -> follow (pulls that follow a rotation made elsewhere)
    Memory.rotate_key      -> rotation, rotation_cleanup (delete_old)
    Memory.expiring/extend/reindex/compact/stats -> maintenance
    Memory.share/accept    -> grants
    doctor / repair        -> integrity (checks), repair (fixes), repair_run (the CLI's)
    AsyncMemory (async_memory): the same API as coroutines
"""
