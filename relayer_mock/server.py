"""Run relayer_mock over real loopback HTTP: in a thread (RelayerServer) or as a separate
process (RelayerProcess, for crash and multi-process tests).

A socket-served relayer's ``/_mock/`` admin routes always need its admin token: both know
it (``admin_token``) and hand out clients that send it (``client()``, ``admin_headers``).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import httpx
import uvicorn

from ._admin_auth import (
    ADMIN_TOKEN_ENV,
    ADMIN_TOKEN_FILE,
    ADMIN_TOKEN_HEADER,
    check_token,
    is_loopback,
)
from .app import SimulatedDisconnect, create_app
from .faults import FaultConfig

LOOPBACK = "127.0.0.1"
_URL_RE = re.compile(r"(http://[0-9a-zA-Z.\[\]:-]+)")


class _DropNoiseFilter(logging.Filter):
    """Hide uvicorn's traceback for connections the fault injector drops on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, SimulatedDisconnect)


_filter_installed = False
_filter_lock = threading.Lock()


def install_log_filter() -> None:
    global _filter_installed
    with _filter_lock:
        if not _filter_installed:
            logging.getLogger("uvicorn.error").addFilter(_DropNoiseFilter())
            _filter_installed = True


def bind_socket(host: str = LOOPBACK, port: int = 0) -> socket.socket:
    """A listening TCP socket (port 0: a free port chosen by the OS)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit this; without it every response waits ~40 ms for the
    # client's delayed ACK (headers and body are separate writes).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_for(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def uvicorn_config(app: Any, *, log_level: str = "warning", library: bool = True) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        http="h11",
        loop="asyncio",
        ws="none",
        timeout_graceful_shutdown=5,
        # As a library, leave the host process's logging configuration alone.
        log_config=None if library else uvicorn.config.LOGGING_CONFIG,
    )


class RelayerServer:
    """relayer_mock served by uvicorn in a background thread on 127.0.0.1.

        with RelayerServer(tmp_path / "walrus", faults=FaultConfig.mix(0.3, seed=1)) as server:
            httpx.get(f"{server.url}/status")
            with server.client() as client:          # sends the admin token
                client.get("/_mock/stats")

    Args:
        data_dir: durable state directory (may be shared with other servers).
        faults: fault-injection settings (default none).
        port: 0 picks a free port.
        metrics_port: serve the daemon's Prometheus ``/metrics`` (its
            ``walrus_contract_info`` gauge naming the system object) on this loopback port
            (0: a free one), as ``walrus daemon --metrics-address`` does; :attr:`metrics_url`.
        admin_token: the token the ``/_mock/`` routes require (default: a random one);
            :attr:`admin_token` holds it (``None`` with ``admin=False``).
        allow_remote: allow a non-loopback ``host`` (refused otherwise).
        **app_kwargs: passed to :func:`relayer_mock.app.create_app` (``open_admin`` is
            refused: a socket reaches beyond this process).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        faults: FaultConfig | None = None,
        host: str = LOOPBACK,
        port: int = 0,
        log_level: str = "warning",
        startup_timeout: float = 30.0,
        admin_token: str | None = None,
        allow_remote: bool = False,
        metrics_port: int | None = None,
        **app_kwargs: Any,
    ) -> None:
        if not allow_remote and not is_loopback(host):
            raise ValueError(f"refusing to serve on non-loopback address {host!r}: anyone "
                             "who reaches it can store and read blobs; pass allow_remote=True")
        if app_kwargs.get("open_admin"):
            raise ValueError("a served relayer's admin routes always need the admin token")
        self.data_dir = Path(data_dir)
        self.host = host
        self.app = create_app(self.data_dir, faults=faults, admin_token=admin_token,
                              **app_kwargs)
        self.admin_token: str | None = self.relayer.admin_token
        self._port = port
        self._log_level = log_level
        self._startup_timeout = startup_timeout
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.url = ""
        self._metrics_port = metrics_port
        self.metrics: Any = None
        self.metrics_url = ""  # with metrics_port: the daemon's /metrics (_metrics.py)

    @property
    def relayer(self) -> Any:
        """The :class:`relayer_mock.app.Relayer` behind the server."""
        return self.app.state.relayer

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1]) if self.url else self._port

    @property
    def admin_headers(self) -> dict[str, str]:
        """The header carrying the admin token (empty without admin routes)."""
        return {ADMIN_TOKEN_HEADER: self.admin_token} if self.admin_token else {}

    def client(self, **kwargs: Any) -> httpx.Client:
        """An ``httpx.Client`` on :attr:`url` that sends the admin token.

        The token goes in its own header, so an ``Authorization`` JWT for the publisher
        routes (``headers=``) can ride along."""
        headers = {**self.admin_headers, **kwargs.pop("headers", {})}
        return httpx.Client(base_url=self.url, headers=headers, **kwargs)

    def async_client(self, **kwargs: Any) -> httpx.AsyncClient:
        headers = {**self.admin_headers, **kwargs.pop("headers", {})}
        return httpx.AsyncClient(base_url=self.url, headers=headers, **kwargs)

    def start(self) -> RelayerServer:
        """Bind, start serving, and return once the server accepts requests."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        install_log_filter()
        self._sock = bind_socket(self.host, self._port)
        self.url = url_for(self._sock)
        self._server = uvicorn.Server(uvicorn_config(self.app, log_level=self._log_level))
        sockets = [self._sock]
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": sockets},
            name=f"relayer-mock-{self.port}", daemon=True,
        )
        self._thread.start()
        if self._metrics_port is not None:
            from ._metrics import MetricsServer

            self.metrics = MetricsServer(self.data_dir, port=self._metrics_port)
            self.metrics_url = self.metrics.url
        deadline = time.monotonic() + self._startup_timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("relayer_mock server thread exited during startup")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("relayer_mock server did not start in time")
            time.sleep(0.005)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful shutdown; idempotent."""
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive() and self._server is not None:
                self._server.force_exit = True
                self._thread.join(timeout)
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self.relayer.store.close()

    def __enter__(self) -> RelayerServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RelayerServer(url={self.url!r}, data_dir={str(self.data_dir)!r})"


