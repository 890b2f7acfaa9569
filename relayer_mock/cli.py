"""Command line: ``python -m relayer_mock [options]`` (also mountable as ``walrus-mem relayer``).

    from relayer_mock.cli import relayer_command   # a click.Command
    cli.add_command(relayer_command, name="relayer")
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from . import _cost as cost
from ._admin_auth import (
    ADMIN_TOKEN_ENV,
    ADMIN_TOKEN_HEADER,
    check_token,
    is_loopback,
    load_or_create_token,
)
from ._realism import StoreLatency
from .app import DEFAULT_MAX_BLOB_SIZE, DEFAULT_MAX_QUILT_SIZE, create_app
from .faults import FaultConfig, parse_kinds, parse_range_ms

DEFAULT_PORT = 31415
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "ki": 1024, "kib": 1024,
          "m": 1000**2, "mb": 1000**2, "mi": 1024**2, "mib": 1024**2,
          "g": 1000**3, "gb": 1000**3, "gi": 1024**3, "gib": 1024**3}


def parse_size(text: str) -> int:
    """``"10MiB"`` -> 10485760; ``"1000"`` -> 1000; ``"2k"`` -> 2000."""
    match = _SIZE_RE.match(text)
    unit = (match.group(2) or "").lower() if match else None
    if not match or unit not in _UNITS:
        raise ValueError(f"invalid size {text!r} (e.g. 1048576, 512KiB, 10MiB)")
    return int(match.group(1)) * _UNITS[unit]


def default_data_dir() -> Path:
    env = os.environ.get("RELAYER_MOCK_DATA_DIR")
    if env:
        return Path(env)
    home = os.environ.get("WALRUS_MEM_HOME")  # walrus_mem's one root for its files
    if home:
        return Path(home).expanduser() / "data" / "relayer"
    import platformdirs

    return Path(platformdirs.user_data_dir("walrus-mem")) / "relayer"


class _SizeType(click.ParamType):  # type: ignore[type-arg]
    name = "SIZE"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def build_fault_config(
    *,
    fault_rate: float = 0.0,
    seed: int | None = None,
    fault_kinds: str = "all",
    fault_probs: Sequence[str] = (),
    lying: float = 0.0,
    latency_ms: str = "0",
    fault_latency_ms: str = "10-100",
    retry_after: int = 0,
    rate_limit_body: str = "mixed",
    fault_scope: str = "all",
    faults_json: str | None = None,
) -> FaultConfig:
    """Turn the CLI's fault options into a FaultConfig (``faults_json`` wins if given)."""
    if faults_json:
        return FaultConfig.model_validate_json(faults_json)
    probabilities: dict[str, float] = {}
    for item in fault_probs:
        kind, sep, prob = item.partition("=")
        if not sep:
            raise ValueError(f"--fault expects KIND=PROBABILITY, got {item!r}")
        for parsed in parse_kinds(kind):
            probabilities[parsed.value] = float(prob)
    if lying:
        probabilities["lie"] = lying
    return FaultConfig.model_validate({
        "rate": fault_rate,
        "seed": seed,
        "kinds": parse_kinds(fault_kinds),
        "probabilities": probabilities,
        "latency_ms": parse_range_ms(latency_ms),
        "fault_latency_ms": parse_range_ms(fault_latency_ms),
        "retry_after": retry_after,
        "rate_limit_body": rate_limit_body,
        "scope": fault_scope,
    })


@click.command(
    name="relayer",
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
)
@click.option("--host", default="127.0.0.1",
              help="Address to bind; a non-loopback one needs --allow-remote.")
@click.option("--allow-remote", is_flag=True,
              help="Allow a non-loopback --host. Anyone who reaches it can store and read "
                   "blobs (add --jwt-secret); the admin routes still need the admin token.")
