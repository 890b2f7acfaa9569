#!/usr/bin/env python3
"""Issue 24, batch 1: move walrus_mem/ and relayer_mock/ modules into private
subpackages, rewrite every reference, and prove every moved definition unchanged.

Run it at the root of a walrus_mem checkout (a git work tree), with the project's
venv (ruff is taken from the venv of the interpreter running this script):

    cd /work/main && .venv/bin/python /tmp/house24_move.py            # apply
    cd /work/main && .venv/bin/python /tmp/house24_move.py --dry-run  # plan only

What it does, in order (deterministic; a second run is a no-op):

1. Checks the tree: every module of walrus_mem/ and relayer_mock/ is either in
   MAPPING or in KEEP (a module nobody mapped, e.g. one added since this table was
   written, stops the run: add it to the table).
2. Reads the "before" view of every module (the working-tree file, or for a module
   moved by an earlier run, ``git show BASE:<old path>``).
3. Rewrites, in walrus_mem/, relayer_mock/, tests/, bench/ (.py files):
   every import statement that names a moved module (module level, inside
   functions, ``if TYPE_CHECKING``; relative imports get the relative form that is
   right from the file's new place, absolute ones stay absolute; ``from pkg import
   module`` keeps its local name with ``as`` when the file name changed); then every
   remaining dotted mention ``walrus_mem.old`` / ``relayer_mock.old`` (strings for
   monkeypatch / mock.patch / logger names / subprocess code, attribute chains after
   ``import walrus_mem.x``, comments, docstrings) and path mention
   ``walrus_mem/old.py``. Dotted and path mentions are rewritten the same way in
   README.md, docs/*.md, pyproject.toml (entry point), Makefile and .ci/*.
4. ``git mv`` old -> new, creating each new subpackage with its ``__init__.py``
   (docstring only: PACKAGE_DOCS), ``git add``-ed.
5. ``ruff check --select I --fix`` on the touched .py files (import order only).
6. Verifies, by AST, for every module of both packages and every test/bench file:
   each top-level statement other than imports (docstring, constants, defs, classes)
   has the same source text as before, with imports nested inside a def compared by
   what they resolve to and old dotted names read through MAPPING; the module-level
   imports resolve to the same set. Prints how many definitions are byte-identical
   and which ones differ only by a mapped name (a comment, docstring or string that
   names a moved module). Any other difference fails the run (exit 1).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# --------------------------------------------------------------------------------------
# The table: old module -> new module. Modules not listed stay where they are (KEEP).
# --------------------------------------------------------------------------------------

MAPPING: dict[str, str] = {
    # agents: what the hooks / tools / MCP server share that users do not import
    "walrus_mem.consolidate": "walrus_mem._agents.consolidate",
    "walrus_mem.mcp_sdk": "walrus_mem._agents.mcp_sdk",
    # catalog: the SQLite source of truth on this machine
    "walrus_mem.catalog": "walrus_mem._catalog.catalog",
    "walrus_mem.catalog_changes": "walrus_mem._catalog.changes",
    "walrus_mem.catalog_fts": "walrus_mem._catalog.fts",
    "walrus_mem.catalog_guard": "walrus_mem._catalog.guard",
    "walrus_mem.catalog_log": "walrus_mem._catalog.log_tables",
    "walrus_mem.catalog_outbox": "walrus_mem._catalog.outbox",
    "walrus_mem.outbox_poison": "walrus_mem._catalog.outbox_poison",
    "walrus_mem.postings": "walrus_mem._catalog.postings",
    "walrus_mem.catalog_postings": "walrus_mem._catalog.postings_reads",
    "walrus_mem.catalog_reads": "walrus_mem._catalog.reads",
    "walrus_mem.catalog_schema": "walrus_mem._catalog.schema",
    "walrus_mem.rows": "walrus_mem._catalog.rows",
    # cli: the walrus-mem command
    "walrus_mem.cli": "walrus_mem._cli.main",
    "walrus_mem.cli_common": "walrus_mem._cli.common",
    "walrus_mem.cli_doctor": "walrus_mem._cli.cmd_doctor",
    "walrus_mem.cli_import_export": "walrus_mem._cli.cmd_import_export",
    "walrus_mem.cli_keys": "walrus_mem._cli.cmd_keys",
    "walrus_mem.cli_memory": "walrus_mem._cli.cmd_memory",
    "walrus_mem.cli_share": "walrus_mem._cli.cmd_share",
    "walrus_mem.cli_sync": "walrus_mem._cli.cmd_sync",
    "walrus_mem.demo": "walrus_mem._cli.demo",
    "walrus_mem.doctor": "walrus_mem._cli.doctor",
    # keys: where key material lives and who may use it (keys.py derives, envelope.py seals)
    "walrus_mem.access": "walrus_mem._keys.access",
    "walrus_mem.keystore": "walrus_mem._keys.keystore",
    "walrus_mem.hardening": "walrus_mem._keys.hardening",
    # local: this machine's files and environment
    "walrus_mem.datadir_lock": "walrus_mem._local.datadir_lock",
    "walrus_mem.dir_trust": "walrus_mem._local.dir_trust",
    "walrus_mem.placeholders": "walrus_mem._local.placeholders",
    "walrus_mem.private_dirs": "walrus_mem._local.private_dirs",
    # log: the namespace log on Walrus (manifests, heads, merges)
    "walrus_mem.namespace_log": "walrus_mem._log.namespace_log",
    "walrus_mem.log_announce": "walrus_mem._log.announce",
    "walrus_mem.log_apply": "walrus_mem._log.apply",
    "walrus_mem.log_expiry": "walrus_mem._log.expired",
    "walrus_mem.log_generation": "walrus_mem._log.generation",
    "walrus_mem.log_gone": "walrus_mem._log.gone",
    "walrus_mem.log_legacy": "walrus_mem._log.legacy",
    "walrus_mem.log_older": "walrus_mem._log.older",
    "walrus_mem.log_pages": "walrus_mem._log.pages",
    "walrus_mem.log_pending": "walrus_mem._log.pending",
    "walrus_mem.heads": "walrus_mem._log.heads",
    "walrus_mem.heads_mirror": "walrus_mem._log.heads_mirror",
    "walrus_mem.legacy_manifest": "walrus_mem._log.legacy_manifest",
    "walrus_mem.lineage": "walrus_mem._log.lineage",
    "walrus_mem.manifest": "walrus_mem._log.manifest",
    "walrus_mem.merge": "walrus_mem._log.merge",
    # memory: Memory's collaborators (memory.py is the facade over them)
    "walrus_mem.async_memory": "walrus_mem._memory.async_memory",
    "walrus_mem.deletions": "walrus_mem._memory.deletions",
    "walrus_mem.follow": "walrus_mem._memory.follow",
    "walrus_mem.grants": "walrus_mem._memory.grants",
    "walrus_mem.inputs": "walrus_mem._memory.inputs",
    "walrus_mem.integrity": "walrus_mem._memory.integrity",
    "walrus_mem.network_reset": "walrus_mem._memory.network_reset",
    "walrus_mem.renewal": "walrus_mem._memory.renewal",
    "walrus_mem.repair": "walrus_mem._memory.repair",
    "walrus_mem.restate": "walrus_mem._memory.restate",
    "walrus_mem.rotation": "walrus_mem._memory.rotation",
    "walrus_mem.rotation_cleanup": "walrus_mem._memory.rotation_cleanup",
    # recall: embeddings, the vector index, lexical scoring, ranking
    "walrus_mem.embeddings": "walrus_mem._recall.embeddings",
    "walrus_mem.filters": "walrus_mem._recall.filters",
    "walrus_mem.index": "walrus_mem._recall.index",
    "walrus_mem.lexical": "walrus_mem._recall.lexical",
    "walrus_mem.minilm": "walrus_mem._recall.minilm",
    "walrus_mem.minilm_onnx": "walrus_mem._recall.minilm_onnx",
    "walrus_mem.native": "walrus_mem._recall.native",
    "walrus_mem.query_features": "walrus_mem._recall.query_features",
    "walrus_mem.ranking": "walrus_mem._recall.ranking",
    "walrus_mem.recall": "walrus_mem._recall.recall",
    "walrus_mem.relevance_gate": "walrus_mem._recall.relevance_gate",
    "walrus_mem.temporal": "walrus_mem._recall.temporal",
    # safety: the screens behind safety.py
    "walrus_mem.injection": "walrus_mem._safety.injection",
    "walrus_mem.injection_concepts": "walrus_mem._safety.injection_concepts",
    "walrus_mem.injection_intents": "walrus_mem._safety.injection_intents",
    "walrus_mem.injection_patterns": "walrus_mem._safety.injection_patterns",
    "walrus_mem.injection_spaced": "walrus_mem._safety.injection_spaced",
    "walrus_mem.memory_blocks": "walrus_mem._safety.memory_blocks",
    "walrus_mem.prompt_screen": "walrus_mem._safety.prompt_screen",
    "walrus_mem.secret_checks": "walrus_mem._safety.secret_checks",
    "walrus_mem.secret_ids": "walrus_mem._safety.secret_ids",
    "walrus_mem.secret_phrases": "walrus_mem._safety.secret_phrases",
    "walrus_mem.secret_redaction": "walrus_mem._safety.secret_redaction",
    # walrus: the Walrus client's insides, the backend, reads that verify, the epoch clock
    "walrus_mem.walrus_core": "walrus_mem._walrus.core",
    "walrus_mem.walrus_responses": "walrus_mem._walrus.responses",
    "walrus_mem.blobio": "walrus_mem._walrus.blobio",
    "walrus_mem.bounded_io": "walrus_mem._walrus.bounded_io",
    "walrus_mem.credentials": "walrus_mem._walrus.credentials",
    "walrus_mem.endpoints": "walrus_mem._walrus.endpoints",
    "walrus_mem.epoch_guard": "walrus_mem._walrus.epoch_guard",
    "walrus_mem.expiry": "walrus_mem._walrus.expiry",
    "walrus_mem.publish_check": "walrus_mem._walrus.publish_check",
    "walrus_mem.retry": "walrus_mem._walrus.retry",
    "walrus_mem.storage": "walrus_mem._walrus.storage",
    "walrus_mem.url_secrets": "walrus_mem._walrus.url_secrets",
    # relayer_mock: flat, httpx-style: what docs do not name becomes _private
    "relayer_mock.admin": "relayer_mock._admin",
    "relayer_mock.admin_auth": "relayer_mock._admin_auth",
    "relayer_mock.aggregator": "relayer_mock._aggregator",
    "relayer_mock.context": "relayer_mock._context",
    "relayer_mock.cost": "relayer_mock._cost",
    "relayer_mock.ids": "relayer_mock._ids",
    "relayer_mock.injection": "relayer_mock._injection",
    "relayer_mock.params": "relayer_mock._params",
    "relayer_mock.publisher": "relayer_mock._publisher",
    "relayer_mock.quilt": "relayer_mock._quilt",
    "relayer_mock.realism": "relayer_mock._realism",
    "relayer_mock.responses": "relayer_mock._responses",
    "relayer_mock.store": "relayer_mock._store",
}

# The public modules (README.md / docs/ tell users to import them), left in place.
KEEP: set[str] = {
    "walrus_mem", "walrus_mem.__main__", "walrus_mem.config", "walrus_mem.envelope",
    "walrus_mem.errors", "walrus_mem.extract", "walrus_mem.hooks", "walrus_mem.keys",
    "walrus_mem.mcp_server", "walrus_mem.memory", "walrus_mem.middleware",
    "walrus_mem.models", "walrus_mem.safety", "walrus_mem.sessions", "walrus_mem.testing",
    "walrus_mem.tools", "walrus_mem.walrus",
    "relayer_mock", "relayer_mock.__main__", "relayer_mock.app", "relayer_mock.auth",
    "relayer_mock.cli", "relayer_mock.embedded", "relayer_mock.faults", "relayer_mock.server",
}

PACKAGE_DOCS: dict[str, str] = {
    "walrus_mem._agents": '''\
"""What the agent integrations share and users do not import.

    hooks.py / tools.py / middleware.py  --capture-->  consolidate (merge near-duplicates,
                                                        retire contradicted facts)
    mcp_server.py  --imports-->  mcp_sdk (the parts of the mcp SDK the stdio server uses)

