"""``walrus-mem keys``: list, export, import, rotate and create keys.

A secret reaches stdout only from ``export``, ``import --agent`` and ``new-agent``, whose
job is to hand it over; everything else prints public fingerprints and verify keys."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from .._keys.keystore import key_file_in_use
from ..config import Settings
from ..errors import (
    InvalidInput,
    KeyNotFound,
    KeyringUnavailable,
    PlaceholderError,
    WalrusMemError,
)
from ..keys import (
    MasterSeed,
    NamespaceKeys,
    keyring_store,
    resolve_master_seed,
    write_key_file,
)
from .common import CliState, pass_state, said
from .envelope import CommandFailed


def _resolve_master(settings: Settings) -> tuple[MasterSeed, str]:
    return resolve_master_seed(
        config_value=settings.master_key_value(),
        key_file=key_file_in_use(settings),
        use_keyring=settings.use_keyring,
    )


def _namespace_keys(settings: Settings, master: MasterSeed | None) -> list[dict[str, Any]]:
    """Public identity of every configured agent and of the default namespace.

    An agent's own key wins over derivation, as in the engine; a namespace is
    listed once.
    """
    rows: list[dict[str, Any]] = []
    for name, agent in sorted(settings.agents.items()):
        ns = agent.namespace or name
        if agent.key is not None:
            try:
                seed = agent.agent_seed(name)
            except PlaceholderError as exc:  # another agent's variable: not needed here
                rows.append({"agent": name, "namespace": ns, "mode": "independent",
                             "fingerprint": None, "verify_key": None,
                             "note": f"key not available in this process: {exc}"})
                continue
            assert seed is not None
            rows.append(_key_row(name, NamespaceKeys.from_agent_key(seed, ns)))
        elif master is not None:
            rows.append(_key_row(name, NamespaceKeys.derive(master, ns)))
        else:
            rows.append({"agent": name, "namespace": ns, "mode": "derived", "fingerprint": None,
                         "verify_key": None})
    listed = {row["namespace"] for row in rows}
    if master is not None and settings.default_namespace not in listed:
        rows.insert(0, _key_row(None, NamespaceKeys.derive(master, settings.default_namespace)))
    return rows


def _with_catalog(state: CliState, rows: list[dict[str, Any]],
                  master: MasterSeed | None) -> list[dict[str, Any]]:
    """Add the namespaces of the local catalog, their manifest ids and memory counts."""
    settings = state.settings
    if not (Path(settings.data_dir).expanduser() / "catalog.sqlite3").exists():
        return rows
    from .._keys.generations import current_generation

    by_ns = {row["namespace"]: row for row in rows}
    mem = state.memory
    for ns in mem.namespaces():
        st = mem.stats(ns)
        row = by_ns.get(ns)
        if row is None:
            row = (_key_row(None, NamespaceKeys.derive(master, ns)) if master is not None else
                   {"agent": None, "namespace": ns, "mode": "derived", "fingerprint": None,
                    "verify_key": None})
            rows.append(row)
        row["memories"] = st.memories
        row["manifest_blob_id"] = st.manifest_blob_id
        generation = current_generation(mem.parts.catalog, ns)
        if generation and row["fingerprint"] is not None:  # rotated: show the current key
            try:
                row.update(_key_row(row["agent"], mem.derive_keys(ns, generation=generation)))
            except WalrusMemError:
                pass
            row["generation"] = generation
        if st.key_fingerprint and row["fingerprint"] not in (None, st.key_fingerprint):
            row["warning"] = (f"the catalog was written with key {st.key_fingerprint}; the "
                              "configured key differs")
    return rows


def _key_row(agent: str | None, keys: NamespaceKeys) -> dict[str, Any]:
    return {
        "agent": agent,
        "namespace": keys.namespace,
        "mode": "independent" if keys.independent else "derived",
        "fingerprint": keys.fingerprint,
        "verify_key": keys.verify_key.hex(),  # public
    }



@click.group(invoke_without_command=True)
@pass_state
@click.pass_context
def keys(ctx: click.Context, state: CliState) -> None:
    """List namespaces and agents: key mode, public fingerprint, latest head (blob id.seq)."""
    if ctx.invoked_subcommand is not None:
        return
    settings = state.settings
    master, source = _master_or_none(settings)
    rows = _with_catalog(state, _namespace_keys(settings, master), master)
    if state.agent_option is not None:  # --agent NAME: that agent's row; a typo is an error
        settings.agent(state.agent_option)
        rows = [row for row in rows if row["agent"] == state.agent_option]
    if state.as_json:
        state.emit_json({"master_key_source": source, "namespaces": rows})
        return
    state.out.print(f"master key source: {source or 'none found'}")
    table = Table("namespace", "agent", "mode", "fingerprint", "memories", "latest head")
    for row in rows:
        memories = row.get("memories")
        table.add_row(row["namespace"], row["agent"] or "", row["mode"], row["fingerprint"] or "-",
                      "" if memories is None else str(memories),
                      ".".join((row.get("manifest_blob_id") or "").split(".")[:2]))
    state.out.print(table)
    for row in rows:
        if "warning" in row:
            state.warn(f"namespace {row['namespace']}: {row['warning']}")


def _master_or_none(settings: Settings) -> tuple[MasterSeed | None, str | None]:
    try:
        return _resolve_master(settings)
    except KeyNotFound:
        return None, None


@keys.command("export-public")
@pass_state
def keys_export_public(state: CliState) -> None:
    """Print every namespace's public verify key and fingerprint as JSON."""
    master, _ = _master_or_none(state.settings)
    rows = _with_catalog(state, _namespace_keys(state.settings, master), master)
    state.emit_json({"namespaces": [
        {k: row.get(k) for k in ("namespace", "agent", "mode", "fingerprint", "verify_key")}
        for row in rows
    ]})