def fault_args(faults: FaultConfig | None) -> list[str]:
    """Command-line arguments reproducing ``faults`` (``--faults-json``)."""
    if faults is None:
        return []
    return ["--faults-json", faults.model_dump_json()]


class RelayerProcess:
    """``python -m relayer_mock`` as a child process on 127.0.0.1 (free port by default).

    Waits until the process printed its URL and answers ``GET /status``. ``stop()`` sends
    SIGTERM (graceful), ``kill()`` SIGKILL (a crash).

    Args:
        data_dir: durable state directory (may be shared with other processes).
        faults: fault-injection settings, passed as ``--faults-json``.
        extra_args: more command-line options (e.g. ``["--epoch-duration", "2"]``).
        admin_token: passed in ``$RELAYER_MOCK_ADMIN_TOKEN`` (never on the command line,
            which other local users can read); default: the process's own token file
            ``<data_dir>/admin-token``, read once it started. Either way in
            :attr:`admin_token`.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        faults: FaultConfig | None = None,
        port: int = 0,
        extra_args: list[str] | tuple[str, ...] = (),
        log_level: str = "warning",
        startup_timeout: float = 60.0,
        env: dict[str, str] | None = None,
        stderr: int | IO[Any] | None = None,
        admin_token: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self._given_token = None if admin_token is None else check_token(admin_token)
        self.admin_token: str | None = self._given_token
        self.args = [
            sys.executable, "-m", "relayer_mock",
            "--host", LOOPBACK, "--port", str(port), "--data-dir", str(self.data_dir),
            "--log-level", log_level, *fault_args(faults), *extra_args,
        ]
        self._startup_timeout = startup_timeout
        self._env = env
        self._stderr = stderr
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError("process not started")
        return self.process.pid

    def start(self) -> RelayerProcess:
        env = dict(os.environ if self._env is None else self._env)
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root, env.get("PYTHONPATH", "")) if p
        )
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.pop(ADMIN_TOKEN_ENV, None)
        if self._given_token is not None:
            env[ADMIN_TOKEN_ENV] = self._given_token
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL,
            text=True, env=env,
        )
        deadline = time.monotonic() + self._startup_timeout
        first_line: list[str] = []
        got_line = threading.Event()
        reader = threading.Thread(
            target=self._read_url, args=(first_line, got_line), daemon=True,
            name="relayer-mock-stdout",
        )
        reader.start()
        got_line.wait(self._startup_timeout)
        if not first_line or not (match := _URL_RE.search(first_line[0])):
            self.kill()
            raise RuntimeError(f"relayer_mock process did not report its URL: {first_line!r}")
        self.url = match.group(1)
        if self._given_token is None:
            # written before the URL line; absent with --no-admin
            token_file = self.data_dir / ADMIN_TOKEN_FILE
            self.admin_token = (token_file.read_text(encoding="ascii").strip()
                                if token_file.exists() else None)
        while True:
            try:
                if httpx.get(f"{self.url}/status", timeout=2.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("relayer_mock process did not become ready")
            time.sleep(0.02)

    @property
    def admin_headers(self) -> dict[str, str]:
        return {ADMIN_TOKEN_HEADER: self.admin_token} if self.admin_token else {}

    def client(self, **kwargs: Any) -> httpx.Client:
        """An ``httpx.Client`` on :attr:`url` that sends the admin token."""
        headers = {**self.admin_headers, **kwargs.pop("headers", {})}
        return httpx.Client(base_url=self.url, headers=headers, **kwargs)

    def _read_url(self, out: list[str], got_line: threading.Event) -> None:
        assert self.process is not None and self.process.stdout is not None
        stream = self.process.stdout
        out.append(stream.readline())
        got_line.set()
        # Keep draining so the child never blocks on a full pipe.
        for _ in stream:
            pass

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``); returns the exit code.

        uvicorn re-raises the signal after its graceful shutdown, so a clean stop exits with
        ``-SIGTERM`` (-15).
        """
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        return self.process.returncode

    def kill(self) -> int | None:
        """SIGKILL: simulate a crash."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.kill()
        return self.process.wait(15)

    def __enter__(self) -> RelayerProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RelayerProcess(url={self.url!r}, data_dir={str(self.data_dir)!r})"
