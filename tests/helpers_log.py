"""Helpers for the namespace-log tests: HTTP relayer machines and a lying aggregator proxy."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from tests.helpers_memory import MASTER_HEX, MOCK_ADMIN_TOKEN, make_settings
from walrus_mem import Memory
from walrus_mem.testing import HashEmbedder


def machine(data_dir: Path, url: str, *, aggregator: str | None = None,
            key: str = MASTER_HEX, embedder: Any = None, **kw: Any) -> Memory:
    """A Memory ("machine") on a relayer over loopback HTTP, with the fake embedder.

    It sends MOCK_ADMIN_TOKEN, so on a RelayerServer made with that token it uses the
    mock's admin routes (deletes, epoch); on any other it sees real Walrus."""
    kw.setdefault("mock_admin_token", MOCK_ADMIN_TOKEN)
    kw.setdefault("read_deadline", 3.0)
    kw.setdefault("publish_deadline", 5.0)
    settings = make_settings(data_dir, publisher_url=url, aggregator_urls=aggregator or url, **kw)
    return Memory(settings, embedder=embedder or HashEmbedder(64), master_key=key)


def live(mem: Memory, ns: str = "default") -> dict[str, str]:
    """id -> text of every live memory."""
    return {r.id: r.text for r in mem.list(ns, limit=100_000, include_expired=True)}


def dir_snapshot(path: Path) -> dict[str, str]:
    """Relative path -> content hash of every file (SQLite's shared-memory index aside:
    it is a cache of the WAL that readers rewrite, not data; so are the empty lock
    files a pull takes, locks/*.lock)."""
    out = {}
    for p in sorted(path.rglob("*")):
        if p.is_file() and not p.name.endswith("-shm") and not (
                p.parent.name == "locks" and p.suffix == ".lock" and not p.stat().st_size):
            out[str(p.relative_to(path))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class LyingAggregator:
    """An aggregator proxy on 127.0.0.1 in front of a relayer: it forwards every GET,
    except that ``swap[blob_id]`` makes it serve the bytes of another blob instead, and
    ``hide[blob_id] = n`` makes it serve that blob ``n`` more times, then answer 404 (a
    lagging aggregator, or one that lost it) until the entry is removed."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.swap: dict[str, str] = {}
        self.served: list[str] = []
        self.hide: dict[str, int] = {}
        self.not_found: list[str] = []  # blob ids answered 404 because of ``hide``
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path
                for blob, left in list(proxy.hide.items()):
                    if path.startswith(f"/v1/blobs/{blob}"):
                        if left > 0:
                            proxy.hide[blob] = left - 1
                            continue
                        proxy.not_found.append(blob)
                        body = b'{"error": {"code": 404, "status": "NOT_FOUND"}}'
                        self.send_response(404)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                        return
                for wanted, other in proxy.swap.items():
                    if path.startswith(f"/v1/blobs/{wanted}"):
                        path = path.replace(wanted, other)
                        proxy.served.append(wanted)
                response = httpx.get(proxy.upstream + path, timeout=10)
                self.send_response(response.status_code)
                for name, value in response.headers.items():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection",
                                            "content-encoding"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(response.content)))
                self.end_headers()
                self.wfile.write(response.content)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> LyingAggregator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class Interrupt(BaseException):
    """Stands for the process being killed mid-restore (not an Exception: nothing catches it)."""


def kill_after(count: int) -> Callable[[int, int], None]:
    """A progress callback that 'kills' the restore once ``count`` facts are done."""

    def progress(done: int, total: int) -> None:
        if done >= count and done < total:
            raise Interrupt(f"killed at {done}/{total}")

    return progress


@contextmanager
def opened(mem: Memory) -> Iterator[Memory]:
    try:
        yield mem
    finally:
        mem.close()
