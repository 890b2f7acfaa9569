"""Refuse a data dir or state dir that another user could change, as ssh's StrictModes does.

The catalog holds every memory in plaintext. If another local user owns the data
dir, can write it, can write a parent that is not sticky, or planted a symlink in
it (``catalog.sqlite3 -> /their/file``), our writes go where they read. So before
anything is opened there:

* every component of the path, as written and as resolved, must be owned by the
  user or root; a directory on the way that group or others can write needs the
  sticky bit (``/tmp``: others cannot move our entries); a symlink on the way must
  be the user's or root's (the owner of a link can re-point it);
* the directory itself is the user's and not writable by group or others;
* every entry below it (the embedded relayer's blob folders aside: signed
  ciphertext, checked when read) is the user's and not writable by group or
  others, and no symlink leads outside it.

Once the directory passes, nobody else can add or replace an entry in it, so what
was checked stays true while it is open. Readable bits are left alone: files are
created 0600 in 0700 directories (private_dirs.py). POSIX only; elsewhere a no-op.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from ..errors import InsecureDataDir
from .private_dirs import make_private_dirs

__all__ = ["check_private_dir"]

_GO_WRITE: Final = stat.S_IWGRP | stat.S_IWOTH
# Not walked: one file per blob (thousands), bytes that are verified when read.
_NOT_WALKED: Final = frozenset({("relayer", "blobs"), ("relayer", "tmp")})
_MAX_SHOWN: Final = 5
_WHY: Final = ("refusing it, as ssh's StrictModes refuses a ~/.ssh that others can change "
               "(docs/security.md#the-data-dir-and-the-state-dir)")


def check_private_dir(path: str | os.PathLike[str], what: str, *, create: bool) -> None:
    """Refuse ``path`` (named ``what``: "data dir", "state dir") with InsecureDataDir when
    another user could change it or what it holds; ``create``: make it 0700 if missing."""
    if os.name != "posix":  # pragma: no cover - no owners and modes to check
        if create:
            make_private_dirs(path)
        return
    where = Path(os.path.abspath(Path(path).expanduser()))
    uid = os.geteuid()
    problems = _path_problems(where, uid)
    if not problems and create:
        make_private_dirs(where)
    if not problems and os.path.isdir(where):
        problems = _entry_problems(Path(os.path.realpath(where)), uid, what)
    if problems:
        shown = problems[:_MAX_SHOWN]
        if len(problems) > _MAX_SHOWN:
            shown.append(f"{len(problems) - _MAX_SHOWN} more")
        raise InsecureDataDir(f"{what} {where} is unsafe: {'; '.join(shown)}; {_WHY}",
                              str(where))


def _path_problems(where: Path, uid: int) -> list[str]:
    """The existing components of ``where``, as written and resolved, that others control."""
    problems: list[str] = []
    real = Path(os.path.realpath(where))
    for chain in dict.fromkeys((where, real)):
        for component in reversed([chain, *chain.parents]):
            try:
                st = os.lstat(component)
            except (FileNotFoundError, NotADirectoryError):
                break  # the rest is created here, 0700
            problem = _component_problem(component, st, uid, final=component == chain)
            if problem and problem not in problems:
                problems.append(problem)
    return problems


def _component_problem(p: Path, st: os.stat_result, uid: int, *, final: bool) -> str | None:
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        if st.st_uid not in (uid, 0):
            return (f"{p} is a symlink owned by uid {st.st_uid} (neither you nor root), who "
                    "can re-point it at any time: use the real path, or remove the link")
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None  # unusable, not unsafe: opening it fails with its own error
    if final:
        if st.st_uid != uid:
            return (f"it is owned by uid {st.st_uid}, not by you (uid {uid}), so its owner "
                    "controls what is read and written there: use a directory of your own "
                    "(or remove it and let walrus-mem create it, mode 0700)")
        if mode & _GO_WRITE:
            return (f"it is writable by others (mode {mode:04o}), who could put their own "
                    f"files or links in it: chmod 700 {p}")
        return None
    if st.st_uid not in (uid, 0):
        return (f"its parent {p} is owned by uid {st.st_uid} (neither you nor root), who "
                "could move it away and put another in its place: choose a directory "
                "under one of your own")
    if mode & _GO_WRITE and not mode & stat.S_ISVTX:
        return (f"its parent {p} is writable by others (mode {mode:04o}) without the sticky "
                "bit, so they could move it away and put their own in its place: "
                f"chmod go-w {p} (or chmod +t), or choose a directory elsewhere")
    return None


def _entry_problems(root: Path, uid: int, what: str) -> list[str]:
    """Entries below ``root`` that are another user's, writable by others, or links out."""
    problems: list[str] = []
    top = str(root)
    pending = [top]
    while pending:  # strings, not Paths: a data dir of 1,000 namespaces has 5,000 entries
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            problems.append(f"{folder} cannot be listed ({exc.strerror})")
            continue
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            if st.st_uid == uid and not st.st_mode & _GO_WRITE and not entry.is_symlink():
                if entry.is_dir(follow_symlinks=False) \
                        and tuple(os.path.relpath(entry.path, top).split(os.sep)) \
                        not in _NOT_WALKED:
                    pending.append(entry.path)
                continue
            problem = _entry_problem(Path(entry.path), st, root, uid, what)
            if problem:
                problems.append(problem)
    return sorted(problems)


def _entry_problem(path: Path, st: os.stat_result, root: Path, uid: int,
                   what: str) -> str | None:
    shown = path.relative_to(root)
    if stat.S_ISLNK(st.st_mode):
        target = Path(os.path.realpath(path))
        if target != root and root not in target.parents:
            return (f"{shown} is a symlink to {target}, outside the {what}: what is "
                    f"written there would land in that file; rm {path}")
        if st.st_uid not in (uid, 0):
            return f"{shown} is a symlink owned by uid {st.st_uid}: rm {path}"
        return None  # an inside target is an entry of its own
    if st.st_uid != uid:
        return (f"{shown} is owned by uid {st.st_uid}, not by you (uid {uid}): remove it, "
                "or chown it to yourself if it is yours")
    return (f"{shown} is writable by others (mode {stat.S_IMODE(st.st_mode):04o}): "
            f"chmod go-w {path}")