The public faces are the top-level hooks, tools, sessions, middleware, extract and
mcp_server modules.
"""
''',
    "walrus_mem._catalog": '''\
"""The local catalog: one SQLite file (WAL) that is the source of truth on this machine.

    Memory --writes/reads--> catalog.Catalog (schema: migrations in order)
        mixins: reads (memories, history, tombstones), fts (FTS5 bm25),
                postings_reads (postings by query word), outbox (publish batches not
                on Walrus yet; outbox_poison: ones refused for good), log_tables
                (manifests, pages, merged heads), changes (keys touched per namespace)
        guard: sqlite3 errors -> LocalStoreError;  rows: catalog rows -> MemoryRecord
        postings: per-namespace bm25 postings, written with each FTS5 row
"""
''',
    "walrus_mem._cli": '''\
"""The ``walrus-mem`` command: a thin shell over the library API.

    main.main (click group, global options; lazy "mcp" and "relayer")
        -> cmd_memory (remember, recall, get, list, forget, ...), cmd_sync (restore,
           pull, sync, expiry), cmd_keys, cmd_share, cmd_import_export,
           cmd_doctor (doctor -> doctor.run_checks; repair -> _memory.repair)
        -> demo (walrus-mem demo / make demo)
    common: what every command shares (option state, parsing, opening a Memory).
