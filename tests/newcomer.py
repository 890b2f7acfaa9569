"""The newcomer replay: README's and the docs' shell commands, run as a new user would.

Each page (README.md, then docs/*.md by name) is replayed in one ``bash`` session of
its own, as someone following it in a terminal: a fresh, read-only ``HOME``, a fresh
``WALRUS_MEM_HOME`` (config, key file, data dir with the embedded relayer, state, caches),
a fresh working directory, no keyring (``init`` falls back to the key file and says why),
no network but loopback, the fast fake embedder (``embedding_model = "test-hash"``; the
packaged model with ``--real-model``). Every command must exit 0, or the code its line
ends with (``# exit N``). A page whose first ``walrus-mem`` command is not ``init`` gets
``walrus-mem init`` first (what README's quickstart did). Afterwards HOME must still be
empty.

What is replayed: the lines of ```` ```sh ````, ```` ```bash ````, ```` ```shell ```` blocks
(comments aside) and the ``$ `` lines of ```` ```console ```` blocks. Not replayed:

* setup lines, whose first word is ``make``, ``pip`` or ``source`` (installing is out of
  scope: the replay runs inside the installed .venv) and ``walrus-mem demo`` (its own
  world, tested by tests/test_demo.py);
* blocks marked ``notest`` (tests/test_docs.py: fragments, placeholders);
* blocks after a ``<!-- newcomer: skip (reason) -->`` line: illustrative commands, servers
  that run until Ctrl-C, anything that needs the real Walrus or a network. The reason is
  required.

Two ways to run it:

* ``tests/test_newcomer.py`` (in ``make test``): ``walrus-mem`` on the session's PATH is a
  20 ms client of a fork server that imported the CLI once, so each command is a fresh
  forked process with its own stdin/stdout/stderr, arguments, environment and working
  directory, without paying the import each time (about 1 s here);
* ``python -m tests.newcomer [--real] [--real-model] [--keep] [PAGE ...]``: the same, or
  with ``--real`` the installed ``walrus-mem`` console script for every command (slow,
  the most faithful).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .markdown_blocks import fenced_blocks

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGS = {"sh", "bash", "shell", "console"}
SKIP_MARKER = re.compile(r"^\s*<!--\s*newcomer:\s*skip\s*(?P<reason>.*?)\s*-->\s*$")
SETUP_WORDS = {"make", "pip", "source"}
NOT_REPLAYED_SUBCOMMANDS = {"demo"}
_EXIT = re.compile(r"#\s*exits?\s+(\d+)\s*$")
FAIL_CODE = 97


@dataclass
class Line:
    where: str  # page:line
    command: str
    expect: int


@dataclass
class Page:
    path: Path
    lines: list[Line] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "where: why"

    @property
    def name(self) -> str:
        path = self.path.resolve()
        return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def _blocks(path: Path) -> Iterator[tuple[int, str, list[str], str | None]]:
    """(first body line, language, body lines, why skipped or None) per fenced block."""
    for block in fenced_blocks(path):
        why = None
        marker = SKIP_MARKER.match(block.before)
        if marker:
            reason = marker.group("reason").strip("() ")
            if not reason:
                raise ValueError(f"{path.name}:{block.before_line + 1}: <!-- newcomer: skip --> "
                                 "needs a reason: <!-- newcomer: skip (why) -->")
            why = f"marked: {reason}"
        elif block.notest:
            why = "marked notest"
        yield block.fence_line + 2, block.lang, block.body, why


def read_page(path: Path) -> Page:
    """The commands of one page to replay, in order, and what is not replayed and why."""
    page = Page(path)
    for first, lang, body, why in _blocks(path):
        if lang not in SHELL_LANGS:
            continue
        where0 = f"{page.name}:{first}"
        if why is not None:
            page.skipped.append(f"{where0}: {why}")
            continue
        pending = ""
        for offset, raw in enumerate(body):
            text = raw.strip()
            if lang == "console":
                if not text.startswith("$ "):
                    continue
                text = text[2:].strip()
            if not text or text.startswith("#"):
                continue
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            text, pending = pending + text, ""
            where = f"{page.name}:{first + offset}"
            m = _EXIT.search(text)
            words = shlex.split(text, comments=True) if text else []
            if not words:
                continue
            if words[0] in SETUP_WORDS:
                page.skipped.append(f"{where}: setup line ({words[0]}), out of scope")
                continue
            subcommands = [w for w in words[1:] if not w.startswith("-")]
            if words[0] == "walrus-mem" and subcommands[:1] and \
                    subcommands[0] in NOT_REPLAYED_SUBCOMMANDS:
                page.skipped.append(f"{where}: walrus-mem {subcommands[0]} (tested on its own)")
                continue
            page.lines.append(Line(where, text, int(m.group(1)) if m else 0))
    return page


def _needs_init(page: Page) -> bool:
    for line in page.lines:
        words = shlex.split(line.command, comments=True)
        if "walrus-mem" in words:
            rest = [w for w in words[words.index("walrus-mem") + 1:] if not w.startswith("-")]
            return rest[:1] != ["init"]
    return False


def bash_script(page: Page) -> str:
    """The page as one bash session: each command, then a check of its exit code."""
    out = ["set -o pipefail", "__failed=0"]
    if _needs_init(page):
        out += ["echo '::: (prelude: README quickstart) $ walrus-mem init' >&2",
                "walrus-mem init >/dev/null || { echo 'NEWCOMER-FAIL prelude init' >&2; "
                f"exit {FAIL_CODE}; }}"]
    for line in page.lines:
        label = shlex.quote(f"::: {line.where} $ {line.command}")
        out.append(f"echo {label} >&2")
        out.append(line.command)
        fail = shlex.quote(f"NEWCOMER-FAIL {line.where}: `{line.command}` exited ")
        expect = shlex.quote(f", expected {line.expect}")
        out.append(f'__rc=$?; if [ "$__rc" -ne {line.expect} ]; then echo {fail}"$__rc"'
                   f"{expect} >&2; __failed=1; fi")
    out.append(f'[ "$__failed" -eq 0 ] || exit {FAIL_CODE}')
    return "\n".join(out) + "\n"


# -- the fork server ---------------------------------------------------------------


CLIENT = """\
#!{python} -S
# walrus-mem for the newcomer replay: hands argv, environment, working directory and
# stdin/stdout/stderr to the fork server (tests/newcomer.py), exits with its code
import json, os, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect({sock!r})
body = json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd()}})
data = body.encode()
socket.send_fds(s, [struct.pack("!I", len(data)) + data], [0, 1, 2])
got = b""
while len(got) < 4:
    chunk = s.recv(4 - len(got))
    if not chunk:
        break
    got += chunk
