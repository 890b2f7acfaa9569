"""Hostile HTTP servers on loopback: slow drips and huge bodies (raw sockets, one thread each).

``HostileServer(mode)`` answers every request (any method, any path) the same way:

* ``drip_body``: headers at once (Content-Length 1 MiB), then one body byte per ``interval``;
* ``drip_headers``: the status line and headers one byte per ``interval``;
* ``huge``: 200 with a declared ``size``-byte body, streamed as fast as the peer reads;
* ``huge_chunked``: 200, chunked, ``size`` bytes, no Content-Length to refuse up front;
* ``huge_json``: like ``huge_chunked`` but the body starts as a store answer's JSON.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType

_CHUNK = b"\0" * 65536


class HostileServer:
    def __init__(self, mode: str, *, interval: float = 0.2, size: int = 300 * 1024 * 1024) -> None:
        self.mode = mode
        self.interval = interval
        self.size = size
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.connections = 0
        self.bytes_sent = 0

    def __enter__(self) -> HostileServer:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()

    def _read_request(self, conn: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        chunked = b"transfer-encoding: chunked" in head.lower()
        while len(rest) < length or (chunked and not rest.endswith(b"0\r\n\r\n")):
            chunk = conn.recv(65536)
            if not chunk:
                return False
            rest += chunk
        return True

    def _send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.bytes_sent += len(data)

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.settimeout(30)
            if not self._read_request(conn):
                return
            if self.mode == "drip_body":
                self._send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n")
                self._drip(conn, b"x" * 1048576)
            elif self.mode == "drip_headers":
                self._drip(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + b"X-Pad: " +
                           b"a" * 100000 + b"\r\n\r\nok")
            elif self.mode == "huge":
                self._send(conn, f"HTTP/1.1 200 OK\r\nContent-Length: {self.size}\r\n\r\n"
                           .encode())
                self._stream(conn, self.size)
            elif self.mode in ("huge_chunked", "huge_json"):
                self._send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n")
                if self.mode == "huge_json":
                    start = b'{"newlyCreated":{"blobObject":{"id":"0x' + b"a" * 64 + b'","pad":"'
                    self._send(conn, b"%x\r\n%s\r\n" % (len(start), start))
                sent = 0
                while sent < self.size and not self._stop.is_set():
                    self._send(conn, b"%x\r\n%s\r\n" % (len(_CHUNK), _CHUNK))
                    sent += len(_CHUNK)
                self._send(conn, b"0\r\n\r\n")

    def _drip(self, conn: socket.socket, data: bytes) -> None:
        for i in range(len(data)):
            if self._stop.is_set():
                return
            self._send(conn, data[i:i + 1])
            time.sleep(self.interval)

    def _stream(self, conn: socket.socket, size: int) -> None:
        sent = 0
        while sent < size and not self._stop.is_set():
            piece = _CHUNK[: min(len(_CHUNK), size - sent)]
            self._send(conn, piece)
            sent += len(piece)
