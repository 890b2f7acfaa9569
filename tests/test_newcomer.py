"""README's and the docs' shell commands replayed as a newcomer would (issue 27):
a fresh read-only HOME per page, a real bash, the embedded relayer, the fake embedder.

What is replayed and the marker for what is not: tests/newcomer.py's docstring and
docs/testing.md ("The docs' commands are tested").
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import newcomer

pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or not hasattr(socket, "send_fds"),
    reason="the replay needs bash and Unix sockets that pass file descriptors")

PAGES = [p for p in newcomer.PAGES if newcomer.read_page(p).lines]


@pytest.fixture(scope="module")
def fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    base = tmp_path_factory.mktemp("newcomer")
    env = newcomer.base_env(real_model=False)
    server = newcomer.ForkServer(base, dict(env, HOME=str(base),
                                            PYTHONPATH=str(newcomer.ROOT)))
    try:
        yield base, server.bin
    finally:
        server.close()


def _replay(page: newcomer.Page, fork_server: tuple[Path, Path]) -> newcomer.Result:
    base, bin_dir = fork_server
    return newcomer.replay(page, base, newcomer.base_env(real_model=False), bin_dir)


def test_readme_and_cli_pages_have_commands_to_replay() -> None:
    names = {str(p.relative_to(newcomer.ROOT)) for p in PAGES}
    assert {"README.md", "docs/cli.md"} <= names
    readme = newcomer.read_page(newcomer.ROOT / "README.md")
    assert any(line.command.startswith("walrus-mem init") for line in readme.lines)


@pytest.mark.parametrize("path", PAGES, ids=[str(p.relative_to(newcomer.ROOT)) for p in PAGES])
def test_the_page_replays_in_a_fresh_home(path: Path, fork_server: tuple[Path, Path]) -> None:
    result = _replay(newcomer.read_page(path), fork_server)
    assert result.ok, "\n".join([*result.failures, "--- session log (tail) ---",
                                 *result.log.splitlines()[-60:]])


def _page(tmp_path: Path, text: str) -> newcomer.Page:
    doc = tmp_path / "page.md"
    doc.write_text(text, encoding="utf-8")
    return newcomer.read_page(doc)


def test_what_is_replayed_and_what_is_not(tmp_path: Path) -> None:
    page = _page(tmp_path, (
        "```bash\nmake demo\npip install x\nsource .venv/bin/activate\n"
        "walrus-mem init   # key\nwalrus-mem init   # exit 1\nwalrus-mem demo\n```\n"
        "<!-- newcomer: skip (a server) -->\n```bash\nwalrus-mem relayer\n```\n"
        "<!-- notest -->\n```bash\nwalrus-mem get 6f1c\n```\n"
        "```console\n$ echo hi | walrus-mem remember -\nRemembered 6f1c…\n```\n"
        "```python\nprint('not shell')\n```\n"))
    assert [(line.command, line.expect) for line in page.lines] == [
        ("walrus-mem init   # key", 0), ("walrus-mem init   # exit 1", 1),
        ("echo hi | walrus-mem remember -", 0)]
    reasons = " | ".join(page.skipped)
    for why in ("setup line (make)", "setup line (pip)", "setup line (source)",
                "walrus-mem demo", "marked: a server", "marked notest"):
        assert why in reasons


def test_a_skip_marker_needs_a_reason(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a reason"):
        _page(tmp_path, "<!-- newcomer: skip -->\n```bash\nwalrus-mem list\n```\n")


def test_a_failing_command_and_a_write_to_home_fail_the_page(
        tmp_path: Path, fork_server: tuple[Path, Path]) -> None:
    page = _page(tmp_path, (
        "```bash\nwalrus-mem init\nwalrus-mem get 00000000000000000000000000000000\n"
        "walrus-mem --json keys | grep -q '\"ok\": true'\n"
        "walrus-mem --no-such-option   # exit 2\n```\n"))
    result = _replay(page, fork_server)
    assert not result.ok
    assert len(result.failures) == 1 and "get 0000" in result.failures[0], result.log
    assert "exited 1, expected 0" in result.failures[0]

    sneaky = _page(tmp_path, "```bash\nchmod u+w \"$HOME\"\ntouch \"$HOME/x\"\n```\n")
    result = _replay(sneaky, fork_server)
    assert any("wrote into HOME" in f for f in result.failures), result.log
