"""The heads half of a backup: ``keys export --with-heads FILE`` and ``restore --heads FILE``.

A key alone does not restore: ``restore`` on a new machine also needs each
namespace's newest head reference. Those are public, so they go to a file of
their own, in the heads-file format (``<namespace> <head reference>`` lines,
:class:`~walrus_mem._log.heads.HeadsFile`), which ``restore --heads`` reads.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .._local.private_dirs import make_private_dirs
from .._log.heads import HeadRef, HeadsFile
from ..errors import BlobNotFound, InvalidInput
from .common import CliState

__all__ = ["embedded_not_found", "heads_to_restore", "write_heads_backup"]

_HEADER = "# walrus-mem heads backup: <namespace> <head reference>; `walrus-mem restore --heads`\n"


def write_heads_backup(state: CliState, path: Path,
                       namespaces: list[str] | None = None) -> tuple[dict[str, str], list[str]]:
    """Write the newest published head of each namespace of this data dir to ``path``
    (atomically, replacing it). Returns the heads written and one note per namespace
    whose queued memories are not in its head yet. No data dir is created."""
    heads: dict[str, str] = {}
    notes: list[str] = []
    if (Path(state.settings.data_dir).expanduser() / "catalog.sqlite3").exists():
        mem = state.memory
        for ns in namespaces if namespaces is not None else mem.namespaces():
            st = mem.stats(ns)
            if st.manifest_blob_id:
                heads[ns] = str(HeadRef.parse(st.manifest_blob_id))
            if st.queued:
                notes.append(f"namespace {ns}: {st.queued} memory(ies) not synced yet are not "
                             "in this backup (run walrus-mem sync, then export again)")
    path = Path(path).expanduser()
    make_private_dirs(path.parent)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with open(fd, "w", encoding="utf-8") as fh:
            fh.write(_HEADER)
            for ns, ref in sorted(heads.items()):
                fh.write(f"{ns} {ref}\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return heads, notes


def heads_to_restore(state: CliState, path: Path) -> list[str]:
    """The heads ``path`` lists for the namespace being restored; unreadable lines
    are noted on stderr. No head for it is :class:`InvalidInput` naming the file's
    namespaces."""
    file = HeadsFile(path)
    if not file.path.is_file():
        raise InvalidInput(f"--heads {file.path}: no such file")
    ns = state.namespace
    pairs, problems = file.read_checked(ns)
    for problem in problems:
        state.warn(str(problem))
    if not pairs:
        listed = sorted({name for name, _ in file.read()})
        raise InvalidInput(
            f"--heads {file.path} has no head for namespace {ns}"
            + (f"; it lists {', '.join(listed)} (choose one with -n NAME)" if listed else "")
        )
    return [str(ref) for _, ref in pairs]


def embedded_not_found(state: CliState, exc: BlobNotFound) -> BlobNotFound:
    """The 404 of a restore in embedded mode, saying where the blobs are."""
    return BlobNotFound(
        f"{exc}. This data dir uses the embedded relayer (no publisher_url or "
        "aggregator_urls set): blobs are kept in the relayer/ folder of the data dir that "
        f"wrote them, not in this one ({state.settings.data_dir}). Serve that folder "
        "(walrus-mem relayer --data-dir <old data dir>/relayer) and set publisher_url and "
        "aggregator_urls to it, or restore from the shared Walrus the memories were "
        "published to (docs/keys.md#moving-from-the-embedded-relayer-to-a-shared-walrus)"
    )
