"""Memory's collaborators: memory.py is the facade, these do the work it delegates.

    Memory.remember/forget -> inputs (validation), restate (re-statements),
                              deletions (blobs still to delete)
    Memory.sync            -> renewal (re-publish what is about to expire),
                              network_reset (a wiped network)
    Memory.rotate_key      -> rotation, rotation_cleanup (delete_old); follow (pulls
                              that follow a rotation made elsewhere)
    Memory.share/accept    -> grants
    doctor / repair        -> integrity (checks), repair (fixes)
    AsyncMemory (async_memory): the same API as coroutines
"""
