"""The Walrus side: the client's insides, the backend, and what Walrus tells us.

    walrus.py (public WalrusClient / AsyncWalrusClient)
        -> core (sans-I/O: config, requests, stores; reads: the read-path mixin)
           -> actions (Send / Sleep yielded to the driver, failure kinds),
              checks (argument checks, Walrus's limits), stats (counters)
           -> responses (parsing)
        -> retry (backoff, deadlines), endpoints (failover), bounded_io (deadline,
           size cap), credentials (publisher tokens), url_secrets (user:pw@ in URLs)
    storage: the backend a Memory talks to (HTTP client or embedded relayer)
    blobio / publish_check: reads that must verify; read-back after publish
    expiry (epoch clock) <- epoch_guard (one lying answer must not move it)
"""
