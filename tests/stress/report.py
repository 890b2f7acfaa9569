"""Render the stress figures (``.bench-results/reliability/*.json``) as Markdown.

    python -m tests.stress.report            # print the tables
    python -m tests.stress.report --write    # replace them in docs/reliability.md

The tables go between ``<!-- figures:start -->`` and ``<!-- figures:end -->``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tests.stress.helpers import REPO, RESULTS_DIR

DOC = REPO / "docs" / "reliability.md"
START, END = "<!-- figures:start -->", "<!-- figures:end -->"
ORDER = ["faults", "crashes", "concurrency", "bad_input", "isolation", "secrets", "fuzz"]


def load() -> dict[str, dict[str, Any]]:
    out = {}
    for name in ORDER:
        path = RESULTS_DIR / f"{name}.json"
        if path.exists():
            out[name] = json.loads(path.read_text())
    return out


def _kinds(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _secs(data: dict[str, Any]) -> str:
    return f"{data['wall_seconds']:.0f} s" if "wall_seconds" in data else "?"


def summary(figs: dict[str, dict[str, Any]]) -> list[str]:
    rows = ["| Suite | What it did | Figures | Wall time |", "|---|---|---|---|"]
    if f := figs.get("faults"):
        rows.append(
            f"| Faults | {f['facts']:,} facts ({f['via_remember']} `remember`, "
            f"{f['via_remember_many']} `remember_many`, {f['resubmitted_duplicates']} resubmitted) "
            f"over loopback HTTP, fault rate {f['fault_rate']}, all 11 kinds, lying first "
            f"aggregator | **{f['faults_injected_total']:,} faults injected**, "
            f"{f['client_retries']} client retries, {f['client_failovers']:,} failovers, "
            f"{f['client_verification_failures']:,} verification failures; "
            f"**lost {f['lost']}, duplicate blobs {f['duplicate_blobs']}**, not recalled "
            f"{f['not_recalled']}, verified {f['verified']:,}/{f['facts']:,}, restored "
            f"{f['restored']:,}/{f['facts']:,} | {_secs(f)} |")
    if f := figs.get("crashes"):
        rows.append(
            f"| Crashes | SIGKILL of an ingesting process at {f['crash_points_survived']} points "
            f"(embed, seal, catalog COMMIT, publish, index save, random time), then reopen, "
            f"sync, re-ingest | **{f['crash_points_survived']}/20 crash points survived**; "
            f"{f['acknowledged_checked']} acknowledged memories checked, 0 lost, 0 duplicates; "
            f"torn index rebuilt in {sum(1 for k in f if k.startswith('torn_index_'))}/6 "
            f"damage cases | {_secs(f)} |")
    if f := figs.get("concurrency"):
        rows.append(
            f"| Concurrency | {f['processes']} processes x {f['remember_calls_per_process']} "
            f"`remember` + a reader process, one data dir, each with its own embedded relayer | "
            f"**{f['memories_present']:,} present, {f['duplicates']} duplicates, "
            f"{f['exceptions']} exceptions**; {f['concurrent_reader_recalls']:,} concurrent "
            f"recalls; fresh process recalls all (missing {f['fresh_process_missing']}); "
            f"restore from the latest manifest: {f['restored_from_latest_manifest']:,}; "
            f"overlapping manifest publications (threads, processes) leave a complete latest "
            f"manifest | {_secs(f)} |")
    if f := figs.get("bad_input"):
        rows.append(
            f"| Bad input | parametrised table, each case on a copy of a prepared data dir | "
            f"**{f['cases_passed']}/{f['cases_defined']} bad inputs** gave their typed error "
            f"with the expected message; data dir unchanged in every case | {_secs(f)} |")
    if f := figs.get("isolation"):
        rows.append(
            f"| Isolation | {f['derived_key_agents']} derived-key + "
            f"{f['independent_key_agents']} independent-key agents on one relayer | "
            f"**{f['ordered_pairs_tested']} ordered pairs tested**, "
            f"{f['cross_open_attempts']:,} cross-opens refused; "
            f"{f['relayer_bytes_scanned']:,} relayer bytes scanned: plaintext "
            f"{f['plaintext_found']}, names {f['names_found']}, embeddings "
            f"{f['embeddings_found']} | {_secs(f)} |")
    if f := figs.get("secrets"):
        fed = (f["agent_end_turns"] + f["memory_store_calls"]
               + f["memory_store_metadata_calls"] + f["memory_update_calls"])
        rows.append(
            f"| Secrets | {f['corpus_entries']} credentials of {f['credential_kinds']} kinds "
            f"through `agent_end` (redact and drop), `memory_store` (facts and metadata), "
            f"`memory_update` | **{fed} credential-bearing inputs, "
            f"{f['secrets_found_stored']} credentials stored** (blobs opened, every catalog "
            f"table incl. "
            f"FTS, raw files, {f['log_records_scanned']} DEBUG log records); key material in "
            f"logs: {f['key_material_found_in_logs']} | {_secs(f)} |")
    if f := figs.get("fuzz"):
        rows.append(
            f"| Fuzzing | hypothesis, {len(f['examples_by_target'])} targets | "
            f"**{f['examples_total']:,} examples**, only typed errors, none over the 5 s "
            f"deadline | {_secs(f)} |")
    total = sum(f.get("wall_seconds", 0) for f in figs.values())
    dates = sorted({f.get("date", "?") for f in figs.values()})
    rows += ["", f"Latest run: {dates[0]}"
             + (f" to {dates[-1]}" if len(dates) > 1 else "")
             + f"; total wall time of the suites {total / 60:.1f} min."]
    return rows


def details(figs: dict[str, dict[str, Any]]) -> list[str]:
    out: list[str] = []
    if f := figs.get("faults"):
        out += ["", "**Faults injected, by kind** (counted in each server as it decided them; "
                "`/_mock/stats` agreed):", "",
                "| Kind | Publisher + second aggregator | Lying first aggregator |",
                "|---|---|---|"]
        kinds = sorted(set(f["faults_by_kind_honest"]) | set(f["faults_by_kind_liar"]))
        for k in kinds:
            out.append(f"| `{k}` | {f['faults_by_kind_honest'].get(k, 0)} | "
                       f"{f['faults_by_kind_liar'].get(k, 0)} |")
        out += ["", f"Client: {f['client_requests']:,} requests, retries by reason "
                f"({_kinds(f['client_retry_reasons'])}), {f['client_failovers']:,} failovers, "
                f"{f['client_verification_failures']:,} verification failures. Server routes: "
                f"{_kinds(f['server_requests'])}. Relayer afterwards: {f['blobs_on_relayer']} "
                f"blobs ({f['quilts_on_relayer']} quilts, {f['manifest_blobs']} manifest "
                f"blobs); {f['repeat_stores_same_blob']} stores repeated identical bytes after "
                f"a dropped response (same blob id: not a duplicate). Queued before `sync()`: "
                f"{f['queued_before_sync']}. Restore through the same faults: "
                f"{f['restore_requests']:,} requests, {f['restore_retries']} retries, "
                f"{f['restore_failovers']:,} failovers. Seed {f['seed']}."]
    if f := figs.get("crashes"):
        out += ["", "**Crash points by phase** (survived / index rebuilt on reopen):", "",
                "| Phase | Survived | Index rebuilt |", "|---|---|---|"]
        for phase, n in sorted(f["survived_by_phase"].items()):
            out.append(f"| `{phase}` | {n} | {f['index_rebuilt_by_phase'].get(phase, 0)} |")
        torn = sorted(k.removeprefix("torn_index_") for k in f if k.startswith("torn_index_"))
        out += ["", f"Torn index files rebuilt from the catalog with a warning: "
                f"{', '.join(torn)}."]
    if f := figs.get("bad_input"):
        out += ["", "**Bad inputs** (error raised, or reported where the API reports "
                "instead of raising):", "", "| Case | Outcome |", "|---|---|"]
        for case, outcome in f["results"].items():
            out.append(f"| {case.replace('|', '/')} | {outcome.replace('|', '/')} |")
    if f := figs.get("secrets"):
        out += ["", f"**Secrets:** auto-capture stored {f['agent_end_facts_stored']} facts "
                f"from {f['agent_end_turns']} turns, redacting {f['agent_end_facts_redacted']} "
                f"and dropping {f['agent_end_facts_dropped']} credential-bearing facts; "
                f"`memory_store` redacted {f['memory_store_facts_redacted']} facts and refused "
                f"{f['memory_store_facts_refused']}, and redacted metadata in "
                f"{f['memory_store_metadata_redacted']} of {f['memory_store_metadata_calls']} "
                f"calls; `memory_update` refused {f['memory_update_refused']} of "
                f"{f['memory_update_calls']} and redacted the rest. "
                f"{f['bare_self_identifying_fed']} credentials were also fed bare (no context "
                f"words) because their shape identifies them. Places scanned: "
                f"{f['places_scanned']}. Key secrets checked in DEBUG logs: "
                f"{f['key_secrets_checked_in_logs']}."]
    if f := figs.get("fuzz"):
        out += ["", "**Fuzz examples by target:**", "", "| Target | Examples |", "|---|---|"]
        for target, n in f["examples_by_target"].items():
            out.append(f"| {target} | {n:,} |")
    return out


def render() -> str:
    figs = load()
    if not figs:
        raise SystemExit(f"no figures in {RESULTS_DIR}: run the stress suites first")
    return "\n".join([*summary(figs), *details(figs)]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"update {DOC.relative_to(REPO)}")
    args = parser.parse_args(argv)
    text = render()
    if not args.write:
        sys.stdout.write(text)
        return 0
    doc = DOC.read_text()
    before, _, rest = doc.partition(START)
    _, _, after = rest.partition(END)
    DOC.write_text(f"{before}{START}\n{text}{END}{after}")
    print(f"updated {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
