"""A scriptable HTTP proxy on 127.0.0.1 in front of a relayer (publisher and/or aggregator).

``hook(method, path, body)`` returns None to forward the request unchanged, or
``(status, body bytes)`` to answer it itself (it may forward first with
:meth:`HookProxy.forward` and alter the answer); ``delay(method, path)`` returns
seconds to wait before handling it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

Hook = Callable[[str, str, bytes], "tuple[int, bytes] | None"]
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
                answer = proxy.hook(method, self.path, body) if proxy.hook else None
                if answer is None:
                    response = proxy.forward(method, self.path, body, dict(self.headers.items()))
                    status, data = response.status_code, response.content
                    headers = {k: v for k, v in response.headers.items()
                               if k.lower() not in _HOP}
                else:
                    status, data = answer
                    headers = {"content-type": "application/octet-stream"}
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
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def forward(self, method: str, path: str, body: bytes = b"",
                headers: dict[str, str] | None = None) -> httpx.Response:
        headers = {k: v for k, v in (headers or {}).items() if k.lower() not in _HOP}
        return httpx.request(method, self.upstream + path, content=body, headers=headers,
                             timeout=30)

    def __enter__(self) -> HookProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
