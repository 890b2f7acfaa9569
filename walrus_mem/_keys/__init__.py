"""Where key material lives and who may use it.

    keys.py (public): master seed -> per-namespace keys (derive, generations)
        chain:    a Memory's KeyChain: keys resolved lazily, cached, and checked
                  against the key each namespace was created with
        keystore: the master key file / keyring; backup and import
        access:   a namespace is read and written only with its own key
        hardening: no core dumps from a process that holds keys
        generations: which key generation a namespace uses (rotation writes it)
    envelope.py (public) seals and opens one record with those keys.
"""