@click.option("--port", default=DEFAULT_PORT, type=click.IntRange(0, 65535),
              help="Port to bind; 0 picks a free one.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Also serve the daemon's Prometheus GET /metrics (its walrus_contract_info "
                   "gauge, naming this mock network's system object) on this loopback port, "
                   "as walrus daemon --metrics-address does; 0 picks a free one.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="State directory [default: $RELAYER_MOCK_DATA_DIR, "
                   "$WALRUS_MEM_HOME/data/relayer or the user data dir walrus-mem/relayer].")
@click.option("--fault-rate", type=click.FloatRange(0.0, 1.0), default=0.0,
              help="Probability that a publisher/aggregator request gets a fault from the mix.")
@click.option("--seed", type=int, default=None, help="Seed of the fault sequence.")
@click.option("--fault-kinds", default="all",
              help="Kinds in the --fault-rate mix: comma list of 500,503,504,429,latency,drop,"
                   "truncate,corrupt,lie,store_error,marked_invalid or 5xx,all,reads,writes,"
                   "silent.")
@click.option("--fault", "fault_probs", multiple=True, metavar="KIND=P",
              help="Independent probability for one kind (repeatable), e.g. --fault 429=0.1.")
@click.option("--lying", type=click.FloatRange(0.0, 1.0), default=0.0,
              help="Probability that a read serves another blob's bytes (same as --fault lie=P).")
@click.option("--fault-scope", type=click.Choice(["all", "reads", "writes"]), default="all",
              help="Restrict faults to read or write routes.")
@click.option("--latency-ms", default="0", metavar="MS|A-B",
              help="Latency added to every publisher/aggregator request.")
@click.option("--fault-latency-ms", default="10-100", metavar="MS|A-B",
              help="Delay of the 'latency' fault kind.")
@click.option("--retry-after", type=click.IntRange(0), default=0,
              help="Retry-After seconds on injected 429s.")
@click.option("--rate-limit-body", type=click.Choice(["text", "json", "mixed"]),
              default="mixed", help="Body of injected 429s.")
@click.option("--faults-json", default=None, metavar="JSON",
              help="A complete FaultConfig as JSON (overrides the other fault options).")
@click.option("--epoch-duration", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="Seconds per epoch for the automatic clock [default: keep the data dir's "
                   "setting; manual only on a fresh dir].")
@click.option("--initial-epoch", type=click.IntRange(0), default=1,
              help="Epoch of a fresh data dir.")
@click.option("--max-blob-size", type=_SizeType(), default=str(DEFAULT_MAX_BLOB_SIZE),
              help="Body limit of PUT /v1/blobs (bytes, or e.g. 10MiB).")
@click.option("--max-quilt-size", type=_SizeType(), default=str(DEFAULT_MAX_QUILT_SIZE),
              help="Body limit of PUT /v1/quilts.")
@click.option("--max-request-bytes", type=_SizeType(), default=None,
              help="One cap on every publisher request, both routes (e.g. 10MiB, as public "
                   "publishers have) [default: off].")
@click.option("--aggregator-max-blob-size", type=_SizeType(), default=None,
              help="Reads of larger blobs give 403 BLOB_TOO_LARGE [default: off].")
@click.option("--storage-price", type=click.IntRange(0), default=cost.DEFAULT_STORAGE_PRICE,
              help="FROST per MiB storage unit per epoch.")
@click.option("--write-price", type=click.IntRange(0), default=cost.DEFAULT_WRITE_PRICE,
              help="FROST per MiB storage unit per write.")
@click.option("--publisher-max-concurrent", type=click.IntRange(1), default=None,
              help="Load-shed publisher requests above this concurrency (plain 429).")
@click.option("--aggregator-max-concurrent", type=click.IntRange(1), default=None,
              help="Load-shed aggregator requests above this concurrency (plain 429).")
@click.option("--jwt-secret", default=None, envvar="RELAYER_MOCK_JWT_SECRET",
              help="Require Authorization: Bearer JWTs (HMAC secret) on publisher routes.")
@click.option("--jwt-algorithm", type=click.Choice(["HS256", "HS384", "HS512"]), default="HS256")
@click.option("--jwt-verify-upload", is_flag=True,
              help="Compare a token's epochs/size/send_object_to claims with the request "
                   "(the daemon's --jwt-verify-upload; sizes of quilts: the encoded quilt).")
@click.option("--no-fsync", is_flag=True, help="Skip fsync of blob files (faster, less durable).")
@click.option("--no-admin", is_flag=True,
              help="Serve no /_mock/ admin routes, as real Walrus (no epoch route, no delete).")
@click.option("--admin-token", default=None, envvar=ADMIN_TOKEN_ENV, show_envvar=True,
              metavar="TOKEN",
              help="Token the /_mock/ admin routes require (16+ characters; prefer the env "
                   "var: other local users can read a command line) [default: the one in "
                   "<data-dir>/admin-token, created 0600 on first start].")
@click.option("--role", type=click.Choice(["publisher", "aggregator", "both"]), default="both",
              help="Routes to serve: like `walrus publisher`, `walrus aggregator` or "
                   "`walrus daemon`. Run one process per role on separate ports over one "
                   "--data-dir for a split deployment.")
@click.option("--lenient", is_flag=True,
              help="Old lenient behaviour: ignore unknown publisher query parameters, pad "
                   "short send_object_to addresses, 404 (not 500) for quilt routes on plain "
                   "blobs.")
@click.option("--store-latency-ms", default="0", metavar="MS|A-B|lognormal:MED:SIGMA|exp:MEAN",
              help="How long each store takes; reads of a blob being stored answer 503 "
                   "BLOB_UNAVAILABLE meanwhile.")
@click.option("--not-found-after-store", type=click.FloatRange(min=0.0), default=0.0,
              metavar="SECONDS", help="A freshly stored blob still answers 404 this long "
                                      "(a CDN's cached 404).")
@click.option("--unavailable-after-expiry", is_flag=True,
              help="In the first epoch after a blob expired, reads answer 503 "
                   "BLOB_UNAVAILABLE (mid-expiry) instead of 404.")
@click.option("--profile", type=click.Choice(["testnet", "mainnet"]), default=None,
              help="Answer as the public network does: 10 MiB request cap, store latency "
                   "drawn from a log-normal distribution, a 404 window after a store, real "
                   "quilt sizes and costs, null certifiedEpoch (explicit options win) "
                   "[default: none, fast].")
@click.option("--time-scale", type=click.FloatRange(min=0.0, min_open=True), default=1.0,
              help="Multiply the profile's store latency and 404 window (tests: 0.05).")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]),
              default="info")
