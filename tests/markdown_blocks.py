"""Fenced code blocks of a Markdown page, for the docs tests and the newcomer replay."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
_NOTEST = re.compile(r"^\s*<!--\s*notest\s*-->\s*$")


@dataclass(frozen=True)
class Fenced:
    fence_line: int  # 0-based index of the opening fence
    info: str  # the info string after the fence, stripped
    body: list[str]
    before: str  # the nearest non-blank line above the fence ("" at the top)
    before_line: int  # its 0-based index (-1 when none)

    @property
    def lang(self) -> str:
        words = self.info.split()
        return words[0].lower() if words else ""

    @property
    def notest(self) -> bool:
        """Marked ``notest`` in the info string or by ``<!-- notest -->`` above it."""
        return "notest" in self.info.split()[1:] or bool(_NOTEST.match(self.before))


def fenced_blocks(path: Path) -> Iterator[Fenced]:
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group("fence"), i
        i += 1
        body_start = i
        while i < len(lines) and not (lines[i].strip().startswith(fence)
                                      and set(lines[i].strip()) == {fence[0]}):
            i += 1
        body = lines[body_start:i]
        i += 1
        prev = start - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        yield Fenced(start, m.group("info").strip(), body,
                     lines[prev] if prev >= 0 else "", prev)