sys.exit(struct.unpack("!i", got)[0] if len(got) == 4 else 1)
"""

#: What the server imports before forking (what a command would import anyway).
PRELOAD = ["walrus_mem._cli.main", "walrus_mem.memory", "walrus_mem._memory.async_memory",
           "walrus_mem._cli.doctor", "walrus_mem._cli.demo", "relayer_mock.app",
           "walrus_mem._recall.embeddings", "walrus_mem.testing"]


def serve(sock_path: str) -> None:
    """Accept client connections; fork a child per command that runs it and reports."""
    import importlib
    import signal

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(sock_path)
    srv.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        if os.fork() == 0:
            srv.close()
            _child(conn)  # never returns
        conn.close()


def _child(conn: socket.socket) -> None:
    import atexit
    import io
    import random
    import signal
    import traceback

    # what a new process would have: its own waits on its children, its own random state
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    random.seed()
    code = 1
    try:
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        (size,) = struct.unpack("!I", msg[:4])
        body = msg[4:]
        while len(body) < size:
            body += conn.recv(size - len(body))
        req = json.loads(body)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), encoding="utf-8",
                                      line_buffering=True)
        sys.stderr = io.TextIOWrapper(open(2, "wb", closefd=False), encoding="utf-8",
                                      line_buffering=True)
        sys.argv = ["walrus-mem", *req["argv"]]
        from walrus_mem._cli.main import cli

        try:
            cli.main(args=req["argv"], prog_name="walrus-mem")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        try:
            conn.sendall(struct.pack("!i", code))
        finally:
            os._exit(code)


class ForkServer:
    """The server process and the client script that talks to it."""

    def __init__(self, base: Path, env: dict[str, str]) -> None:
        self.bin = base / "bin"
        self.bin.mkdir()
        sock = str(base / "fork.sock")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.newcomer", "--serve", sock], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the newcomer fork server did not start")
        client = self.bin / "walrus-mem"
        client.write_text(CLIENT.format(python=sys.executable, sock=sock), encoding="utf-8")
        client.chmod(0o755)

    def close(self) -> None:
        """Stop the server and every command it forked (one process group)."""
        import signal

        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


# -- replaying ---------------------------------------------------------------------


@dataclass
class Result:
    page: Page
    returncode: int
    log: str
    seconds: float

    @property
    def failures(self) -> list[str]:
        return [ln for ln in self.log.splitlines() if ln.startswith("NEWCOMER-FAIL")]

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.failures


def base_env(*, real_model: bool) -> dict[str, str]:
    """The environment of a new user's shell: PATH and locale, nothing of walrus-mem."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "SYSTEMROOT", "TZ")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1",
               NO_PROXY="*", no_proxy="*")
    if not real_model:
        env["WALRUS_MEM_EMBEDDING_MODEL"] = "test-hash"
    return env


