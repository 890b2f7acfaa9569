"""``walrus-mem import`` and ``export``: facts in from JSONL, text or Markdown notes,
memories out as JSONL."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from ..errors import InvalidInput
from .common import _FILTER_OPTION, CliState, _dump, _filters, _progress, pass_state, said
from .envelope import CommandFailed

#: Fields of an exported record that import ignores (they describe the old copy).
EXPORT_ONLY_FIELDS = frozenset({
    "id", "namespace", "created_at", "updated_at", "version", "status", "blob_id",
    "quilt_patch_id", "end_epoch", "deduplicated",
})


#: The SOURCE that means standard input.
STDIN = Path("-")

#: Facts an import queues before it publishes them, pooled into the cheapest quilts
#: (publisher.pool): 666-fact chunks published one by one paid ~2x the minimum storage
#: units, pooled at the end ~1.08x (groups of 10,000: 1.14x on a 5 MB chat, each group's
#: split ending ragged); the bound keeps an interrupted import's queue and the wait for
#: a first published fact finite (docs/benchmarks.md, storage cost).
POOLED_FACTS = 50_000


def read_import_items(path: Path, fmt: str) -> list[dict[str, Any] | str]:
    """Parse FILE (``-``: stdin) into remember_many items.

    * ``jsonl``: one JSON object per line with ``text`` and optional ``metadata``,
      ``category``, ``importance``, ``expires_at`` (fields of ``walrus-mem export``
      that describe the old copy are ignored);
    * ``text``: one fact per non-empty line;
    * ``markdown`` (a folder): every ``*.md`` file below it; each paragraph or list
      item is one fact, with metadata ``source`` (the file) and ``section`` (the
      heading above it).
    """
    if path == STDIN:
        return read_import_text(_read_stdin(), fmt, "stdin")
    if fmt == "auto":
        if path.is_dir():
            fmt = "markdown"
        elif path.suffix.lower() in {".jsonl", ".ndjson"}:
            fmt = "jsonl"
        elif path.suffix.lower() in {".md", ".markdown"}:
            fmt = "markdown"
        else:
            first = next((ln for ln in _read_lines(path) if ln.strip()), "")
            fmt = "jsonl" if first.lstrip().startswith("{") else "text"
    if fmt in ("jsonl", "text"):
        return read_import_text(_read_text(path), fmt, str(path))
    files = sorted(path.rglob("*.md")) if path.is_dir() else [path]
    items: list[dict[str, Any] | str] = []
    for file in files:
        source = str(file.relative_to(path)) if path.is_dir() else file.name
        items += markdown_facts(_read_text(file), source)
    return items


def read_import_text(text: str, fmt: str, where: str) -> list[dict[str, Any] | str]:
    """Parse one text (a file's or stdin's) into remember_many items; ``where`` names it
    in errors and is a Markdown fact's ``source``. ``auto``: jsonl if the first non-empty
    line starts with ``{``, else one fact per line."""
    lines = text.splitlines()
    if fmt == "auto":
        first = next((ln for ln in lines if ln.strip()), "")
        fmt = "jsonl" if first.lstrip().startswith("{") else "text"
    if fmt == "jsonl":
        return _jsonl_items(lines, where)
    if fmt == "text":
        return [ln.strip() for ln in lines if ln.strip()]
    return markdown_facts(text, where)


def _read_stdin() -> str:
    """All of stdin as UTF-8, whatever the locale says (the bytes, where there are any)."""
    binary = getattr(sys.stdin, "buffer", None)
    try:
        return binary.read().decode("utf-8") if binary is not None else sys.stdin.read()
    except UnicodeDecodeError as exc:
        raise InvalidInput("stdin is not UTF-8 text") from exc


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text") from exc
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from exc


def _read_lines(path: Path) -> list[str]:
    return _read_text(path).splitlines()


def _jsonl_items(lines: list[str], where: str) -> list[dict[str, Any] | str]:
    items: list[dict[str, Any] | str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{where}:{number}: not valid JSON ({exc.msg})") from exc
        if not isinstance(obj, dict):
            raise InvalidInput(f"{where}:{number}: each line must be a JSON object")
        items.append({k: v for k, v in obj.items() if k not in EXPORT_ONLY_FIELDS})
    return items


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
_FENCE_LINE = re.compile(r"^\s*(```|~~~)")


def markdown_facts(text: str, source: str) -> list[dict[str, Any] | str]:
    """Paragraphs and list items of a Markdown note, each one fact (code blocks skipped)."""
    facts: list[dict[str, Any] | str] = []
    section: str | None = None
    paragraph: list[str] = []
    in_code = False

    def flush() -> None:
        joined = " ".join(part.strip() for part in paragraph).strip()
        paragraph.clear()
        if joined:
            meta: dict[str, Any] = {"source": source}
            if section:
                meta["section"] = section
            facts.append({"text": joined, "metadata": meta})

    lines = text.splitlines()
    if lines and lines[0].strip() == "---":  # skip YAML front matter
        end = next((i for i, ln in enumerate(lines[1:], 1) if ln.strip() == "---"), None)
        if end is not None:
            lines = lines[end + 1:]
    for line in lines:
        if _FENCE_LINE.match(line):
            flush()
            in_code = not in_code
            continue
        if in_code:
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            section = heading.group(1) or None
        elif not line.strip():
            flush()
        elif _LIST_ITEM.match(line):
            flush()
            paragraph.append(_LIST_ITEM.sub("", line, count=1))
        else:
            paragraph.append(line)
    flush()
    return facts


@click.command("import")
@click.argument("source", type=click.Path(exists=True, allow_dash=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["auto", "jsonl", "text", "markdown"]),
              default="auto", show_default=True,
              help="auto: a folder is markdown, *.jsonl or a first line starting with { is "
                   "jsonl, anything else is one fact per line.")
@click.option("--batch-size", type=click.IntRange(1, 666), default=666, show_default=True,
              help="Facts per remember_many call; the calls are queued and published "
                   "together, in the quilts that cost the fewest storage units.")
@pass_state
def import_(state: CliState, source: Path, fmt: str, batch_size: int) -> None:
    """Remember many facts from a JSONL file, a text file, a folder of Markdown notes, or
    `-` (stdin: JSONL or one fact per line; --format markdown for a note)."""
    items = read_import_items(source, fmt)
    if not items:
        raise InvalidInput(f"{'stdin' if source == STDIN else source} holds no facts to import")
    mem = state.memory
    totals = {"stored": 0, "deduplicated": 0, "queued": 0}
    failed: list[tuple[int, str]] = []
    done = 0
    errors: list[str] = []
    try:
        with _progress(state, "importing", len(items)) as advance:
            for start in range(0, len(items), batch_size):
                chunk = items[start:start + batch_size]
                # queued in the catalog outbox (crash safe: the next sync publishes it)
                result = mem.remember_many(chunk, namespace=state.namespace, publish=False)
                for key in totals:
                    totals[key] += getattr(result, key)
                failed += [(start + i, msg) for i, msg in result.failed]
                done += len(chunk)
                if totals["queued"] >= POOLED_FACTS or done == len(items):
                    published, errors = mem.publish_pooled(state.namespace)
                    totals["queued"] = max(0, totals["queued"] - published)
                advance(len(chunk))
    except KeyboardInterrupt:
        # Ctrl-C: say what is in, exit 130 like a shell (not click's "Aborted!" and 1)
        state.emit_json({**_summary(state, len(items), totals, failed), "imported": done})
        raise CommandFailed(
            f"interrupted: imported {done} of {len(items)} item(s) into namespace "
            f"{state.namespace} ({totals['stored']} stored, {totals['deduplicated']} "
            f"deduplicated, {totals['queued']} queued, {len(failed)} failed); the batch in "
            "progress may be partly stored, `walrus-mem sync` publishes what is queued",
            kind="Interrupted", exit_code=130) from None
    for line in errors[:5]:  # the facts stay queued: `walrus-mem sync` tries again
        state.warn(f"not published yet: {said(line)}")
    summary = _summary(state, len(items), totals, failed)
    if state.as_json:
        state.emit_json(summary)
    else:
        state.out.print(
            f"Imported {len(items)} item(s) into namespace {state.namespace}: "
            f"{totals['stored']} stored, {totals['deduplicated']} deduplicated, "
            f"{totals['queued']} queued, {len(failed)} failed"
        )
        for index, msg in failed[:20]:
            state.out.print(f"  item {index + 1}: {said(msg)}")
        if len(failed) > 20:
            state.out.print(f"  … and {len(failed) - 20} more (use --json for all)")
    if failed:
        raise CommandFailed(f"{len(failed)} of {len(items)} item(s) failed")


def _summary(state: CliState, count: int, totals: dict[str, int],
             failed: list[tuple[int, str]]) -> dict[str, Any]:
    return {"namespace": state.namespace, "items": count, **totals,
            "failed": [{"index": i, "error": msg} for i, msg in failed]}


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as a new 0600 file, atomically.

    A private temp file (``mkstemp``: O_EXCL, 0600, unpredictable name) beside it is
    renamed over ``path``: an existing file's mode (0644) is not kept, and a symlink
    at ``path`` is replaced, never written through (a plaintext export must not land
    in a file someone else chose). A reader sees the old file or the whole new one.
    """
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise InvalidInput(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise InvalidInput(f"cannot write {path}: {exc.strerror}") from exc
    finally:
        Path(tmp).unlink(missing_ok=True)


@click.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to this file (a new 0600 file, replacing what is there; never "
                   "through a symlink) instead of stdout.")
@_FILTER_OPTION
@pass_state
def export(state: CliState, output: Path | None, filters: tuple[str, ...]) -> None:
    """Write the namespace's memories as JSONL (PLAINTEXT: handle it like the memories)."""
    records = state.memory.list(state.namespace, filters=_filters(filters),
                                limit=sys.maxsize, include_expired=True)
    dumped = [_dump(r) for r in records]
    body = "".join(json.dumps(d, ensure_ascii=False, sort_keys=True) + "\n" for d in dumped)
    if output is not None:
        write_private(output, body)
    elif not state.as_json:
        click.echo(body, nl=False)
    if state.as_json:  # the envelope; the records in it unless they went to a file
        state.emit_json({"namespace": state.namespace, "count": len(records),
                         "output": None if output is None else str(output),
                         **({"records": dumped} if output is None else {})})
    where = f"to {output}" if output else "to stdout"
    state.warn(f"exported {len(records)} memories of namespace {state.namespace} {where} as "
               "PLAINTEXT: anyone who can read it can read them.")