def _agent_secret(settings: Settings, name: str) -> tuple[bytes, NamespaceKeys]:
    agent = settings.agent(name)
    seed = agent.agent_seed(name)
    if seed is None:
        raise InvalidInput(
            f"agent {name} has no key of its own: its namespace key is derived from the master "
            "key, so back up the master key (walrus-mem keys export)"
        )
    return seed, NamespaceKeys.from_agent_key(seed, agent.namespace or name)


@keys.command("export")
@click.option("--agent", "agent_name", metavar="NAME",
              help="Export this agent's own key instead of the master key.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--with-heads", "heads_path", metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Also write each namespace's newest head reference (public) to FILE, "
                   "for `walrus-mem restore --heads FILE` on a new machine.")
@pass_state
def keys_export(state: CliState, agent_name: str | None, yes: bool,
                heads_path: Path | None) -> None:
    """Print the master key (or an agent's key) for backup: 24 BIP39 words and hex.

    The secret goes to stdout only, after a confirmation on stderr; it is never
    logged. Write the words down offline; `walrus-mem keys import` reads them back
    (this output as printed, piped or pasted). With --with-heads FILE the heads
    `restore` starts from are written to FILE: keep it with the key backup.
    """
    from .._keys.keystore import to_mnemonic

    name = agent_name or state.agent_option
    if name is not None:
        secret, ns_keys = _agent_secret(state.settings, name)
        what, fingerprint = f"the key of agent {name}", ns_keys.fingerprint
    else:
        master, _ = _resolve_master(state.settings)
        secret, what, fingerprint = master.secret_bytes(), "the master key", master.fingerprint
    if not yes:
        click.confirm(
            f"Print {what} (fingerprint {fingerprint}) on stdout? Whoever sees it can read "
            "every memory it protects", abort=True, err=True,
        )
    words = to_mnemonic(secret)
    heads: dict[str, str] | None = None
    if heads_path is not None:
        heads = _write_heads(state, heads_path, name)
    if state.as_json:
        state.emit_json({"key": "agent" if name else "master", "agent": name,
                         "fingerprint": fingerprint, "mnemonic": words, "hex": secret.hex(),
                         **({"heads_file": str(heads_path), "heads": heads}
                            if heads is not None else {})})
        return
    click.echo(words)
    click.echo(secret.hex())


def _write_heads(state: CliState, path: Path, agent_name: str | None) -> dict[str, str]:
    """Write the heads backup (an agent's export: its namespace only); say so on stderr."""
    from .heads_backup import write_heads_backup

    only = None
    if agent_name is not None:
        agent = state.settings.agent(agent_name)
        only = [agent.namespace or agent_name]
    heads, notes = write_heads_backup(state, path, only)
    state.note(f"Heads of {len(heads)} namespace(s) written to {escape(str(path))} "
               "(public; keep it with the key backup: walrus-mem restore --heads FILE)")
    if not heads:
        state.warn("no namespace of this data dir has a published head yet (run walrus-mem "
                   "sync first)")
    for line in notes:
        state.warn(line)
    return heads


