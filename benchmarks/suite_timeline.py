"""How the test command's two workers spent a stage: busy time, idle tail, the longest units.

Run (quoted in docs/benchmarks.md, section "The test command's own cost")::

    BAYESCAL_TEST_TIMELINE=/tmp/stage5.jsonl make test-pymc5
    python benchmarks/suite_timeline.py /tmp/stage5.jsonl

``BAYESCAL_TEST_TIMELINE`` makes tests/conftest.py append one JSON line per
test phase (worker, node id, phase, wall-clock start and stop), written by
pytest-xdist's controller. This script prints, for each worker, its busy
seconds and when it ran its last test, the span of the stage (first start to
last stop), how long the first worker to finish waited for the other, and the
units that took longest (a group of ``loadgroup`` counts as one unit: the
``@group`` suffix of the node id).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("timeline", type=Path)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in args.timeline.read_text().splitlines() if line]
    if not rows:
        raise SystemExit(f"{args.timeline}: no timings")
    t0 = min(r["start"] for r in rows)
    busy: dict[str, float] = defaultdict(float)
    last: dict[str, float] = defaultdict(float)
    first: dict[str, float] = {}
    units: dict[tuple[str, str], float] = defaultdict(float)
    for r in rows:
        w, d = r["worker"], r["stop"] - r["start"]
        busy[w] += d
        last[w] = max(last[w], r["stop"] - t0)
        first[w] = min(first.get(w, float("inf")), r["start"] - t0)
        nodeid = r["nodeid"]
        unit = "@" + nodeid.rsplit("@", 1)[1] if "@" in nodeid else nodeid
        units[(w, unit)] += d
    span = max(last.values())
    print(f"span {span:.1f} s (first test start to last test stop)")
    for w in sorted(busy):
        print(f"  {w}: busy {busy[w]:.1f} s, first start {first[w]:.1f} s, "
              f"last stop {last[w]:.1f} s")
    ends = sorted(last.values())
    if len(ends) > 1:
        print(f"idle tail: {ends[-1] - ends[0]:.1f} s (one worker done, the other still busy)")
    print(f"total busy {sum(busy.values()):.1f} s; two workers fully busy would take "
          f"{sum(busy.values()) / max(len(busy), 1):.1f} s")
    print("longest units (worker, unit, seconds):")
    for (w, unit), d in sorted(units.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {w}  {d:7.1f}  {unit}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
