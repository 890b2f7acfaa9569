"""This machine's files and environment, below everything else.

    private_dirs: configured paths expanded; created directories private (0700)
    dir_trust:    refuse a data dir / state dir another user could change
    datadir_lock: every open Memory holds the data dir shared, repair exclusively
    placeholders: ${VAR} placeholders in configuration values (config.py)
    user_dirs:    WALRUS_MEM_HOME, the one root that moves config, keys, data, state, caches
"""
