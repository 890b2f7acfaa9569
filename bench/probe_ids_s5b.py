"""Session-5b probe: national ids, recovery codes, Wi-Fi keys (and look-alikes).

``python bench/probe_ids_s5b.py --write`` regenerates tests/data/secrets_{tuning,heldout}_s5b.json
from tests/helpers_ids.probe_cases (fixed seed; split by sha256(text)[0] % 2);
without ``--write`` it prints, per half, how many secrets screen_fact keeps verbatim
and how many look-alikes it changes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers_ids import probe_cases  # noqa: E402
from walrus_mem.safety import screen_fact  # noqa: E402

DATA = ROOT / "tests" / "data"
ABOUT = ("Session-5b probe (issue 13, blind evaluation: national ids 4/5, recovery codes, Wi-Fi "
         "stored). Valid ids generated with check digits by tests/helpers_ids.py (seed 5), never "
         "real people's; look-alikes = same shape with a wrong check part, order/phone/tracking "
         "numbers, dates. Split by sha256(text)[0] % 2. HELD-OUT: frozen before the detectors.")


def _half(text: str) -> str:
    return "heldout" if hashlib.sha256(text.encode()).digest()[0] % 2 else "tuning"


def write() -> None:
    cases = probe_cases()
    for half in ("tuning", "heldout"):
        doc = {"about": ABOUT + f" This is the {half.upper()} half.",
               "secrets": [s for s in cases["secrets"] if _half(s["text"]) == half],
               "benign": [b for b in cases["benign"] if _half(b["text"]) == half]}
        (DATA / f"secrets_{half}_s5b.json").write_text(
            json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def leaked(case: dict[str, str]) -> bool:
    kept = screen_fact(case["text"]).text
    values = [case["secret"], *case.get("all", "").split()]
    return kept is not None and any(v in kept for v in values)


def measure() -> None:
    for half in ("tuning", "heldout"):
        doc = json.loads((DATA / f"secrets_{half}_s5b.json").read_text(encoding="utf-8"))
        stored = [s for s in doc["secrets"] if leaked(s)]
        changed = [b for b in doc["benign"] if screen_fact(b["text"]).text != b["text"]]
        print(f"{half}: stored {len(stored)}/{len(doc['secrets'])}, "
              f"look-alikes changed {len(changed)}/{len(doc['benign'])}")
        if half == "tuning" or "--show-heldout" in sys.argv:
            for s in stored:
                print("  stored:", s["kind"], s["text"])
            for b in changed:
                print("  changed:", b["kind"], b["text"])


if __name__ == "__main__":
    write() if "--write" in sys.argv else measure()
