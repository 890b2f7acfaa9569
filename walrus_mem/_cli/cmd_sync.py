"""The Walrus side of a namespace: restore and pull heads, sync, and the expiry of
its blobs (expiring, extend)."""

from __future__ import annotations

import re
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from .common import CliState, _dump, _progress, pass_state, said
from .envelope import CommandFailed

# A blob id is base64url, so about one head in 64 starts with '-'; click would read it
# as an option ("No such option: -b"). Such an argument is a head, never an option.
_DASH_HEAD = re.compile(r"-[A-Za-z0-9_-]{30,}(\.\d+\.[0-9a-fA-F]+)?")


class _HeadArgsCommand(click.Command):
    """A command whose positional HEAD(s) may start with '-' (``--`` also works)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" not in args:
            heads = [i for i, a in enumerate(args) if _DASH_HEAD.fullmatch(a)
                     and not (i and args[i - 1] == "--manifest")]
            if heads:
                args = ([a for i, a in enumerate(args) if i not in heads]
                        + ["--"] + [args[i] for i in heads])
        return super().parse_args(ctx, args)


@click.command(cls=_HeadArgsCommand)
@click.argument("head", required=False)
@click.option("--manifest", "manifest_blob_id", metavar="HEAD",
              help="Same as HEAD (kept for scripts written before head references).")
@click.option("--allow-stale", is_flag=True,
              help="Accept a head older than one this data dir has seen.")
@click.option("--allow-unrelated", is_flag=True,
              help="Accept a head whose history shares nothing with this data dir's.")
@click.option("--legacy", "allow_legacy", is_flag=True,
              help="HEAD is the blob id of a format-1 manifest (printed by sync before head "
                   "references): restore it although a rollback cannot be detected for it.")
@click.option("--heads", "heads_path", metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Start from the namespace's heads listed in FILE (written by "
                   "`walrus-mem keys export --with-heads FILE`, or a heads_file).")
@pass_state
def restore(state: CliState, head: str | None, manifest_blob_id: str | None,
            allow_stale: bool, allow_unrelated: bool, allow_legacy: bool,
            heads_path: Path | None) -> None:
    """Rebuild (or finish rebuilding) the namespace from Walrus alone.

    HEAD is the head reference `walrus-mem sync` printed where the namespace was
    written (<blob id>.<seq>.<digest>). Without it: resume an interrupted
    restore, else the newest heads this data dir or the heads file knows.
    With --legacy, HEAD is the blob id of a manifest from before format 2. With
    --heads FILE, the namespace's heads in FILE (a backup of `keys export
    --with-heads`).
    """
    from ..errors import BlobNotFound
    from .heads_backup import embedded_not_found, heads_to_restore

    if head and manifest_blob_id and head != manifest_blob_id:
        raise click.UsageError("give the head once (HEAD or --manifest)")
    if heads_path is not None and (head or manifest_blob_id):
        raise click.UsageError("give HEAD (or --manifest) or --heads FILE, not both")
    start: str | list[str] | None = head or manifest_blob_id
    if heads_path is not None:
        start = heads_to_restore(state, heads_path)
    try:
        with _progress(state, "restoring", None) as advance:
            report = state.memory.restore(
                state.namespace, start,
                progress=lambda done, total: advance(done=done, total=total),
                allow_stale=allow_stale, allow_unrelated=allow_unrelated,
                allow_legacy=allow_legacy,
            )
    except BlobNotFound as exc:
        if not state.settings.embedded:
            raise
        raise embedded_not_found(state, exc) from exc
    if state.as_json:
        state.emit_json(_dump(report))
    else:
        state.out.print(
            f"Restored namespace {report.namespace} from head {report.manifest_blob_id}: "
            f"{report.restored} restored, {report.skipped} already here, "
            f"{len(report.failed)} failed, {len(report.missing)} missing, "
            f"{len(report.unreadable)} unreadable, "
            f"{len(report.expired)} expired (of {report.total})"
            + (" [resumed]" if report.resumed else "")
        )
        _reembedded_line(state, report.reembedded, report.reembedded_because)
        if report.key_generation is not None:
            state.out.print(_generation_line(report.namespace, report.key_generation))
        for label, pairs in (("missing blob", report.missing), ("expired blob", report.expired)):
            for mid, blob in pairs[:20]:
                state.out.print(f"  {mid}: {label} {blob}")
        for mid, msg in [*report.unreadable[:20], *report.failed[:20]]:
            state.out.print(f"  {mid}: {said(msg)}")
        for line in report.equivocations:
            state.out.print(f"  equivocation: {said(line)}", soft_wrap=True)
        for line in report.skipped_heads:
            state.out.print(f"  skipped head: {said(line)}", soft_wrap=True)
        if not report.complete:
            state.out.print("Incomplete: run `walrus-mem restore` again to resume.")
    if report.failed:
        raise CommandFailed(f"{len(report.failed)} memory(ies) failed to restore")


@click.command(cls=_HeadArgsCommand)
@click.argument("heads", nargs=-1)
@click.option("--allow-stale", is_flag=True,
              help="Accept heads older than one this data dir has seen.")
@click.option("--allow-unrelated", is_flag=True,
              help="Accept heads whose history shares nothing with this data dir's.")
@click.option("--legacy", "allow_legacy", is_flag=True,
              help="The one HEAD is the blob id of a format-1 manifest (see restore --legacy).")
@pass_state
def pull(state: CliState, heads: tuple[str, ...], allow_stale: bool,
         allow_unrelated: bool, allow_legacy: bool) -> None:
    """Merge other machines' heads of the namespace into this data dir.

    HEADS are head references printed by `walrus-mem sync` elsewhere; none: the
    newest heads in the heads file and this data dir's heads store. Run `sync`
    afterwards to publish a manifest that descends from them.
    """
    with _progress(state, "pulling", None) as advance:
        report = state.memory.pull(
            list(heads) or None, namespace=state.namespace, allow_stale=allow_stale,
            allow_unrelated=allow_unrelated, allow_legacy=allow_legacy,
            progress=lambda done, total: advance(done=done, total=total))
    if state.as_json:
        state.emit_json(_dump(report))
    else:
        if report.up_to_date:
            state.out.print(f"Namespace {report.namespace} already holds every head given.")
        else:
            source = (f"format-1 manifest {report.legacy}" if report.legacy
                      else f"{len(report.heads)} head(s)")
            state.out.print(
                f"Pulled {source} into {report.namespace}: "
                f"{report.added} added, {report.updated} updated, {report.forgotten} forgotten, "
                f"{report.conflicts} conflicts, {report.deduplicated} deduplicated, "
                f"{len(report.missing)} missing, {len(report.expired)} expired, "
                f"{len(report.unreadable)} unreadable, {len(report.failed)} failed")
        _reembedded_line(state, report.reembedded, report.reembedded_because)
        if report.key_generation is not None:
            state.out.print(_generation_line(report.namespace, report.key_generation))
        for mid, msg in [*report.unreadable[:20], *report.failed[:20]]:
            state.out.print(f"  {mid}: {said(msg)}")
        for line in report.skipped:
            state.out.print(f"  skipped head: {said(line)}", soft_wrap=True)
        for line in report.equivocations:
            state.out.print(f"  equivocation: {said(line)}", soft_wrap=True)
    if report.failed:
        raise CommandFailed(f"{len(report.failed)} memory(ies) failed to merge")


def _reembedded_line(state: CliState, count: int, because: dict[str, int]) -> None:
    """Say which memories were embedded again instead of taking their sealed vectors."""
    if count:
        why = "; ".join(f"{n}: {escape(reason)}" for reason, n in sorted(
            because.items(), key=lambda item: -item[1]))
        state.out.print(f"Re-embedded {count} memory(ies) with this machine's model, as "
                        f"their sealed vectors could not be used ({why}).", soft_wrap=True)


def _generation_line(ns: str, generation: int) -> str:
    return (f"Namespace {ns} now uses key generation {generation}, the one its heads are "
            "sealed under (a key rotation made on another machine, followed: docs/keys.md).")


@click.command()
@pass_state
def sync(state: CliState) -> None:
    """Publish queued memories, merge heads from the heads file, publish manifests.

    Prints each namespace's new head reference: hand it to the other machines
    (`walrus-mem pull HEAD`), or set heads_file to exchange heads through a file.
    """
    report = state.memory.sync(state.scope)
    if state.as_json:
        state.emit_json(_dump(report))
    else:
        state.out.print(f"Published {report.published}; {report.still_queued} still queued.")
        for ns, pulled in report.pulled.items():
            state.out.print(f"Merged {len(pulled.heads)} head(s) into {ns}: {pulled.added} added, "
                            f"{pulled.updated} updated, {pulled.forgotten} forgotten, "
                            f"{pulled.conflicts} conflicts"
                            + (f", {len(pulled.unreadable)} unreadable"
                               if pulled.unreadable else ""))
            if pulled.key_generation is not None:
                state.out.print(_generation_line(ns, pulled.key_generation))
            for mid, msg in pulled.unreadable[:20]:
                state.out.print(f"  {mid}: {said(msg)}")
            for line in pulled.equivocations:
                state.out.print(f"  equivocation: {said(line)}", soft_wrap=True)
        for ns, head in report.manifests.items():
            state.out.print(f"Head for {ns}: {head}", soft_wrap=True)
        for line in report.skipped_heads:
            state.out.print(f"  skipped head: {said(line)}", soft_wrap=True)
        for err in report.errors:
            state.out.print(f"  error: {said(err)}")
    if report.errors:
        raise CommandFailed(f"{len(report.errors)} error(s): {report.errors[0]}",
                            hint="`walrus-mem sync` again publishes what is still queued")


@click.command()
@click.option("--within", "within_epochs", type=click.IntRange(0), default=1, show_default=True,
              help="Epochs from now.")
@click.option("--probe", is_flag=True,
              help="If the current epoch is unknown, store one small blob to read it (real "
                   "Walrus has no epoch route).")
@pass_state
def expiring(state: CliState, within_epochs: int, probe: bool) -> None:
    """Memories whose blobs expire within N epochs (all namespaces unless -n is given)."""
    records = state.memory.expiring(within_epochs, namespace=state.scope,
                                    probe=probe)
    if state.as_json:
        state.emit_json({"within_epochs": within_epochs, "memories": [_dump(r) for r in records]})
        return
    table = Table("namespace", "id", "end epoch", "text")
    for r in records:
        table.add_row(r.namespace, r.id, str(r.end_epoch), escape(r.text))
    state.out.print(table)
    state.out.print(f"{len(records)} memor{'y' if len(records) == 1 else 'ies'} expire within "
                    f"{within_epochs} epoch(s); renew with `walrus-mem extend --expiring "
                    f"{within_epochs}`")