@keys.command("import")
@click.option("--store", type=click.Choice(["auto", "keyring", "file"]), default="auto",
              show_default=True, help="Where to keep the imported master key.")
@click.option("--agent", "agent_name", metavar="NAME",
              help="Import an agent's key: print the line that sets its variable.")
@click.option("--replace-key", "replace_key", metavar="FINGERPRINT",
              help="Replace the stored master key with this fingerprint (kept as "
                   "master.key.<fingerprint>.bak next to the key file).")
@pass_state
def keys_import(state: CliState, store: str, agent_name: str | None,
                replace_key: str | None) -> None:
    """Read a key backup from stdin (24 BIP39 words or 64 hex) and install it.

    On a terminal the words are not shown as they are typed or pasted (one line
    or several); from a pipe or file, stdin is read to its end. The master key
    goes to the keyring or a 0600 key file, like `init`. A different key already
    there is replaced only with --replace-key and its fingerprint, and is kept
    next to the key file; the same key again is a no-op. With
    --agent, the key is printed as NAME_KEY=<hex> on stdout (set that variable in
    the agent's environment).
    """
    from .._keys.keystore import agent_env_var, parse_backup

    secret = parse_backup(_read_backup())
    if agent_name is not None:
        ns = state.settings.agents.get(agent_name)
        ns_keys = NamespaceKeys.from_agent_key(secret, (ns.namespace if ns else None)
                                               or _namespace_or_default(agent_name))
        var = agent_env_var(agent_name)
        state.note(f"agent {escape(agent_name)} key fingerprint {ns_keys.fingerprint}; set "
                   f"{var} in its environment and key = \"${{{var}}}\" in its config table")
        if state.as_json:
            state.emit_json({"agent": agent_name, "env_var": var, "key": secret.hex(),
                             "fingerprint": ns_keys.fingerprint})
        else:
            click.echo(f"{var}={secret.hex()}")
        return
    seed = MasterSeed(secret)
    where, kept = _store_master(state.settings, seed, store, replace_key)
    if state.as_json:
        state.emit_json({"stored_in": where, "fingerprint": seed.fingerprint,
                         "replaced_key_kept_at": [str(path) for path in kept]})
        return
    for path in kept:
        state.out.print(f"The replaced master key is kept in {escape(str(path))} (mode 0600).")
    state.out.print(f"Master key (fingerprint {seed.fingerprint}) {escape(where)}.")


def _read_backup() -> str:
    """The backup: from a pipe or file, stdin to its end; from a terminal, lines read
    with echo off (getpass) until 24 words, one hex key, or an empty line."""
    if not sys.stdin.isatty():
        return sys.stdin.read(4096)
    import getpass

    lines: list[str] = []
    prompt = "Key backup (24 words or 64 hex characters; not shown as you type): "
    while sum(len(line) for line in lines) < 4096:
        try:
            line = getpass.getpass(prompt, stream=sys.stderr)
        except EOFError:
            break
        words = " ".join([*lines, line]).split()
        if not line.strip():
            break
        lines.append(line)
        if len(words) >= 24 or (len(words) == 1 and not words[0].isalpha()):
            break
        prompt = f"  {len(words)} of 24 words so far; the rest (empty line to stop): "
    return " ".join(lines)


def _namespace_or_default(name: str) -> str:
    from ..keys import validate_namespace

    return validate_namespace(name)


