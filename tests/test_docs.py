"""The code in README.md and docs/*.md runs, so the documentation cannot rot.

Conventions for everyone who writes docs (a fenced block's *info string* is the
word after the opening backticks):

* ```` ```python ```` blocks run, in file order, in one namespace per file (a
  later block may use names an earlier block defined). They run in a temp
  working directory with a temp data dir, ``WALRUS_MEM_MASTER_KEY`` set to the
  public test-vector seed, no config file, and a fast fake embedder
  (:class:`walrus_mem.testing.HashEmbedder`) instead of the real model, so
  examples must not depend on semantic quality. Host names other than loopback
  do not resolve (tests never contact the network). Anything a block leaves open
  with a ``close()`` method is closed at the end.
* ```` ```console ```` blocks: lines starting with ``$ walrus-mem`` run through
  the CLI in-process; other lines are expected output and are not compared.
  ```` ```bash ````, ```` ```sh ```` and ```` ```shell ```` blocks: every line starting
  with ``walrus-mem`` runs. ``export NAME=value`` lines set the environment for
  the commands after them (in that file). A command must exit 0 unless it ends
  with a comment ``# exit N``. Commands are skipped (not run) when they contain
  shell syntax (``| > < ; & $ `` and backticks), or are long-running servers or
  model-loading (``demo``, ``relayer``, ``mcp``, ``doctor`` without
  ``--no-model``). Other commands (``make``, ``pip``) are never run here.
* ```` ```toml ```` blocks must load as a config file with ``Settings.load``; every
  ``${VAR}`` they reference is set to a fresh 64-hex-character value (a valid
  Ed25519 seed and master key) for the test.
* To exclude a block, add ``notest`` to its info string (```` ```python notest ````)
  or put ``<!-- notest -->`` on the line before the fence. Use it for fragments
  and for examples that need network access, an API key or the real model.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import nacl.signing
import pytest

from walrus_mem.testing import HashEmbedder

from .helpers_cli import TEST_MASTER_HEX, invoke
from .markdown_blocks import fenced_blocks

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_SHELL_SYNTAX = re.compile(r"[|<>;&`$]")
_SKIP_SUBCOMMANDS = {"demo", "relayer", "mcp"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    info: str
    code: str
    notest: bool

    @property
    def where(self) -> str:
        shown = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{shown}:{self.line}"


def extract_blocks(path: Path) -> list[Block]:
    """Fenced code blocks of a Markdown file, with their language and notest marker."""
    return [Block(path=path, line=b.fence_line + 1, lang=b.lang, info=b.info,
                  code="\n".join(b.body) + "\n", notest=b.notest)
            for b in fenced_blocks(path)]


def blocks_of(lang: set[str]) -> list[tuple[Path, list[Block]]]:
    out = []
    for path in DOC_FILES:
        if not path.exists():
            continue
        blocks = [b for b in extract_blocks(path) if b.lang in lang and not b.notest]
        if blocks:
            out.append((path, blocks))
    return out


def _ids(items: list[tuple[Path, list[Block]]]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p, _ in items]


_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


@pytest.fixture
def docs_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Temp cwd, test master key, no user config, fake embedder, no network but loopback."""
    import socket

    real_getaddrinfo = socket.getaddrinfo

    def loopback_only(host: object, *args: object, **kwargs: object) -> object:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name not in _LOCAL_HOSTS and not name.startswith("127."):
            raise OSError(f"docs examples may not contact {name!r}: mark the block notest")
        return real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))

    def fake_make_embedder(model: str = "", **_: object) -> HashEmbedder:
        return HashEmbedder(dim=64)

    for name, module in list(sys.modules.items()):
        if name.startswith("walrus_mem") and hasattr(module, "make_embedder"):
            monkeypatch.setattr(module, "make_embedder", fake_make_embedder)
    return tmp_path


def _close_all(namespace: dict[str, object]) -> None:
    for value in namespace.values():
        close = getattr(value, "close", None)
        module = getattr(type(value), "__module__", "") or ""
        if callable(close) and module.startswith("walrus_mem"):
            try:
                close()
            except Exception:  # best-effort cleanup only
                pass


# -- python -------------------------------------------------------------------


PYTHON_DOCS = blocks_of({"python", "py"})


@pytest.mark.parametrize(("path", "blocks"), PYTHON_DOCS, ids=_ids(PYTHON_DOCS))
def test_python_blocks_run(path: Path, blocks: list[Block], docs_env: Path) -> None:
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    try:
        for block in blocks:
            code = compile(block.code, f"<{block.where}>", "exec")
            try:
                exec(code, namespace)
            except Exception as exc:
                raise AssertionError(
                    f"python block at {block.where} failed: {type(exc).__name__}: {exc}"
                ) from exc
    finally:
        _close_all(namespace)


# -- console / bash -------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    argv: list[str]
    expect: int
    where: str


