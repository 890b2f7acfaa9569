"""``walrus-mem share`` and ``accept``: memories sealed for another namespace's public
key, as one grant blob, and opened on the other side."""

from __future__ import annotations

import click
from rich.markup import escape

from .common import CliState, _dump, pass_state


@click.command()
@click.argument("memory_ids", nargs=-1, required=True)
@click.option("--to", "recipient", required=True, metavar="PUBLIC_KEY",
              help="The recipient namespace's Ed25519 public key (hex or base64; "
                   "`walrus-mem keys export-public` prints it as verify_key).")
@pass_state
def share(state: CliState, memory_ids: tuple[str, ...], recipient: str) -> None:
    """Seal copies of MEMORY_IDS for one recipient and publish them as one grant blob.

    Prints the grant reference to give the recipient (`walrus-mem accept REF`).
    Only the holder of the recipient's private key can open it.
    """
    grant = state.memory.share(list(memory_ids), to=recipient, namespace=state.namespace)
    if state.as_json:
        state.emit_json(_dump(grant))
        return
    click.echo(grant.reference)
    state.note(f"shared {grant.count} memor{'y' if grant.count == 1 else 'ies'} of namespace "
               f"{state.namespace} with key {grant.recipient_fingerprint} (blob {grant.blob_id}, "
               f"until epoch {grant.end_epoch})")


@click.command()
@click.argument("grant")
@pass_state
def accept(state: CliState, grant: str) -> None:
    """Open GRANT (a reference from `walrus-mem share`) with this namespace's key and
    remember its memories here. Accepting the same grant again stores nothing."""
    result = state.memory.accept(grant, namespace=state.namespace)
    if state.as_json:
        state.emit_json(_dump(result))
        return
    if result.replayed:  # the earlier result: its counts are not this run's
        state.out.print(f"Grant already accepted into namespace {state.namespace}: nothing "
                        f"stored ({len(result.records)} memories from it are here)")
        return
    for rec in result.records:
        state.out.print(f"{'=' if rec.deduplicated else '+'} {rec.id}  {escape(rec.text)}")
    state.out.print(f"{result.stored} stored, {result.deduplicated} already here "
                    f"(namespace {state.namespace})")
