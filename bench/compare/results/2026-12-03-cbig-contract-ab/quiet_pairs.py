#!/usr/bin/env python3
# The quiet run's contract launches (2026-12-02-s10q-preset/raw/contract), paired by round:
# per cell >= 64 KiB the on/off ratio of each round's two launches (mean time, as check.txt),
# which launch went first (from the '# date:' lines), and the order effect in the near rounds.
import json, statistics as S, sys, os
raw = sys.argv[1] if len(sys.argv) > 1 else "bench/compare/results/2026-12-02-s10q-preset/raw/contract"
def head(m, i, key):
    return [l for l in open(os.path.join(raw, f"{m}.{i}.txt")) if l.startswith(key)]
first, c2c = {}, {}
for i in range(1, 6):
    t = {m: head(m, i, "# date:")[0].split()[2] for m in ("on", "off")}
    first[i] = min(t, key=t.get)
    c2c[i] = {m: [int(l.split()[6]) for l in head(m, i, "# c2c")] for m in ("on", "off")}
print("round: first launch, c2c ns on (before, after) / off")
for i in range(1, 6):
    print(f"  {i}: {first[i]} first, on {c2c[i]['on']} / off {c2c[i]['off']}")
far = {i for i in range(1, 6) if max(c2c[i]["on"] + c2c[i]["off"]) >= 200}
d = {}
for m in ("on", "off"):
    for i in range(1, 6):
        for r in json.load(open(os.path.join(raw, f"{m}.{i}.json")))["results"]:
            if not r["in_place"] and r["size"] >= 65536:
                d.setdefault((r["op"], r["size"]), {})[(m, i)] = r["avg_us"]
print("\nop size: on/off per round 1..5 (mean time); median of launch medians as check.txt")
for k in sorted(d):
    v = d[k]
    rat = [v[("on", i)] / v[("off", i)] for i in range(1, 6)]
    med = S.median(v[("on", i)] for i in range(1, 6)) / S.median(v[("off", i)] for i in range(1, 6))
    print(f"  {k[0]:15s} {k[1]:>9d}: " + " ".join(f"{x:.2f}" for x in rat) + f"   check.txt {med:.3f}")
print(f"\nnear rounds (c2c < 200 ns): {sorted(set(range(1, 6)) - far)}; far: {sorted(far)}")
for lo, hi in ((65536, 1048576), (4194304, 1 << 40)):
    sec, tot, onf, offf = 0, 0, [], []
    for k in d:
        if not lo <= k[1] <= hi:
            continue
        for i in sorted(set(range(1, 6)) - far):
            rat = d[k][("on", i)] / d[k][("off", i)]
            sec += (rat < 1) if first[i] == "on" else (rat > 1)
            tot += 1
            (onf if first[i] == "on" else offf).append(rat)
    print(f"{lo}-{'' if hi > 1 << 30 else hi} B, near rounds: the second launch of the pair slower in {sec} of {tot}; "
          f"on/off median {S.median(onf):.3f} [{min(onf):.2f}-{max(onf):.2f}] when on went first, "
          f"{S.median(offf):.3f} [{min(offf):.2f}-{max(offf):.2f}] when off went first; all near pairs {S.median(onf + offf):.3f}")
