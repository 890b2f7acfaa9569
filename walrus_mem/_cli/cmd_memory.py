"""The commands that read and write memories of one namespace: remember, recall, get,
list, update, forget, history, consolidate, analyze, and the namespace's upkeep (stats,
compact, reindex)."""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from .common import (
    _FILTER_OPTION,
    CliState,
    _dump,
    _filters,
    _meta_options,
    _metadata,
    _print_record,
    _read_text_args,
    _records_table,
    _records_tsv,
    _short_time,
    pass_state,
    tsv_line,
)


def _describe_write(rec: Any) -> str:
    if rec.deduplicated:
        return (f"Already remembered: re-stated as {rec.id} (deduplicated; the earlier id is "
                "retired, so a forget of it made elsewhere cannot take this fact away)")
    if rec.status == "queued":
        return (f"Remembered {rec.id}: queued locally, not on Walrus yet; "
                "`walrus-mem sync` publishes it later and says why it failed")
    where = rec.quilt_patch_id or rec.blob_id
    return f"Remembered {rec.id}: published as {where} (until epoch {rec.end_epoch})"


@click.command()
@click.argument("text", nargs=-1, required=True)
@_meta_options
@click.option("--expires-at", metavar="WHEN", help="ISO-8601 date or datetime after which it "
              "is no longer recalled.")
@pass_state
def remember(
    state: CliState,
    text: tuple[str, ...],
    meta: tuple[str, ...],
    metadata_json: str | None,
    category: str | None,
    importance: float | None,
    expires_at: str | None,
) -> None:
    """Remember one fact: TEXT (words are joined), or `-` to read it from stdin."""
    rec = state.memory.remember(
        _read_text_args(text), namespace=state.namespace,
        metadata=_metadata(meta, metadata_json), category=category, importance=importance,
        expires_at=expires_at,
    )
    if state.as_json:
        state.emit_json(_dump(rec))
    else:
        state.out.print(escape(_describe_write(rec)))


