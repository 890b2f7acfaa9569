"""The ``walrus-mem`` command: a thin shell over the library API.

    main.main (click group, global options; lazy "mcp" and "relayer")
        -> cmd_memory (remember, recall, get, list, forget, ...), cmd_sync (restore,
           pull, sync, expiry), cmd_keys, cmd_share, cmd_import_export,
           cmd_doctor (doctor -> doctor.run_checks; repair -> _memory.repair)
        -> demo (walrus-mem demo / make demo)
    common: what every command shares (option state, parsing, opening a Memory).
    global_options: global options given after the subcommand moved to the front.
"""