"""
''',
    "walrus_mem._keys": '''\
"""Where key material lives and who may use it.

    keys.py (public): master seed -> per-namespace keys (derive, generations)
        keystore: the master key file / keyring; backup and import
        access:   a namespace is read and written only with its own key
        hardening: no core dumps from a process that holds keys
    envelope.py (public) seals and opens one record with those keys.
"""
''',
    "walrus_mem._local": '''\
"""This machine's files and environment, below everything else.

    private_dirs: configured paths expanded; created directories private (0700)
    dir_trust:    refuse a data dir / state dir another user could change
    datadir_lock: every open Memory holds the data dir shared, repair exclusively
    placeholders: ${VAR} placeholders in configuration values (config.py)
"""
''',
    "walrus_mem._log": '''\
"""The namespace log: how a namespace is published to Walrus and found again.

    Memory.sync/pull -> namespace_log.NamespaceLog
        publish: manifest (+ pages) sealed -> Walrus -> announce (heads.sqlite3,
                 heads file; heads_mirror keeps a per-user copy of seen heads)
        pull:    heads -> manifest (legacy / legacy_manifest: format 1) -> merge (the
                 rule; lineage: which versions descend) -> apply (winners current,
                 losers history); pending: merged, not fetched yet; older /
                 generation: copies sealed under other key generations;
                 gone / expired: a 404 proves a blob gone, the epoch clock proposes