def replay(page: Page, base: Path, env: dict[str, str], bin_dir: Path,
           timeout: float = 120) -> Result:
    """Run one page in a fresh HOME, WALRUS_MEM_HOME and working directory."""
    root = Path(tempfile.mkdtemp(prefix=re.sub(r"[^A-Za-z0-9]+", "-", page.name) + "-",
                                 dir=base))
    home, work = root / "home", root / "work"
    for d in (home, work, root / "tmp"):
        d.mkdir(parents=True)
    page_env = dict(env, HOME=str(home), WALRUS_MEM_HOME=str(root / "walrus-mem"),
                    TMPDIR=str(root / "tmp"),
                    PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    home.chmod(0o500)
    start = time.perf_counter()
    log_path = root / "log.txt"
    try:
        with log_path.open("w", encoding="utf-8") as log_file:
            try:
                returncode = subprocess.run(
                    ["bash", "--noprofile", "--norc", "-c", bash_script(page)], cwd=work,
                    env=page_env, stdin=subprocess.DEVNULL, stdout=log_file,
                    stderr=subprocess.STDOUT, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                returncode = FAIL_CODE
                log_file.write(f"\nNEWCOMER-FAIL {page.name}: still running after {timeout} s "
                               "(a server? mark its block <!-- newcomer: skip (why) -->)\n")
    finally:
        home.chmod(0o700)
    log = log_path.read_text(encoding="utf-8", errors="replace")
    left = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    if left:
        log += f"\nNEWCOMER-FAIL {page.name}: wrote into HOME: {left[:10]}\n"
    return Result(page, returncode, log, time.perf_counter() - start)


def replay_all(pages: list[Path], *, real: bool = False, real_model: bool = False,
               base: Path | None = None) -> list[Result]:
    own = base is None
    base = Path(tempfile.mkdtemp(prefix="newcomer-")) if base is None else base
    env = base_env(real_model=real_model)
    server = None
    try:
        if real:
            bin_dir = Path(sys.executable).parent
        else:
            server = ForkServer(base, dict(env, HOME=str(base), PYTHONPATH=str(ROOT)))
            bin_dir = server.bin
        return [replay(read_page(p), base, env, bin_dir) for p in pages]
    finally:
        if server is not None:
            server.close()
        if own and not os.environ.get("NEWCOMER_KEEP"):
            shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="pages (default: README + docs)")
    parser.add_argument("--real", action="store_true",
                        help="run the installed walrus-mem for every command (slow)")
    parser.add_argument("--real-model", action="store_true",
                        help="the packaged embedding model instead of the fake one")
    parser.add_argument("--keep", action="store_true", help="keep the temp dirs")
    parser.add_argument("--serve", metavar="SOCKET", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    if args.keep:
        os.environ["NEWCOMER_KEEP"] = "1"
    pages = [p.resolve() for p in args.pages] or PAGES
    results = replay_all(pages, real=args.real, real_model=args.real_model)
    for result in results:
        status = "ok" if result.ok else "FAILED"
        print(f"{result.page.name}: {len(result.page.lines)} commands, "
              f"{len(result.page.skipped)} not replayed, {result.seconds:.1f} s, {status}")
        for failure in result.failures:
            print(f"  {failure}")
    print(json.dumps({"commands": sum(len(r.page.lines) for r in results),
                      "seconds": round(sum(r.seconds for r in results), 1)}))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