@click.command()
@click.argument("memory_ids", nargs=-1)
@click.option("--expiring", "expiring_within", type=click.IntRange(0), metavar="N",
              help="Extend the namespace's memories that expire within N epochs.")
@click.option("--all", "all_", is_flag=True, help="Extend every published memory of the namespace.")
@click.option("--epochs", type=click.IntRange(1, 53), help="Epochs to store for (default: the "
              "configured epochs).")
@pass_state
def extend(
    state: CliState,
    memory_ids: tuple[str, ...],
    expiring_within: int | None,
    all_: bool,
    epochs: int | None,
) -> None:
    """Re-publish memories so they stay on Walrus longer (same sealed bytes)."""
    chosen = sum([bool(memory_ids), expiring_within is not None, all_])
    if chosen != 1:
        raise click.UsageError("give memory ids, --expiring N, or --all (exactly one)")
    mem = state.memory
    ids: list[str] | None
    if expiring_within is not None:
        ids = [r.id for r in mem.expiring(expiring_within, namespace=state.namespace,
                                          probe=True)]  # extend stores anyway
    else:
        ids = list(memory_ids) if memory_ids else None
    if ids == []:
        report = None
    else:
        report = mem.extend(ids, namespace=state.namespace, epochs=epochs)
    if state.as_json:
        state.emit_json(_dump(report) if report else {"extended": {}, "failed": []})
    elif report is None:
        state.out.print("Nothing to extend.")
    else:
        state.out.print(f"Extended {len(report.extended)} memor"
                        f"{'y' if len(report.extended) == 1 else 'ies'}.")
        for mid, end in report.extended.items():
            state.out.print(f"  {mid}: until epoch {end}")
        for mid, msg in report.failed:
            state.out.print(f"  {mid}: FAILED {said(msg)}")
    if report is not None and report.failed:
        raise CommandFailed(f"{len(report.failed)} memory(ies) not extended")