@click.command()
@click.argument("query", nargs=-1, required=True)
@click.option("-k", "--limit", "k", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Number of memories to return.")
@_FILTER_OPTION
@click.option("--min-score", type=click.FloatRange(0.0), default=None,
              help="Relevance cutoff (default: the library's; 0 disables it).")
@click.option("--include-expired", is_flag=True, help="Also return memories past expires_at.")
@pass_state
def recall(
    state: CliState,
    query: tuple[str, ...],
    k: int,
    filters: tuple[str, ...],
    min_score: float | None,
    include_expired: bool,
) -> None:
    """Recall memories by meaning (local: no network)."""
    result = state.memory.recall(
        _read_text_args(query), namespace=state.namespace, k=k, filters=_filters(filters),
        min_score=min_score, include_expired=include_expired,
    )
    if state.as_json:
        state.emit_json({
            "namespace": state.namespace,
            "hits": [
                {"score": h.score, "dense": h.dense, "lexical": h.lexical,
                 "recency": h.recency, "importance": h.importance, "record": _dump(h.record)}
                for h in result
            ],
            "candidates": result.candidates,
            "filtered_out": result.filtered_out,
            "below_min_score": result.below_min_score,
        })
        return
    summary = (
        f"{len(result)} memor{'y' if len(result) == 1 else 'ies'} from {result.candidates} "
        f"candidates in namespace {state.namespace}; {result.filtered_out} filtered out, "
        f"{result.below_min_score} below the relevance cutoff"
    )
    if state.piped:  # TSV: score, id, text, category; the summary goes to stderr
        state.emit_lines([tsv_line(f"{hit.score:.3f}", hit.id, hit.text, hit.category or "")
                          for hit in result])
        state.note(escape(summary))
        return
    table = Table("score", "id", "text", "category")
    for hit in result:
        table.add_row(f"{hit.score:.3f}", hit.id, escape(hit.text), hit.category or "")
    if result:
        state.out.print(table)
    state.out.print(summary)


@click.command()
@click.argument("memory_id")
@click.option("--verify", is_flag=True,
              help="Also fetch the blob from Walrus and check it against the local copy.")
@pass_state
def get(state: CliState, memory_id: str, verify: bool) -> None:
    """Show one memory by id."""
    rec = state.memory.get(memory_id, namespace=state.namespace, verify=verify)
    if state.as_json:
        state.emit_json({**_dump(rec), "verified": verify})
        return
    _print_record(state, rec)
    if verify:
        state.out.print("[green]verified[/green]: the blob on Walrus opens with this namespace's "
                        "key and matches the local copy")


@click.command("list")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@_FILTER_OPTION
@click.option("--include-expired", is_flag=True, help="Also list memories past expires_at.")
@pass_state
def list_(
    state: CliState, limit: int, offset: int, filters: tuple[str, ...], include_expired: bool
) -> None:
    """List memories of the namespace, newest first."""
    records = state.memory.list(
        state.namespace, filters=_filters(filters), limit=limit, offset=offset,
        include_expired=include_expired,
    )
    if state.as_json:
        state.emit_json({"namespace": state.namespace, "limit": limit, "offset": offset,
                         "memories": [_dump(r) for r in records]})
        return
    if state.piped:  # TSV: id, text, category, status, created
        state.emit_lines(_records_tsv(records))
        return
    state.out.print(_records_table(records, title=f"namespace {state.namespace}"))


@click.command()
@click.argument("memory_id")
@click.argument("text", nargs=-1, required=True)
@_meta_options
@pass_state
def update(
    state: CliState,
    memory_id: str,
    text: tuple[str, ...],
    meta: tuple[str, ...],
    metadata_json: str | None,
    category: str | None,
    importance: float | None,
) -> None:
    """Replace a memory's text with a new version (the old one stays in history)."""
    rec = state.memory.update(
        memory_id, _read_text_args(text), namespace=state.namespace,
        metadata=_metadata(meta, metadata_json), category=category, importance=importance,
    )
    if state.as_json:
        state.emit_json(_dump(rec))
    else:
        state.out.print(f"Updated {rec.id} to version {rec.version} ({rec.status})")


def _print_forget(state: CliState, report: Any) -> None:
    if state.as_json:
        state.emit_json(_dump(report))
        return
    state.out.print(f"Forgot {len(report.forgotten)} memor"
                    f"{'y' if len(report.forgotten) == 1 else 'ies'} in namespace "
                    f"{state.namespace}.")
    if report.deleted_blobs:
        state.out.print(f"Deleted {len(report.deleted_blobs)} blob(s) from storage.")
    for blob, reason in report.kept_blobs.items():
        state.out.print(f"Kept blob {blob} (ciphertext, readable only with the key, until its "
                        f"end epoch): {escape(reason)}")


@click.command()
@click.argument("memory_id")
@pass_state
def forget(state: CliState, memory_id: str) -> None:
    """Forget a memory (see docs/forget.md for what this guarantees)."""
    _print_forget(state, state.memory.forget(memory_id, namespace=state.namespace))


@click.command("forget-all")
@click.option("--yes", is_flag=True, help="Confirm: forget every memory of the namespace.")
@pass_state
def forget_all(state: CliState, yes: bool) -> None:
    """Forget every memory of the namespace (needs --yes)."""
    if not yes:
        raise click.UsageError(
            f"forget-all forgets every memory of namespace {state.namespace!r}; "
            "pass --yes to confirm"
        )
    _print_forget(state, state.memory.forget_all(state.namespace, confirm=True))


@click.command("consolidate")
@click.option("--dry-run", is_flag=True, help="Report what would change; change nothing.")
@click.option("--similarity", type=click.FloatRange(0, 1, min_open=True), default=0.92,
              show_default=True, help="Cosine at or above which two memories are duplicates.")
@click.option("--min-age", "min_age_hours", type=click.FloatRange(0), default=1.0,
              show_default=True, help="Only retire memories older than this many hours.")
@click.option("--undo", "undo_run", metavar="RUN_ID", help="Reverse the run with this id.")
@pass_state
def consolidate_cmd(state: CliState, dry_run: bool, similarity: float, min_age_hours: float,
                    undo_run: str | None) -> None:
    """Merge near-duplicates and retire superseded facts (reversible: --undo RUN_ID)."""
    from datetime import timedelta

    from .._agents.consolidate import undo

    if undo_run:
        restored = undo(state.memory, undo_run, state.namespace)
        if not restored:
            state.warn(f"no memory of namespace {state.namespace} carries a change of run "
                       f"{undo_run}: a mistyped run id, another namespace (-n), or already "
                       "undone")
        if state.as_json:
            state.emit_json({"run_id": undo_run, "restored": restored})
        else:
            state.out.print(f"Restored {restored} memor{'y' if restored == 1 else 'ies'} "
                            f"changed by run {undo_run}.")
        return
    report = state.memory.consolidate(state.namespace, similarity=similarity,
                                      min_age=timedelta(hours=min_age_hours), dry_run=dry_run)
    if state.as_json:
        state.emit_json(report.as_dict())
        return
    table = Table("action", "keep", "retire", "why")
    for action in report.actions:
        table.add_row(action.kind, escape(action.keep_text[:60]), escape(action.retire_text[:60]),
                      escape(action.reason))
    state.out.print(table)
    verb = "would retire" if report.dry_run else "retired"
    state.out.print(f"{report.considered} memories considered; {verb} {len(report.actions)} "
                    f"({report.merged} duplicates, {report.superseded} superseded); "
                    f"{report.too_young} younger than the minimum age left alone.")
    if not report.dry_run and report.actions:
        state.out.print(f"Undo with: walrus-mem consolidate --undo {report.run_id}")


@click.command()
@click.argument("memory_id")
@pass_state
def history(state: CliState, memory_id: str) -> None:
    """Every version of a memory, oldest first (a forgotten one ends in DELETE)."""
    entries = state.memory.history(memory_id, namespace=state.namespace)
    if state.as_json:
        state.emit_json({"memory_id": memory_id, "versions": [_dump(e) for e in entries]})
        return
    table = Table("version", "event", "at", "text", "blob")
    for e in entries:
        table.add_row(str(e.version), e.event, _short_time(e.at),
                      escape(e.text) if e.text is not None else "[dim](none)[/dim]",
                      e.quilt_patch_id or e.blob_id or "")
    state.out.print(table)



@click.command()
@pass_state
def stats(state: CliState) -> None:
    """Counts, sizes, model, key fingerprint and latest manifest of the namespace."""
    report = state.memory.stats(state.namespace)
    if state.as_json:
        state.emit_json(_dump(report))
    else:
        _print_record(state, report)



@click.command()
@click.argument("text", nargs=-1, required=True)
@pass_state
def analyze(state: CliState, text: tuple[str, ...]) -> None:
    """Extract standalone facts from TEXT (or `-` for stdin) and remember them.

    Uses the offline heuristic extractor; facts that look like prompt injection
    are dropped and credentials redacted.
    """
    result = state.memory.analyze(_read_text_args(text), namespace=state.namespace)
    if state.as_json:
        state.emit_json(_dump(result))
        return
    for rec in result.records:
        state.out.print(f"{'=' if rec.deduplicated else '+'} {rec.id}  {escape(rec.text)}")
    state.out.print(f"{result.stored} stored, {result.deduplicated} deduplicated, "
                    f"{result.queued} queued, {len(result.failed)} failed")


@click.command()
@pass_state
def compact(state: CliState) -> None:
    """Rewrite the namespace's local files so nothing forgotten lingers in them."""
    state.memory.compact(state.namespace)
    if state.as_json:
        state.emit_json({"namespace": state.namespace, "compacted": True})
    else:
        state.out.print(f"Compacted namespace {state.namespace}: index rebuilt, full-text "
                        "index merged, catalog vacuumed.")


@click.command()
@pass_state
def reindex(state: CliState) -> None:
    """Re-embed the namespace with the configured model (after changing embedding_model)."""
    count = state.memory.reindex(state.namespace)
    if state.as_json:
        state.emit_json({"namespace": state.namespace, "reindexed": count})
    else:
        state.out.print(f"Re-embedded {count} memories of namespace {state.namespace}.")