def shell_commands(block: Block) -> list[Command | tuple[str, str]]:
    """CLI commands to run and ``(NAME, value)`` exports, in order."""
    out: list[Command | tuple[str, str]] = []
    for offset, raw in enumerate(block.code.splitlines(), start=1):
        line = raw.strip()
        if block.lang == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:].strip()
        expect = 0
        m = re.search(r"#\s*exits?\s+(\d+)\s*$", line)
        if m:
            expect = int(m.group(1))
        line = line.split(" #", 1)[0].strip() if " #" in line else line
        where = f"{block.where}+{offset}"
        if line.startswith("export ") and "=" in line:
            name, _, value = line[len("export "):].partition("=")
            out.append((name.strip(), shlex.split(value)[0] if value.strip() else ""))
            continue
        if not line.startswith("walrus-mem") or _SHELL_SYNTAX.search(line):
            continue
        argv = shlex.split(line)[1:]
        subcommands = [a for a in argv if not a.startswith("-")]
        if subcommands and subcommands[0] in _SKIP_SUBCOMMANDS:
            continue
        if subcommands and subcommands[0] == "doctor" and "--no-model" not in argv:
            continue
        out.append(Command(argv, expect, where))
    return out


SHELL_DOCS = blocks_of({"console", "bash", "sh", "shell"})


@pytest.mark.parametrize(("path", "blocks"), SHELL_DOCS, ids=_ids(SHELL_DOCS))
def test_cli_examples_run(path: Path, blocks: list[Block], docs_env: Path) -> None:
    env: dict[str, str] = {}
    for block in blocks:
        for item in shell_commands(block):
            if isinstance(item, tuple):
                env[item[0]] = item[1]
                continue
            try:
                invoke(item.argv, expect=item.expect, env=env)
            except AssertionError as exc:
                raise AssertionError(f"command at {item.where} failed:\n{exc}") from None


# -- toml ----------------------------------------------------------------------


TOML_DOCS = blocks_of({"toml"})


@pytest.mark.parametrize(("path", "blocks"), TOML_DOCS, ids=_ids(TOML_DOCS))
def test_toml_examples_load(
    path: Path, blocks: list[Block], docs_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from walrus_mem.config import Settings

    for n, block in enumerate(blocks):
        for name in set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", block.code)):
            if not os.environ.get(name):
                monkeypatch.setenv(name, bytes(nacl.signing.SigningKey.generate()).hex())
        cfg = docs_env / f"example-{n}.toml"
        cfg.write_text(block.code, encoding="utf-8")
        try:
            Settings.load(config_file=cfg)
        except Exception as exc:
            raise AssertionError(f"toml block at {block.where} does not load: {exc}") from exc


# -- coverage of the reference docs ----------------------------------------------------


def test_every_setting_is_documented() -> None:
    from walrus_mem.config import AgentConfig, Settings

    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [f for f in [*Settings.model_fields, *AgentConfig.model_fields]
               if f"`{f}`" not in text]
    assert not missing, f"docs/configuration.md does not mention {missing}"


def test_every_cli_command_is_documented() -> None:
    import click

    from walrus_mem._cli.main import cli

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    ctx = click.Context(cli)
    names: list[str] = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        names.append(name)
        if isinstance(command, click.Group):
            names += [f"{name} {sub}" for sub, c in command.commands.items() if not c.hidden]
    missing = [n for n in names if f"walrus-mem {n}" not in text]
    assert not missing, f"docs/cli.md does not document {missing}"


def test_readme_opens_with_the_two_commands() -> None:
    lines = [ln for ln in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
             if ln.strip()]
    first_block = extract_blocks(ROOT / "README.md")[0]
    commands = [ln.split("#")[0].strip() for ln in first_block.code.splitlines() if ln.strip()]
    assert commands == ["make demo", "make test"]
    assert lines[0].startswith("# ")


def test_doc_links_resolve() -> None:
    """Relative links between the docs point at files that exist."""
    broken = []
    for path in DOC_FILES:
        if not path.exists():
            continue
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text("utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not broken, f"broken links: {broken}"


def test_docs_env_blocks_the_network(docs_env: Path) -> None:
    import socket

    with pytest.raises(OSError, match="notest"):
        socket.getaddrinfo("example.com", 443)
    assert socket.getaddrinfo("127.0.0.1", 80)


def test_block_extraction_and_notest_markers(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "text\n```python\nprint(1)\n```\n\n<!-- notest -->\n\n```python\nboom\n```\n"
        "```python notest\nboom\n```\n````bash\nwalrus-mem list   # exit 0\n````\n"
    )
    blocks = extract_blocks(doc)
    assert [(b.lang, b.notest, b.line) for b in blocks] == [
        ("python", False, 2), ("python", True, 8), ("python", True, 11), ("bash", False, 14)]
    (cmd,) = shell_commands(blocks[3])
    assert isinstance(cmd, Command) and cmd.argv == ["list"] and cmd.expect == 0


def test_readme_threat_model_is_three_sentences() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Threat model in three sentences", 1)[1].split("\n## ", 1)[0]
    paragraph = " ".join(section.strip().split("\n\n")[0].split())
    sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", paragraph) if s]
    assert len(sentences) == 3, sentences
