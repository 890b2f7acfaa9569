"""A scriptable HTTP proxy on loopback in front of a relayer (publisher and/or aggregator).

``hook(method, path)`` returns None (forward the request) or ``(status, body)`` to answer
itself; ``delay(method, path)`` returns seconds to wait before handling it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

Hook = Callable[[str, str], "tuple[int, bytes] | None"]
Delay = Callable[[str, str], float]
_HOP = {"content-length", "transfer-encoding", "connection", "content-encoding", "host"}


class HookProxy:
    def __init__(self, upstream: str, hook: Hook | None = None,
                 delay: Delay | None = None) -> None:
        self.upstream, self.hook, self.delay = upstream, hook, delay
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _go(self, method: str) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else b""
                wait = proxy.delay(method, self.path) if proxy.delay else 0.0
                if wait:
                    time.sleep(wait)
                answer = proxy.hook(method, self.path) if proxy.hook else None
                headers: dict[str, str] = {}
                if answer is None:
                    r = httpx.request(method, proxy.upstream + self.path, content=body,
                                      headers={k: v for k, v in self.headers.items()
                                               if k.lower() not in _HOP}, timeout=30)
                    status, data = r.status_code, r.content
                    headers = {k: v for k, v in r.headers.items() if k.lower() not in _HOP}
                else:
                    status, data = answer
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._go("GET")

            def do_PUT(self) -> None:
                self._go("PUT")

            def do_POST(self) -> None:
                self._go("POST")

            def do_DELETE(self) -> None:
                self._go("DELETE")

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def __enter__(self) -> HookProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
