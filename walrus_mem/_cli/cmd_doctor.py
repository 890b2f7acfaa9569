"""``walrus-mem doctor`` and ``repair``: the health checks of doctor.py and the fixes
of repair.py, printed (the checks and fixes themselves live in the library)."""

from __future__ import annotations

from collections.abc import Callable

import click
from rich.markup import escape

from .._recall.embeddings import Embedder
from ..config import Settings
from ..errors import WalrusMemError
from .common import CliState, _dump, _progress, embedder_override, pass_state, said
from .envelope import CommandFailed


def _override_factory(state: CliState) -> Callable[[Settings], Embedder] | None:
    """The hidden test embedder as a doctor factory, when it is configured."""
    try:
        override = embedder_override(state.settings)
    except WalrusMemError:
        return None  # a broken config: doctor reports it
    return None if override is None else (lambda settings: override)


@click.command()
@click.option("--no-model", is_flag=True, help="Skip loading the embedding model (saves ~7 s).")
@pass_state
def doctor(state: CliState, no_model: bool) -> None:
    """Check config, ${VAR}s, keys, the model, storage and the local index; say how to fix.

    With --agent NAME, that agent's setup (its key variable, its namespace); a
    missing master key fails only when a checked namespace derives from it.
    Exit code 1 when any check fails.
    """
    from .doctor import run_checks

    checks = run_checks(state.config_path, data_dir=state.data_dir, model=not no_model,
                        make_embedder=_override_factory(state), agent=state.agent_option)
    failed = [c for c in checks if not c.ok]
    if state.as_json:
        state.emit_json({"ok": not failed, "checks": [c.as_dict() for c in checks]})
    else:
        styles = {"ok": "[green] OK [/green]", "warn": "[yellow]WARN[/yellow]",
                  "fail": "[red]FAIL[/red]"}
        for check in checks:
            state.out.print(f"{styles[check.status]}  {escape(check.name)}: {escape(check.detail)}")
            if check.fix and check.status != "ok":
                state.out.print(f"      fix: {escape(check.fix)}")
        state.out.print(
            f"{len(failed)} problem(s) found." if failed else "Everything looks fine."
        )
    if failed:
        raise CommandFailed(f"{len(failed)} check(s) failed: "
                            + ", ".join(check.name for check in failed), kind="ChecksFailed",
                            hint="each failed check says how to fix it")


@click.command()
@click.option("--manifest", "manifest_blob_id", metavar="BLOB_ID",
              help="Head to rebuild the namespace from if the catalog is unusable and this "
                   "data dir remembers none.")
@pass_state
def repair(state: CliState, manifest_blob_id: str | None) -> None:
    """Fix what doctor finds: rebuild the index, re-enqueue lost outbox rows, replace
    damaged sealed copies, and rebuild an unusable catalog from Walrus.

    Every namespace unless -n or --agent is given. Exit code 1 when something is left
    unrepaired.
    """
    from .._memory.repair_run import repair_data_dir

    settings = state.settings
    with _progress(state, "restoring", None) as advance:
        rebuild, reports = repair_data_dir(
            settings, embedder=embedder_override(settings), namespace=state.scope,
            manifest_blob_id=manifest_blob_id,
            progress=lambda done, total: advance(done=done, total=total))
    left = sum(len(r.unrepaired) for r in reports)
    if rebuild is not None:
        left += len(rebuild.missing_heads) + len(rebuild.failed) + len(rebuild.unsalvaged) + sum(
            len(r.failed) for r in rebuild.restored.values())
    if state.as_json:
        state.emit_json({"ok": left == 0,
                         "catalog": None if rebuild is None else _dump(rebuild),
                         "namespaces": [_dump(r) for r in reports]})
    else:
        if rebuild is not None and rebuild.moved_to is not None:
            state.out.print(f"Catalog unusable ({said(rebuild.problems[0])}); moved aside to "
                            f"{rebuild.moved_to}.")
        if rebuild is not None:
            for ns, restored in rebuild.restored.items():
                state.out.print(f"  {ns}: restored {restored.restored} of {restored.total} "
                                f"from {restored.manifest_blob_id}")
            if rebuild.salvaged:
                late = len(rebuild.salvaged_published)
                state.out.print(
                    f"  {len(rebuild.salvaged)} memories in no restored head salvaged from the "
                    f"old file ({len(rebuild.salvaged) - late} queued, {late} published after "
                    "the last manifest; written again and queued, new ids where they were new)")
            if rebuild.salvaged_forgets:
                state.out.print(f"  {len(rebuild.salvaged_forgets)} forgets carried over from the "
                                "old file (those memories stay forgotten)")
            for source in rebuild.salvaged_from:
                if source != rebuild.moved_to:
                    state.out.print(f"  finished the salvage of {source} (an earlier repair "
                                    "stopped before it)")
            if rebuild.salvage_note:
                state.out.print(f"  note: {said(rebuild.salvage_note)}")
            for why in rebuild.unsalvaged[:20]:
                state.out.print(f"  NOT SALVAGED {said(why)}")
            for ns, why in rebuild.failed.items():
                state.out.print(f"  {ns}: restore FAILED {said(why)}; run repair again")
            if rebuild.heads_moved_to is not None:
                state.out.print(
                    f"Heads store unusable ({said(rebuild.heads_problem)}); moved aside to "
                    f"{rebuild.heads_moved_to}; rebuilt from the catalog: "
                    f"{len(rebuild.heads_relearned)} heads read back")
                for why in rebuild.heads_unreadable[:20]:
                    state.out.print(f"  head not read back (kept without parents): "
                                    f"{said(why)}")
            for ns in rebuild.missing_heads:
                state.out.print(f"  {ns}: no head known here; run `walrus-mem -n {ns} repair "
                                "--manifest BLOB_ID` with the id `walrus-mem sync` printed")
        for report in reports:
            state.out.print(f"{report.namespace}: {report.summary()}")
            for mid, why in report.unrepaired[:20]:
                state.out.print(f"  {mid}: NOT REPAIRED {said(why)}")
    if left:
        raise CommandFailed(f"{left} problem(s) left unrepaired", kind="Incomplete",
                            hint="run `walrus-mem repair` again; `walrus-mem doctor` says "
                                 "what is left")