def _store_master(settings: Settings, seed: MasterSeed, store: str,
                  replace_key: str | None) -> tuple[str, list[Path]]:
    """Install ``seed`` as the master key; say where, and where replaced keys are kept.

    A different key already stored is replaced only when ``replace_key`` names its
    fingerprint, and is written to its backup file first."""
    from .._keys.replace import confirm_replacement, keep_old_keys, stored_keys

    key_file = key_file_in_use(settings)
    existing = stored_keys(key_file, use_keyring=settings.use_keyring)
    others = [stored for stored in existing if stored.seed != seed]
    if existing and not others:
        return f"is already stored {existing[0].where}", []
    confirm_replacement(others, replace_key, retry="walrus-mem keys import")
    kept = keep_old_keys(key_file, others)
    if others:  # the new key takes the old one's place(s): no stale key left behind
        places = []
        for stored in others:
            if stored.kind == "keyring":
                keyring_store(seed, force=True)
                places.append("stored in the OS keyring")
            else:
                write_key_file(key_file, seed, force=True)
                places.append(f"written to the key file {key_file} (mode 0600)")
        return " and ".join(places), kept
    if store != "file" and settings.use_keyring:
        try:
            keyring_store(seed)
            return "stored in the OS keyring", kept
        except KeyringUnavailable:
            if store == "keyring":
                raise
    write_key_file(key_file, seed)
    return f"written to the key file {key_file} (mode 0600)", kept


@keys.command("rotate")
@click.option("--delete-old", is_flag=True,
              help="After a complete rotation, delete every blob of the older generations "
                   "this data dir knows (versions, manifests, pages, accepted grants) where the "
                   "backend allows it; what is not deleted is listed.")
@pass_state
def keys_rotate(state: CliState, delete_old: bool) -> None:
    """Move the namespace (-n / --agent) to a new key generation.

    Every live memory is sealed again under the new key and re-published, then
    a new manifest; the old generation is recorded. Run it again to finish a
    rotation that was interrupted (killed, publisher down). Exit 1 while it is
    not complete.
    """
    report = state.memory.rotate_key(state.namespace, delete_old=delete_old)
    if state.as_json:
        state.emit_json(report.as_dict())
    else:
        status = "complete" if report.complete else "IN PROGRESS (run it again)"
        state.out.print(
            f"Namespace {report.namespace}: key generation {report.old_generation} -> "
            f"{report.generation} (fingerprint {report.fingerprint}), {status}. "
            f"{report.resealed} re-sealed, {report.published} published, manifest "
            f"{report.manifest_blob_id or '-'}; {len(report.old_blobs)} old blob(s)"
            + (f", {len(report.deleted_blobs)} deleted, {len(report.kept_blobs)} not deleted"
               if delete_old else "")
        )
        for error in report.errors:
            state.warn(error)
        reasons: dict[str, int] = {}
        for why in report.kept_blobs.values():
            reasons[why] = reasons.get(why, 0) + 1
        for why, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
            state.note(f"not deleted ({count} blob(s)): {said(why)}")
    if not report.complete:
        raise CommandFailed("the rotation is not complete: run `walrus-mem keys rotate` again",
                            kind="RotationIncomplete")


@keys.command("new-agent")
@click.argument("name")
@click.option("--namespace", "agent_ns", help="The agent's namespace [default: NAME].")
@pass_state
def keys_new_agent(state: CliState, name: str, agent_ns: str | None) -> None:
    """Create an independent key for agent NAME; print the variable line to set.

    stdout gets exactly `NAME_KEY=<hex>` (the secret: put it in the agent's
    environment or secret store); stderr gets the config table to add and the
    public key, which others use to share memories with this agent.
    """
    from .._keys.keystore import agent_env_var, new_agent_key
    from ..keys import validate_namespace

    ns = validate_namespace(agent_ns or name)
    seed = new_agent_key()
    ns_keys = NamespaceKeys.from_agent_key(seed, ns)
    var = agent_env_var(name)
    table = f"[agents.{name}]" if re.fullmatch(r"[A-Za-z0-9_-]+", name) else \
        f"[agents.{json.dumps(name)}]"
    if state.as_json:
        state.emit_json({"agent": name, "namespace": ns, "env_var": var, "key": seed.hex(),
                         "fingerprint": ns_keys.fingerprint,
                         "verify_key": ns_keys.verify_key.hex()})
        return
    click.echo(f"{var}={seed.hex()}")
    ns_line = "" if ns == name else f'namespace = "{ns}"\n'
    state.note(escape(
        f"Add to the config:\n\n{table}\n{ns_line}key = \"${{{var}}}\"\n\n"
        f"public key (share it; memories are shared to it): {ns_keys.verify_key.hex()}\n"
        f"fingerprint: {ns_keys.fingerprint}. Back the key up now (walrus-mem keys export "
        f"--agent {name}): nothing else can open this agent's memories."
    ))