def relayer_command(
    host: str,
    allow_remote: bool,
    port: int,
    data_dir: Path | None,
    fault_rate: float,
    seed: int | None,
    fault_kinds: str,
    fault_probs: tuple[str, ...],
    lying: float,
    fault_scope: str,
    latency_ms: str,
    fault_latency_ms: str,
    retry_after: int,
    rate_limit_body: str,
    faults_json: str | None,
    epoch_duration: float | None,
    initial_epoch: int,
    max_blob_size: int,
    max_quilt_size: int,
    max_request_bytes: int | None,
    aggregator_max_blob_size: int | None,
    storage_price: int,
    write_price: int,
    publisher_max_concurrent: int | None,
    aggregator_max_concurrent: int | None,
    jwt_secret: str | None,
    jwt_algorithm: str,
    jwt_verify_upload: bool,
    no_fsync: bool,
    no_admin: bool,
    admin_token: str | None,
    role: str,
    lenient: bool,
    store_latency_ms: str,
    not_found_after_store: float,
    unavailable_after_expiry: bool,
    profile: str | None,
    time_scale: float,
    log_level: str,
    metrics_port: int | None = None,
) -> None:
    """Serve a local, persistent, fault-injecting Walrus publisher and aggregator."""
    import uvicorn

    from .server import bind_socket, install_log_filter, url_for, uvicorn_config

    try:
        faults = build_fault_config(
            fault_rate=fault_rate, seed=seed, fault_kinds=fault_kinds, fault_probs=fault_probs,
            lying=lying, latency_ms=latency_ms, fault_latency_ms=fault_latency_ms,
            retry_after=retry_after, rate_limit_body=rate_limit_body, fault_scope=fault_scope,
            faults_json=faults_json,
        )
    except (ValueError, ValidationError) as exc:
        raise click.BadParameter(str(exc), param_hint="fault options") from exc
    try:
        latency = StoreLatency.parse(store_latency_ms)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--store-latency-ms") from exc
    if not allow_remote and not is_loopback(host):
        raise click.ClickException(
            f"refusing to bind non-loopback address {host}: anyone who reaches it could store "
            "and read blobs. Pass --allow-remote to serve it anyway (the admin routes keep "
            "needing the admin token; --jwt-secret guards the publisher routes)."
        )
    data_dir = data_dir or default_data_dir()
    token_note = None
    if no_admin:
        admin_token = None
    elif admin_token is not None:
        try:
            check_token(admin_token)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--admin-token") from exc
        token_note = f"the token given by --admin-token / ${ADMIN_TOKEN_ENV}"
    else:
        try:
            admin_token, token_file = load_or_create_token(data_dir)
        except (ValueError, OSError) as exc:
            raise click.ClickException(f"admin token: {exc}") from exc
        token_note = f"the token in {token_file}"
    app = create_app(
        data_dir,
        faults=faults,
        epoch_duration=epoch_duration,
        initial_epoch=initial_epoch,
        max_blob_size=max_blob_size,
        max_quilt_size=max_quilt_size,
        max_request_bytes=max_request_bytes,
        aggregator_max_blob_size=aggregator_max_blob_size,
        storage_price=storage_price,
        write_price=write_price,
        publisher_max_concurrent=publisher_max_concurrent,
        aggregator_max_concurrent=aggregator_max_concurrent,
        fsync=not no_fsync,
        admin=not no_admin,
        admin_token=admin_token,
        jwt_secret=jwt_secret,
        jwt_algorithm=jwt_algorithm,
        jwt_verify_upload=jwt_verify_upload,
        strict=not lenient,
        role=role,  # type: ignore[arg-type]  # click.Choice checked it
        # left at their defaults, a profile's values apply (create_app)
        store_latency=latency if latency.enabled or profile is None else None,
        not_found_after_store=not_found_after_store,
        unavailable_after_expiry=unavailable_after_expiry,
        profile=profile,
        time_scale=time_scale,
    )
    try:
        sock = bind_socket(host, port)
    except OSError as exc:
        raise click.ClickException(f"cannot bind {host}:{port}: {exc}") from exc
    url = url_for(sock)
    # First stdout line: the URL (RelayerProcess parses it); the socket already listens.
    served = {"both": "", "publisher": " (publisher routes only)",
              "aggregator": " (aggregator routes only)"}[role]
    click.echo(f"relayer_mock serving the Walrus HTTP API at {url} (data dir: {data_dir})"
               f"{served}")
    metrics = None
    if metrics_port is not None:
        from ._metrics import MetricsServer

        metrics = MetricsServer(data_dir, port=metrics_port)
        click.echo(f"metrics (walrus_contract_info) at {metrics.url}", err=True)
    if faults.enabled:
        click.echo(f"fault injection: {faults.model_dump_json()}")
    if token_note is not None:
        click.echo(f"admin routes (/_mock/) need {token_note}: send it as 'Authorization: "
                   f"Bearer <token>' or in the {ADMIN_TOKEN_HEADER} header", err=True)
    if not is_loopback(host):
        unguarded = "" if jwt_secret else "; its publisher routes take stores from anyone"
        click.echo(f"warning: bound to non-loopback address {host}{unguarded}", err=True)
    sys.stdout.flush()
    install_log_filter()
    server = uvicorn.Server(uvicorn_config(app, log_level=log_level, library=False))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        if metrics is not None:
            metrics.close()
        app.state.relayer.store.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m relayer_mock``; returns the exit code."""
    try:
        relayer_command.main(
            args=list(argv) if argv is not None else None,
            prog_name="python -m relayer_mock",
            standalone_mode=False,
        )
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    return 0