"""
''',
    "walrus_mem._memory": '''\
"""Memory's collaborators: memory.py is the facade, these do the work it delegates.

    Memory.remember/forget -> inputs (validation), restate (re-statements),
                              deletions (blobs still to delete)
    Memory.sync            -> renewal (re-publish what is about to expire),
                              network_reset (a wiped network)
    Memory.rotate_key      -> rotation, rotation_cleanup (delete_old); follow (pulls
                              that follow a rotation made elsewhere)
    Memory.share/accept    -> grants
    doctor / repair        -> integrity (checks), repair (fixes)
    AsyncMemory (async_memory): the same API as coroutines
"""
''',
    "walrus_mem._recall": '''\
"""Recall: from a query to ranked memories, locally, in milliseconds.

    query -> query_features (who / when; temporal) -> embeddings (MiniLM: minilm numpy,
             minilm_onnx warm path; native: load order of native libs)
          -> recall: index (USearch ANN per namespace) + lexical (bm25 over the
             catalog's postings) -> ranking (fusion, cutoff) -> filters (metadata)
    relevance_gate: does a prompt want a memory at all (auto-recall)?
"""
''',
    "walrus_mem._safety": '''\
"""The screens behind safety.py: what may enter memory and what may reach a model.

    capture:  secret_redaction <- secret_checks (validated detectors; secret_ids,
              secret_phrases) -> "[REDACTED:<kind>]"
    prompt:   injection (layers: injection_patterns, injection_concepts,
              injection_intents, injection_spaced, semantic prototypes)
              -> prompt_screen (the one screen every path runs)
              -> memory_blocks (nonce-framed blocks put into a prompt)
"""
''',
    "walrus_mem._walrus": '''\
"""The Walrus side: the client's insides, the backend, and what Walrus tells us.

    walrus.py (public WalrusClient / AsyncWalrusClient)
        -> core (sans-I/O: config, counters, requests) -> responses (parsing)
        -> retry (backoff, deadlines), endpoints (failover), bounded_io (deadline,
           size cap), credentials (publisher tokens), url_secrets (user:pw@ in URLs)
    storage: the backend a Memory talks to (HTTP client or embedded relayer)
    blobio / publish_check: reads that must verify; read-back after publish
    expiry (epoch clock) <- epoch_guard (one lying answer must not move it)
"""
''',
}

# Lines the longer names push over 100 characters, rewrapped (path after the move,
# text after the rename, replacement). The definition check applies them to the
# "before" text too. A fix whose text is not found is reported, not applied.
POST_FIXES: list[tuple[str, str, str]] = [
    ("bench/embedders.py",
     '''                          "from walrus_mem._recall.minilm_onnx import cached_model; cached_model()"],''',
     '''                          "from walrus_mem._recall.minilm_onnx import cached_model; "
                          "cached_model()"],'''),
    ("tests/conftest.py",
     '''    for target in ("walrus_mem.config.default_config_path", "walrus_mem._cli.main.default_config_path"):''',
     '''    for target in ("walrus_mem.config.default_config_path",
                   "walrus_mem._cli.main.default_config_path"):'''),
    ("tests/test_demo.py",
     '''    monkeypatch.setattr(walrus_mem._recall.embeddings, "make_embedder", lambda *a, **k: real_embedder)''',
     '''    monkeypatch.setattr(walrus_mem._recall.embeddings, "make_embedder",
                        lambda *a, **k: real_embedder)'''),
    ("tests/test_postings.py",
     '''"""The postings (walrus_mem._catalog.postings): FTS5's terms, FTS5's bm25, kept in step with FTS5."""''',
     '''"""The postings (walrus_mem._catalog.postings): FTS5's terms, FTS5's bm25, kept in step
with FTS5."""'''),
    ("walrus_mem/_recall/minilm_onnx.py",
     '''                                     "was imported before walrus_mem (see walrus_mem._recall.native)")''',
     '''                                     "was imported before walrus_mem "
                                     "(see walrus_mem._recall.native)")'''),
    ("walrus_mem/memory.py",
     '''        """Merge near-duplicates, retire superseded facts (see :mod:`walrus_mem._agents.consolidate`)."""''',
     '''        """Merge near-duplicates, retire superseded facts.

        See :mod:`walrus_mem._agents.consolidate`.
        """'''),
]


def post_fix(rel: str, text: str) -> str:
    for path, old, new in POST_FIXES:
        if path == rel:
            text = text.replace(old, new)
    return text


PY_ROOTS = ("walrus_mem", "relayer_mock", "tests", "bench")
TEXT_GLOBS = ("README.md", "docs/**/*.md", "pyproject.toml", "Makefile", ".ci/*")
PACKAGES = ("walrus_mem", "relayer_mock")


def die(msg: str) -> None:
    print(f"house24_move: {msg}", file=sys.stderr)
    sys.exit(1)


# --------------------------------------------------------------------------------------
# Module tables and import resolution
# --------------------------------------------------------------------------------------


def module_name(rel: Path) -> tuple[str, bool]:
    parts = list(rel.with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts.pop()
    return ".".join(parts), is_pkg


def module_path(name: str, is_pkg: bool = False) -> Path:
    parts = name.split(".")
    return Path(*parts, "__init__.py") if is_pkg else Path(*parts[:-1], parts[-1] + ".py")


def package_modules(root: Path) -> dict[str, Path]:
    table = {}
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            rel = p.relative_to(root)
            table[module_name(rel)[0]] = rel
    return table


def all_old_modules(root: Path) -> set[str]:
    """Module names as they were before the move (mapped new names read back)."""
    inverse = {v: k for k, v in MAPPING.items()}
    return ({inverse.get(m, m) for m in package_modules(root)} | set(MAPPING)) - set(PACKAGE_DOCS)


def map_name(dotted: str) -> str:
    """An old dotted name (module, or module.attr...) -> its new spelling."""
    probe = dotted
    while probe:
        if probe in MAPPING:
            return MAPPING[probe] + dotted[len(probe):]
        probe = probe.rpartition(".")[0]
    return dotted


def resolve_base(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_pkg:
        parts.pop()
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    if node.module:
        parts.append(node.module)
    return ".".join(parts)


def relative_spec(target: str, new_module: str, is_pkg: bool) -> str:
    here = new_module.split(".")
    if not is_pkg:
        here.pop()
    there = target.split(".")
    common = 0
    while common < min(len(here), len(there)) and here[common] == there[common]:
        common += 1
    level = len(here) - common + 1
    return "." * level + ".".join(there[common:])


def same_top(a: str, b: str) -> bool:
    return a.split(".")[0] == b.split(".")[0]


# --------------------------------------------------------------------------------------
# Rewriting one .py file
# --------------------------------------------------------------------------------------


@dataclass
class FileCtx:
    rel: Path  # current (old) path
    new_rel: Path  # path after the move
    old_module: str | None  # where the file is now; None outside the packages
    new_module: str | None
    is_pkg: bool


def line_offsets(text: str) -> list[int]:
    offs = [0]
    for line in text.splitlines(keepends=True):
        offs.append(offs[-1] + len(line))
    return offs


def _node_span(text_offs: list[int], src: str, node: ast.stmt) -> tuple[int, int]:
    # ast offsets are utf-8 byte columns; convert through the line's text
    def to_index(lineno: int, col: int) -> int:
        start = text_offs[lineno - 1]
        line_bytes = src[start:text_offs[lineno]].encode("utf-8")
        return start + len(line_bytes[:col].decode("utf-8"))
    assert node.end_lineno is not None and node.end_col_offset is not None
    return to_index(node.lineno, node.col_offset), to_index(node.end_lineno, node.end_col_offset)


def format_from(spec: str, names: list[tuple[str, str | None]], indent: str) -> str:
    parts = [n if a is None else f"{n} as {a}" for n, a in names]
    one = f"from {spec} import {', '.join(parts)}"
    if len(indent) + len(one) <= 100:
        return one
    inner = "".join(f"{indent}    {p},\n" for p in parts)
    return f"from {spec} import (\n{inner}{indent})"


def rewrite_imports(src: str, ctx: FileCtx, old_modules: set[str]) -> tuple[str, list[str]]:
    """Rewrite import statements that name moved modules (or whose relative form
    changes because the file itself moves). Returns new text and warnings."""
    tree = ast.parse(src)
    offs = line_offsets(src)
    edits: list[tuple[int, int, str]] = []
    warnings: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            changed = False
            parts = []
            for alias in node.names:
                new = map_name(alias.name)
                changed |= new != alias.name
                parts.append(new if alias.asname is None else f"{new} as {alias.asname}")
            if changed:
                start, end = _node_span(offs, src, node)
                edits.append((start, end, "import " + ", ".join(parts)))
        elif isinstance(node, ast.ImportFrom):
            if node.level and ctx.old_module is None:
                continue  # tests/, bench/: relative imports stay among themselves
            base = (resolve_base(ctx.old_module, ctx.is_pkg, node) if node.level
                    else node.module or "")
            if base.split(".")[0] not in PACKAGES:
                continue
            groups: dict[str, list[tuple[str, str | None]]] = {}
            renamed = False
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if alias.name != "*" and sub in old_modules:
                    new_full = map_name(sub)
                    new_base, _, leaf = new_full.rpartition(".")
                    binding = alias.asname or alias.name
                    asname = None if leaf == binding else binding
                    renamed |= leaf != alias.name or asname != alias.asname
                    groups.setdefault(new_base, []).append((leaf, asname))
                else:
                    groups.setdefault(map_name(base), []).append((alias.name, alias.asname))
            indent = src[offs[node.lineno - 1]:].split("\n", 1)[0]
            indent = indent[: len(indent) - len(indent.lstrip())]

            def spec_for(target: str, node: ast.ImportFrom = node) -> str:
                if node.level and ctx.new_module and same_top(target, ctx.new_module):
                    return relative_spec(target, ctx.new_module, ctx.is_pkg)
                return target
            old_spec = "." * node.level + (node.module or "")
            if len(groups) == 1 and not renamed:
                (target,) = groups
                new_spec = spec_for(target)
                if new_spec == old_spec:
                    continue
                start, end = _node_span(offs, src, node)
                segment = src[start:end]
                m = re.match(r"from\s+" + re.escape(old_spec) + r"\s+import\b", segment)
                if not m:
                    die(f"{ctx.rel}:{node.lineno}: cannot find the head of {segment[:60]!r}")
                edits.append((start, end, f"from {new_spec} import" + segment[m.end():]))
                continue
            start, end = _node_span(offs, src, node)
            if "#" in src[start:end]:
                warnings.append(f"{ctx.rel}:{node.lineno}: comment inside a split import dropped")
            trailing = re.match(r"[ \t]*#[^\n]*", src[end:])  # e.g. "  # noqa: E402"
            stmts = [format_from(spec_for(t), names, indent) for t, names in groups.items()]
            if trailing:  # every statement of the split keeps it (the last one has it already)
                stmts = [st + trailing.group(0) for st in stmts[:-1]] + stmts[-1:]
            edits.append((start, end, ("\n" + indent).join(stmts)))
    for start, end, new in sorted(edits, reverse=True):
        src = src[:start] + new + src[end:]
    return src, warnings


def dotted_regex() -> re.Pattern[str]:
    names = sorted(MAPPING, key=len, reverse=True)
    alt = "|".join(re.escape(n) for n in names)
    return re.compile(r"(?<![\w.])(" + alt + r")(?!\w)")


def path_regex() -> re.Pattern[str]:
    names = sorted(MAPPING, key=len, reverse=True)
    alt = "|".join(re.escape(str(module_path(n))) for n in names)
    return re.compile(r"(?<![\w./])(" + alt + r")(?!\w)")


DOTTED = dotted_regex()
PATHS = path_regex()


# "from walrus_mem import rotation" left in text after the AST pass: code inside
# strings (subprocess scripts, templates) and Markdown. One line, no parentheses.
FROM_LINE = re.compile(
    r"^(?P<indent>[ \t>]*)from (?P<mod>(?:walrus_mem|relayer_mock)(?:\.\w+)*) import "
    r"(?P<names>\w+(?: as \w+)?(?:, *\w+(?: as \w+)?)*)(?P<tail>[^\n]*)$", re.M)
OLD_MODULES: set[str] = set(MAPPING)  # completed by main() with the tree's modules


def _rewrite_from_line(m: re.Match[str]) -> str:
    mod = m.group("mod")
    groups: dict[str, list[tuple[str, str | None]]] = {}
    for part in m.group("names").split(","):
        name, _, asname = (x.strip() for x in part.strip().partition(" as "))
        alias = asname or None
        if f"{mod}.{name}" in OLD_MODULES:
            new_base, _, leaf = map_name(f"{mod}.{name}").rpartition(".")
            binding = alias or name
            groups.setdefault(new_base, []).append((leaf, None if leaf == binding else binding))
        else:
            groups.setdefault(map_name(mod), []).append((name, alias))
    if list(groups) == [mod] and all(n == o for (n, _), o in zip(
            groups[mod], (p.strip().partition(" as ")[0] for p in m.group("names").split(",")))):
        return m.group(0)
    indent = m.group("indent")
    lines = [indent + "from " + base + " import " +
             ", ".join(n if a is None else f"{n} as {a}" for n, a in names)
             for base, names in groups.items()]
    return "\n".join(lines) + m.group("tail")


def rewrite_text(text: str) -> str:
    text = FROM_LINE.sub(_rewrite_from_line, text)
    text = DOTTED.sub(lambda m: MAPPING[m.group(1)], text)
    return PATHS.sub(lambda m: str(module_path(MAPPING[module_name(Path(m.group(1)))[0]])), text)


# --------------------------------------------------------------------------------------
# The definition check
# --------------------------------------------------------------------------------------


def import_targets(node: ast.Import | ast.ImportFrom, module: str | None, is_pkg: bool,
                   modules: set[str], to_new: bool) -> list[tuple[str, str, str | None]]:
    """What an import binds: (module or module.attr, bound name, ...) normalised to
    new names, so before/after compare equal when only the spelling changed."""
    out = []
    if isinstance(node, ast.Import):
        for a in node.names:
            name = map_name(a.name) if to_new else a.name
            out.append(("import", name, a.asname))
        return out
    if node.level and module is None:
        base = "." * node.level + (node.module or "")
    else:
        base = resolve_base(module, is_pkg, node) if node.level else (node.module or "")
    for a in node.names:
        full = f"{base}.{a.name}"
        if to_new:
            full = map_name(full)
        binding = a.asname or a.name
        out.append(("from", full, binding))
    return out


def statement_views(src: str, module: str | None, is_pkg: bool, modules: set[str],
                    to_new: bool) -> tuple[list[tuple[str, str, str]], set[tuple[str, str, str | None]]]:
    """(label, raw source, normalised source) per non-import top-level statement, and
    the set of module-level import bindings. Normalised: imports nested in the
    statement replaced by one marker per run of them, plus what they all bind."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    views = []
    top_imports: set[tuple[str, str, str | None]] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            top_imports.update(import_targets(stmt, module, is_pkg, modules, to_new))
            continue
        start, end = stmt.lineno, stmt.end_lineno or stmt.lineno
        if getattr(stmt, "decorator_list", None):
            start = min(d.lineno for d in stmt.decorator_list)  # type: ignore[attr-defined]
        nested: dict[int, tuple[int, list[tuple[str, str, str | None]]]] = {}
        for sub in ast.walk(stmt):
            if isinstance(sub, (ast.Import, ast.ImportFrom)) and sub is not stmt:
                nested[sub.lineno] = (sub.end_lineno or sub.lineno,
                                      import_targets(sub, module, is_pkg, modules, to_new))
        out: list[str] = []
        bound: list[tuple[str, str, str | None]] = []
        i = start
        while i <= end:
            if i in nested:
                last, targets = nested[i]
                bound.extend(targets)
                if not out or out[-1] != "<imports>\n":
                    out.append("<imports>\n")
                i = last + 1
                continue
            out.append(lines[i - 1])
            i += 1
        text = "".join(out)
        if bound:
            text += "<nested imports: " + repr(sorted(bound, key=repr)) + ">"
        label = getattr(stmt, "name", None) or f"line {stmt.lineno} {type(stmt).__name__}"
        views.append((label, "".join(lines[start - 1:end]), text))
    return views, top_imports


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], check=check, text=True,
                          capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path.cwd())
    ap.add_argument("--base", default="HEAD", help="commit holding the old files "
                    "(only read when a module was already moved by an earlier run)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    ap.add_argument("--ruff", default=None, help="ruff executable (default: next to python)")
    ap.add_argument("--add-test", type=Path, default=Path(__file__).with_name(
        "house24_test_import_graph.py"), help="copied to tests/test_import_graph.py if "
        "that file is missing (the issue's import-graph test)")
    args = ap.parse_args()
    root: Path = args.root.resolve()
    if not (root / "walrus_mem" / "__init__.py").exists():
        die(f"{root} is not a walrus_mem checkout")
    if git(root, "rev-parse", "--is-inside-work-tree", check=False).returncode:
        die(f"{root} is not a git work tree")

    # 1. the table covers the tree
    present = package_modules(root)
    pending = {o: n for o, n in MAPPING.items() if o in present}
    done = {o: n for o, n in MAPPING.items() if o not in present and n in present}
    missing = sorted(o for o in MAPPING if o not in present and MAPPING[o] not in present)
    both = sorted(o for o in pending if MAPPING[o] in present)
    if missing:
        die("mapped modules found neither at the old nor the new path: " + ", ".join(missing))
    if both:
        die("modules present at both the old and the new path: " + ", ".join(both))
    new_names = set(MAPPING.values())
    unmapped = sorted(m for m in present if m not in MAPPING and m not in KEEP
                      and m not in new_names and m not in PACKAGE_DOCS)
    if unmapped:
        die("modules not in the table (add them to MAPPING or KEEP): " + ", ".join(unmapped))
    print(f"{len(pending)} modules to move, {len(done)} already moved, "
          f"{len(KEEP)} kept in place")
    if args.dry_run:
        for o, n in sorted(pending.items()):
            print(f"  {module_path(o)} -> {module_path(n)}")
        return 0

    old_modules = all_old_modules(root)
    OLD_MODULES.update(old_modules)
    target_test = root / "tests" / "test_import_graph.py"
    if args.add_test and args.add_test.exists() and not target_test.exists():
        shutil.copyfile(args.add_test, target_test)
        git(root, "add", "tests/test_import_graph.py")

    # 2. before views
    before: dict[Path, tuple[str, str | None, bool]] = {}  # new rel -> (src, old mod, is_pkg)
    for o in sorted(old_modules):
        if o in PACKAGES and o not in present:
            continue
        is_pkg = o in PACKAGES
        old_rel = module_path(o, is_pkg)
        new_rel = module_path(MAPPING.get(o, o), is_pkg)
        if (root / old_rel).exists():
            before[new_rel] = ((root / old_rel).read_text(encoding="utf-8"), o, is_pkg)
        else:
            shown = git(root, "show", f"{args.base}:{old_rel.as_posix()}", check=False)
            if shown.returncode == 0:
                before[new_rel] = (shown.stdout, o, is_pkg)
    for top in ("tests", "bench"):
        for p in sorted((root / top).rglob("*.py")):
            rel = p.relative_to(root)
            before[rel] = (p.read_text(encoding="utf-8"), None, False)

    # 3. rewrite
    touched_py: list[Path] = []
    warnings: list[str] = []
    for top in PY_ROOTS:
        for p in sorted((root / top).rglob("*.py")):
            rel = p.relative_to(root)
            name, is_pkg = module_name(rel)
            in_pkg = top in PACKAGES
            # relative imports are read from where the file is now (its old place on a
            # first run; its new place when an earlier run moved it already)
            cur_mod = name if in_pkg else None
            new_mod = MAPPING.get(name, name) if in_pkg else None
            new_rel = module_path(new_mod, is_pkg) if new_mod else rel
            ctx = FileCtx(rel, new_rel, cur_mod, new_mod, is_pkg)
            src = p.read_text(encoding="utf-8")
            out, warn = rewrite_imports(src, ctx, old_modules)
            warnings += warn
            out = rewrite_text(out)
            if out != src:
                p.write_text(out, encoding="utf-8")
                touched_py.append(new_rel)
    touched_text = []
    for pattern in TEXT_GLOBS:
        for p in sorted(root.glob(pattern)):
            if not p.is_file():
                continue
            src = p.read_text(encoding="utf-8")
            out = rewrite_text(src)
            if out != src:
                p.write_text(out, encoding="utf-8")
                touched_text.append(p.relative_to(root))

    # 4. git mv, new packages
    for pkg, doc in sorted(PACKAGE_DOCS.items()):
        init = root / module_path(pkg, True)
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(doc, encoding="utf-8")
            git(root, "add", str(init.relative_to(root)))
    for o, n in sorted(pending.items()):
        src, dst = module_path(o), module_path(n)
        (root / dst).parent.mkdir(parents=True, exist_ok=True)
        r = git(root, "mv", str(src), str(dst), check=False)
        if r.returncode:  # untracked (e.g. new, uncommitted work): plain move + add
            shutil.move(str(root / src), str(root / dst))
            git(root, "add", str(dst))

    # 4b. rewrap what the longer names pushed over the line limit
    for rel, old_text, _ in POST_FIXES:
        path = root / rel
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        if old_text in text:
            path.write_text(post_fix(rel, text), encoding="utf-8")
        elif _ not in text:
            warnings.append(f"post fix for {rel} not applied: text not found")

    # 5. import order
    ruff = args.ruff or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        ruff = shutil.which("ruff") or die("ruff not found (pass --ruff)")  # type: ignore[assignment]
    files = sorted({str(f) for f in touched_py} | {str(module_path(p, True))
                                                 for p in PACKAGE_DOCS})
    if files:
        subprocess.run([ruff, "check", "--quiet", "--select", "I", "--fix", *files],
                       cwd=root, check=False)

    # 6. definitions unchanged
    new_table = package_modules(root)
    mismatches: list[str] = []
    identical = renamed_only = 0
    renamed_list: list[str] = []
    for new_rel, (old_src, old_mod, is_pkg) in sorted(before.items()):
        path = root / new_rel
        if not path.exists():
            mismatches.append(f"{new_rel}: missing after the move")
            continue
        new_src = path.read_text(encoding="utf-8")
        new_mod = MAPPING.get(old_mod, old_mod) if old_mod else None
        b_views, b_imports = statement_views(old_src, old_mod, is_pkg, old_modules, True)
        a_views, a_imports = statement_views(new_src, new_mod, is_pkg, set(new_table), False)
        if b_imports != a_imports:
            gone = sorted(b_imports - a_imports, key=repr)[:3]
            new = sorted(a_imports - b_imports, key=repr)[:3]
            mismatches.append(f"{new_rel}: module-level imports differ: -{gone} +{new}")
        if len(b_views) != len(a_views):
            mismatches.append(f"{new_rel}: {len(b_views)} top-level statements before, "
                              f"{len(a_views)} after")
            continue
        for (label, b_raw, b_norm), (_, a_raw, a_norm) in zip(b_views, a_views):
            if b_raw == a_raw:
                identical += 1
            elif post_fix(new_rel.as_posix(), rewrite_text(b_norm)) == a_norm:
                renamed_only += 1
                renamed_list.append(f"{new_rel}::{label}")
            else:
                mismatches.append(f"{new_rel}::{label}: source differs")
    print(f"rewrote {len(touched_py)} .py files and {len(touched_text)} text files; "
          f"moved {len(pending)} modules")
    print(f"definitions: {identical} byte-identical, {renamed_only} identical but for "
          f"mapped module names in comments/strings/docstrings/nested imports")
    for w in warnings:
        print("warning:", w)
    if os.environ.get("HOUSE24_VERBOSE"):
        for r in renamed_list:
            print("  renamed-only:", r)
    if mismatches:
        print("MISMATCHES:")
        for m in mismatches:
            print("  " + m)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
