"""The sealed copies this data dir's embedded relayer holds, read in-process.

The catalog's source for rows that keep no sealed copy (walrus_mem._catalog.held): the
files of ``<data_dir>/relayer`` read through relayer_mock's store, without the app, its
thread or HTTP. It reads whatever backend the Memory uses now (rows dropped their copy
while the embedded relayer stored them; a data dir later pointed at a Walrus URL still
reads them from the folder), and lets rows drop their copy only while the embedded
relayer is the backend (``drops``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["RelayerCopies"]


class RelayerCopies:
    """``read(blob_id, patch_id)`` from ``folder``; ``drops`` as given. Thread-safe."""

    def __init__(self, folder: Path, *, drops: bool) -> None:
        self.folder = Path(folder)
        self._drops = drops
        self._copies: Any = None

    @property
    def drops(self) -> bool:
        return self._drops

    @drops.setter
    def drops(self, value: bool) -> None:
        self._drops = bool(value)

    def _local(self) -> Any:
        if self._copies is None:
            from relayer_mock.embedded import LocalCopies

            self._copies = LocalCopies(self.folder)
        return self._copies

    def read(self, blob_id: str, patch_id: str | None) -> bytes | None:
        data: bytes | None = self._local().read(blob_id, patch_id)
        return data

    def read_many(self, blob_id: str, patch_ids: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = self._local().read_many(blob_id, patch_ids)
        return found

    def close(self) -> None:
        if self._copies is not None:
            self._copies.close()

    def __repr__(self) -> str:
        return f"RelayerCopies(folder={str(self.folder)!r}, drops={self._drops})"
