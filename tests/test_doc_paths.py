"""Every ``something.py`` the docs name exists, so a moved or renamed module cannot
leave the prose pointing at nothing (issue 24 moved every module into a subpackage).

A name resolves when it is a path relative to the doc (``../examples/x.py``), or when a
file of the repository's code directories ends with it: ``_log/generation.py`` and
``generation.py`` both name ``walrus_mem/_log/generation.py``. Names of files outside
this repository are allow-listed below, each with its reason.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE_DIRS = ("walrus_mem", "relayer_mock", "bench", "tests", "examples")

# A .py name not preceded by a word character, a slash or a dot: the start of a
# path, never the middle of a URL or of a dotted name.
_PY_NAME = re.compile(r"(?<![\w/.-])((?:\.\.?/)*(?:[\w.-]+/)*[\w-]+\.py)\b")

EXTERNAL = {
    # benchmarks.md: what importing the mcp SDK runs (the package's own files)
    "mcp/__init__.py": "the mcp SDK's package",
    "mcp/server/__init__.py": "the mcp SDK's package",
}


def repo_files() -> list[str]:
    """Repository-relative paths of every .py file in the code directories."""
    return sorted(
        path.relative_to(ROOT).as_posix()
        for folder in CODE_DIRS
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    )


def unresolved(doc: Path, text: str, files: list[str]) -> list[str]:
    """The .py names of ``text`` (from ``doc``) that name no file."""
    missing = []
    for name in _PY_NAME.findall(text):
        if name in EXTERNAL:
            continue
        if name.startswith(("./", "../")):
            if (doc.parent / name).exists():
                continue
            name = name.lstrip("./")
        if any(f == name or f.endswith("/" + name) for f in files):
            continue
        missing.append(name)
    return missing


def test_every_py_file_the_docs_name_exists() -> None:
    files = repo_files()
    missing = [
        f"{doc.relative_to(ROOT)}: {name}"
        for doc in DOC_FILES
        for name in unresolved(doc, doc.read_text(encoding="utf-8"), files)
    ]
    assert not missing, f"the docs name files that do not exist: {missing}"


def test_old_flat_names_are_caught() -> None:
    """The check itself: names from before the move fail, current paths pass."""
    files = repo_files()
    doc = ROOT / "docs" / "architecture.md"
    text = ("see `log_generation.py`, cli_doctor.py and walrus_core.py; "
            "`_log/generation.py`, walrus_mem/_cli/cmd_doctor.py, bench/recall.py, "
            "[example](../examples/test_my_agent.py), https://example.com/gone.py")
    assert unresolved(doc, text, files) == ["log_generation.py", "cli_doctor.py",
                                            "walrus_core.py"]
