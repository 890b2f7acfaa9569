"""``python -m walrus_mem`` runs the ``walrus-mem`` CLI."""

from __future__ import annotations

from ._cli.main import main

if __name__ == "__main__":
    main()
