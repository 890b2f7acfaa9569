"""Session-5 probe figures: injection and natural-language secrets, tuning vs held-out.

    python bench/probe_s5.py            # figures (held-out: counts only)
    python bench/probe_s5.py --misses   # also list the TUNING half's misses

Text layers only (detect_injection, screen_fact); the held-out halves were
committed before any change and only their totals are printed, so tuning never
looks at a held-out miss.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from walrus_mem.safety import detect_injection, screen_fact  # noqa: E402

DATA = ROOT / "tests" / "data"


def secret_kept(text: str, secret: str) -> bool:
    """The fact as memory_store would keep it still contains the value."""
    screened = screen_fact(text)
    return screened.text is not None and secret in screened.text


def benign_changed(text: str) -> bool:
    screened = screen_fact(text)
    return screened.text != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--tuning-only", action="store_true",
                        help="skip the held-out halves (while tuning)")
    args = parser.parse_args(argv)
    for split, name in (("tuning", "tuning"), ("heldout", "held-out")):
        if args.tuning_only and split == "heldout":
            continue
        inj = json.loads((DATA / f"injection_{split}_s5.json").read_text(encoding="utf-8"))
        sec = json.loads((DATA / f"secrets_{split}_s5.json").read_text(encoding="utf-8"))
        missed = [a for a in inj["attacks"] if not detect_injection(a["text"])]
        flagged = [b for b in inj["benign"] if detect_injection(b["text"])]
        kept = [s for s in sec["secrets"] if secret_kept(s["text"], s["secret"])]
        changed = [b for b in sec["benign"] if benign_changed(b)]
        n_a, n_b = len(inj["attacks"]), len(inj["benign"])
        print(f"{name}: injection detected {n_a - len(missed)}/{n_a} "
              f"({(n_a - len(missed)) / n_a:.1%}), benign flagged {len(flagged)}/{n_b} "
              f"({len(flagged) / n_b:.1%}); secrets stored {len(kept)}/{len(sec['secrets'])}, "
              f"benign redacted/dropped {len(changed)}/{len(sec['benign'])}")
        total = Counter(a["family"] for a in inj["attacks"])
        miss = Counter(a["family"] for a in missed)
        print("   detected by category: " + ", ".join(
            f"{fam} {total[fam] - miss[fam]}/{total[fam]}" for fam in sorted(total)))
        if args.misses and split == "tuning":
            for a in missed:
                print("   MISS", a["family"], a["text"][:160].replace("\n", " "))
            for b in flagged:
                print("   FP  ", b["family"], b["text"][:160], detect_injection(b["text"]).labels)
            for s in kept:
                print("   KEPT", s["text"])
            for b in changed:
                print("   CHG ", b, "->", screen_fact(b).text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
