#!/usr/bin/python3
"""summarize.py RESULTS_DIR - tables, ratios, targets and plots for bench/compare/run.sh.

Reads RESULTS_DIR/raw/<config>/<lib>.<launch>.json (cohort-perf --json-out) and
.txt (the peer harness: mpi_coll_bench / gloo_bench; <lib>.<launch>.ext.txt:
bench/compare/mpi_coll_ext), takes per library, op and
size the median over launches, and writes:
  compare.md   tables (cohort avg, p50/p99/max, busbw; each peer; cohort/peer time
               ratio), the contract-check cost, memory, and the targets met/missed
  compare.csv  one row per config, op, size, library (medians, min, max)
  ratios.csv   one row per config, op, size, peer: cohort time / peer time
  memory.csv   one row per library, rank count, rank (medians over launches)
  plots/       <config>_<op>_{busbw,lat}.png through plots.gp (gnuplot)

Time compared: "avg" = max over ranks of the per-rank mean time per op, which is
what mpi_coll_bench and gloo_bench report as lat_us. Ratio < 1: cohort is faster.
Standard library only.
"""
import csv
import glob
import json
import os
import re
import statistics as st
import sys

OUT = sys.argv[1] if __name__ == "__main__" and len(sys.argv) > 1 else "."
RAW = os.path.join(OUT, "raw")


def set_out(path):
    """Point the loaders at another results directory (bench/compare/check)."""
    global OUT, RAW
    OUT, RAW = path, os.path.join(path, "raw")
NORM = {"allreduce": "all_reduce", "bcast": "broadcast", "allgather": "all_gather",
        "alltoall": "all_to_all"}
# The first five are in every run; the rest when run.sh's OPS names them (the MPIs'
# rows then come from bench/compare/mpi_coll_ext.c, in <lib>.<launch>.ext.txt).
OPS = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier",
       "reduce", "gather", "scatter", "all_to_all", "sendrecv"]
LIBNAME = {"cohort": "cohort", "ompi": "Open MPI", "mpich": "MPICH", "gloo": "Gloo",
           "ompi_tcp2": "Open MPI TCP-lo (from tcp2)", "on": "cohort contract on",
           "off": "cohort contract off"}
CONFIGS = [
    ("shm2", "2 ranks, shared memory (1 rank per core)", ["ompi", "mpich", "gloo"]),
    ("shm2osu", "2 ranks, shared memory, OSU style (barrier between iterations)",
     ["ompi", "mpich"]),
    ("shm2heap", "2 ranks, shared memory, the program's buffers from libcohort-heap.so "
                 "(cohortrun --heap; cohort only: the target is one memcpy)", []),
    ("shm2heaposu", "2 ranks, shared memory, libcohort-heap.so, OSU style", []),
    ("over4", "4 ranks on 2 cores (oversubscribed), shared memory", ["ompi", "mpich"]),
    ("over4osu", "4 ranks on 2 cores, shared memory, OSU style", ["ompi", "mpich"]),
    ("over8", "8 ranks on 2 cores (oversubscribed), shared memory", ["ompi", "mpich"]),
    ("over8osu", "8 ranks on 2 cores, shared memory, OSU style", ["ompi", "mpich"]),
    ("over16", "16 ranks on 2 cores (oversubscribed), shared memory", ["ompi"]),
    ("over16osu", "16 ranks on 2 cores, shared memory, OSU style", ["ompi"]),
    ("tcp2", "2 ranks, TCP over loopback (cohort --transport tcp; Open MPI btl tcp,self on lo; "
             "Gloo)", ["ompi", "gloo"]),
    ("tcp2osu", "2 ranks, TCP over loopback, OSU style", ["ompi"]),
    ("tcp4", "4 ranks (oversubscribed), TCP over loopback", ["ompi", "gloo"]),
    ("tcp4osu", "4 ranks (oversubscribed), TCP over loopback, OSU style", ["ompi"]),
    ("netns2", "2 ranks in 2 network namespaces joined by a veth pair (TCP between \"hosts\": "
               "cohort --transport tcp, Open MPI btl tcp,self on the veth, Gloo)",
     ["ompi", "ompi_tcp2", "gloo"]),
    ("netns2osu", "2 ranks in 2 network namespaces, OSU style", ["ompi"]),
    ("netns4", "4 ranks (oversubscribed), 2 in each of 2 network namespaces, TCP everywhere",
     ["ompi", "gloo"]),
    ("netns4osu", "4 ranks in 2 network namespaces, OSU style", ["ompi"]),
]


def fmt_size(b):
    if b >= 1 << 20 and b % (1 << 20) == 0:
        return f"{b >> 20} MiB"
    if b >= 1 << 10 and b % (1 << 10) == 0:
        return f"{b >> 10} KiB"
    return f"{b} B"


def fmt_us(x):
    if x is None:
        return "-"
    if x < 10:
        return f"{x:.2f}"
    if x < 1000:
        return f"{x:.1f}"
    return f"{x:,.0f}"


def fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}"


def med(xs):
    xs = [x for x in xs if x is not None]
    return st.median(xs) if xs else None


# ---- loading ---------------------------------------------------------------

def load_cohort_json(path):
    """-> {(op, size): [record]}"""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None
    out = {}
    for r in d.get("results", []):
        if r.get("in_place"):
            continue  # the peers run out of place
        # p50/p99/max of the per-iteration slowest rank (step_*; older files: p50_us ...)
        out.setdefault((r["op"], int(r["size"])), []).append(
            {"lat": r["avg_us"], "busbw": r["busbw_GBs"],
             "p50": r.get("step_p50_us", r["p50_us"]), "p99": r.get("step_p99_us", r["p99_us"]),
             "max": r.get("step_max_us", r["max_us"]), "check": r["check"]})
    return out


def load_peer_txt(path):
    out = {}
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return None
    for line in lines:
        f = line.split()
        if len(f) >= 9 and re.match(r"^[a-z_]+$", f[0]) and f[1].isdigit() and \
                re.match(r"^[0-9.]+$", f[3]):
            op = NORM.get(f[0], f[0])
            out.setdefault((op, int(f[1])), []).append(
                {"lat": float(f[3]), "busbw": float(f[6]), "p50": None, "p99": None, "max": None,
                 "check": f[8]})
    return out


def load_all():
    """data[cfg][lib] = {(op, size): [records over launches]}"""
    data = {}
    for cfgdir in sorted(glob.glob(os.path.join(RAW, "*"))):
        cfg = os.path.basename(cfgdir)
        if cfg in ("memory", "memcpy"):
            continue
        libs = {}
        for path in sorted(glob.glob(os.path.join(cfgdir, "*"))):
            name = os.path.basename(path)
            m = re.match(r"^([a-z_]+)\.([0-9a-z.]+)\.(json|txt)$", name)
            if not m:
                continue
            lib, ext = m.group(1), m.group(3)
            if ext == "txt" and os.path.exists(path[:-4] + ".json"):
                continue  # cohort: the JSON is the data, the text its log
            if ext == "txt" and lib in ("cohort", "on", "off"):
                continue  # a cohort launch that wrote no JSON (failed): nothing to add
            d = load_cohort_json(path) if ext == "json" else load_peer_txt(path)
            if d is None:
                continue
            tgt = libs.setdefault(lib, {})
            for k, recs in d.items():
                tgt.setdefault(k, []).extend(recs)
        data[cfg] = libs
    # Results from before Open MPI ran across the namespaces: its loopback figures stand in.
    if "tcp2" in data and "ompi" in data["tcp2"] and "netns2" in data and \
            "ompi" not in data["netns2"]:
        data["netns2"]["ompi_tcp2"] = data["tcp2"]["ompi"]
    return data


# ---- host state --------------------------------------------------------------
# run.sh puts the core-to-core round trip (c2c.c, the median in ns) before and
# after every launch ("# c2c before: c2c 0 1 P50 ..."). On a shared VM it moves
# between states that scale every hand-off between ranks (hoststate.py: fast
# < 90, mid 90-300, slow >= 300 ns) and can change from one launch to the next,
# so two libraries' medians over launches may come from different states.
C2C = re.compile(r"^# c2c (before|after): c2c \S+ \S+ ([0-9]+) ")


def launch_state(path):
    """fast/mid/slow when the probes before and after the launch agree, "mixed"
    when they do not, None without both probes."""
    import hoststate
    got = {}
    try:
        with open(path) as f:
            for line in f:
                m = C2C.match(line)
                if m:
                    got[m.group(1)] = float(m.group(2))
    except OSError:
        return None
    if len(got) < 2:
        return None
    b, a = hoststate.cls(got["before"]), hoststate.cls(got["after"])
    return b if b == a else "mixed"


def load_states():
    """states[cfg][lib] = [(state, {(op, size): lat})], a launch each (its
    .ext.txt rows with it, the state from the launch's own probes)."""
    out = {}
    for cfgdir in sorted(glob.glob(os.path.join(RAW, "*"))):
        cfg = os.path.basename(cfgdir)
        launches = {}
        for path in sorted(glob.glob(os.path.join(cfgdir, "*"))):
            m = re.match(r"^([a-z_]+)\.([0-9]+)(\.ext)?\.(json|txt)$", os.path.basename(path))
            if not m:
                continue
            lib, n, ext, kind = m.groups()
            if kind == "txt" and not ext and os.path.exists(path[:-4] + ".json"):
                continue
            d = load_cohort_json(path) if kind == "json" else load_peer_txt(path)
            if not d:
                continue
            probe = path[:-5] + ".txt" if kind == "json" else path
            rec = launches.setdefault((lib, n), [launch_state(probe), {}])
            if rec[0] is None:
                rec[0] = launch_state(probe)
            for k, recs in d.items():
                rec[1][k] = recs[0]["lat"]
        for (lib, _), (state, lats) in sorted(launches.items()):
            out.setdefault(cfg, {}).setdefault(lib, []).append((state, lats))
    return out


def summary(recs):
    """median, min, max of lat; medians of the rest."""
    if not recs:
        return None
    lats = [r["lat"] for r in recs]
    return {"n": len(recs), "lat": med(lats), "lat_min": min(lats), "lat_max": max(lats),
            "busbw": med([r["busbw"] for r in recs]), "p50": med([r["p50"] for r in recs]),
            "p99": med([r["p99"] for r in recs]), "max": med([r["max"] for r in recs]),
            "fails": sum(1 for r in recs if r["check"] == "FAIL")}


def load_memcpy():
    """[(size, p50_us, p99_us)] per launch of memcpy_floor (raw/memcpy/)."""
    out = []
    for path in sorted(glob.glob(os.path.join(RAW, "memcpy", "memcpy.*.txt"))):
        for line in open(path):
            f = line.split()
            if len(f) >= 7 and f[0] == "memcpy" and f[1].isdigit():
                out.append((int(f[1]), float(f[2]), float(f[3])))
    return out


# What decides each library's speed, as each launch recorded it.
_CFG_PATTERNS = [
    ("pml", re.compile(r"select: component (\w+) selected")),
    ("btl", re.compile(r"mca: bml: Using (\w+) btl for send to")),
    ("vader fallback", re.compile(r"(single.copy|CMA|cma).*(not|fail|disabl)", re.I)),
    ("ucx", re.compile(r"ep_cfg\[\d+\]: (tag\([^)]*\))")),
    ("cohort", re.compile(r"^# cohort: ([a-z_]+ (?:from \d+ B|after \d+ B's calls): .*)$")),
    ("bound", re.compile(r"(MCW rank \d+ (?:is not bound|bound to)[^:]*)")),
    ("cohort bind", re.compile(r"^# cmd: .*cohort-perf.*(--bind \w+)")),
    ("cohort binding", re.compile(r"^# cohort: binding (.*)$")),
    ("load", re.compile(r"^# (?:date|after): \S+\s+load: ([0-9. ]+)")),
    ("c2c", re.compile(r"^# c2c (?:before|after): c2c \S+ \S+ (\S+)")),
]


def launch_config(path):
    """{key: sorted set of values} from one raw launch file."""
    got = {}
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return got
    for line in lines:
        for key, rx in _CFG_PATTERNS:
            m = rx.search(line)
            if m:
                got.setdefault(key, [])
                v = m.group(1).strip()
                if key in ("load", "c2c") or v not in got[key]:
                    got[key].append(v)
    for k in got:
        if k not in ("load", "c2c"):
            got[k].sort()
    return got


def config_section(md):
    """Per configuration and library: the transports each launch used."""
    rows = []
    for cfgdir in sorted(glob.glob(os.path.join(RAW, "*"))):
        cfg = os.path.basename(cfgdir)
        per_lib = {}
        for path in sorted(glob.glob(os.path.join(cfgdir, "*.txt"))):
            lib = os.path.basename(path).split(".")[0]
            c = launch_config(path)
            if "cohort" in c:  # one entry per distinct description, its ops listed once
                by = {}
                for v in c["cohort"]:
                    head, _, desc = v.partition(": ")
                    by.setdefault(desc, []).append(head)
                c["cohort"] = [f"{', '.join(h)}: {d}" for d, h in by.items()]
            key = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(c.items())
                            if k not in ("load", "c2c"))
            loads = c.get("load", [])
            c2c = c.get("c2c", [])
            per_lib.setdefault(lib, {}).setdefault(key, []).append(
                (f"{loads[0].split()[0]}->{loads[-1].split()[0]}" if loads else "?") +
                (f" ({c2c[0]}->{c2c[-1]} ns)" if c2c else ""))
        for lib, keys in sorted(per_lib.items()):
            for key, loads in keys.items():
                rows.append(f"| {cfg} | {LIBNAME.get(lib, lib)} | {len(loads)} | {key or '-'} | "
                            f"{', '.join(loads)} |")
    if rows:
        md.append("\n### what each launch used (from its own output)\n")
        md.append("| config | library | launches | selected transports, copy path | 1-min load "
                  "before->after (cpu0<->cpu1 line round trip, ns, before->after), per launch |")
        md.append("|---|---|---:|---|---|")
        md.extend(rows)


# ---- tables ----------------------------------------------------------------

def sizes_of(libs, op):
    s = set()
    for d in libs.values():
        s |= {b for (o, b) in d if o == op}
    return sorted(s)


def get(libs, lib, op, b):
    d = libs.get(lib)
    if not d or (op, b) not in d:
        return None
    return summary(d[(op, b)])


def launches(libs, lib):
    d = libs.get(lib)
    if not d:
        return 0
    return max((len(v) for v in d.values()), default=0)


def config_tables(data, md, rows_csv, ratios_csv):
    for cfg, title, peers in CONFIGS:
        libs = data.get(cfg)
        if not libs or "cohort" not in libs:
            continue
        peers = [p for p in peers if p in libs]
        md.append(f"\n### {cfg}: {title}\n")
        md.append("Launches: " + ", ".join(f"{LIBNAME[l]} {launches(libs, l)}"
                                            for l in ["cohort"] + peers) +
                  ". Cells: median over launches. Time = avg (max over ranks of the per-rank mean), "
                  "us; bw = busbw GB/s; ratio = cohort time / peer time (< 1: cohort faster). "
                  "cohort p50/p99/max: of the per-iteration max over ranks.\n")
        for op in OPS:
            ss = sizes_of(libs, op)
            if not ss:
                continue
            md.append(f"\n#### {op}\n")
            head = "| size | cohort us | p50 / p99 / max | bw |"
            sep = "|---:|---:|---:|---:|"
            for p in peers:
                head += f" {LIBNAME[p]} us | bw | ratio |"
                sep += "---:|---:|---:|"
            md.append(head)
            md.append(sep)
            for b in ss:
                c = get(libs, "cohort", op, b)
                cell = "| " + (fmt_size(b) if op != "barrier" else "-") + " |"
                if c:
                    flag = " FAIL" if c["fails"] else ""
                    cell += f" {fmt_us(c['lat'])}{flag} | {fmt_us(c['p50'])} / {fmt_us(c['p99'])} / " \
                            f"{fmt_us(c['max'])} | {c['busbw']:.2f} |"
                else:
                    cell += " - | - | - |"
                for p in peers:
                    s = get(libs, p, op, b)
                    if s:
                        r = c["lat"] / s["lat"] if c and s["lat"] > 0 else None
                        cell += f" {fmt_us(s['lat'])} | {s['busbw']:.2f} | {fmt_ratio(r)} |"
                        if r is not None:
                            ratios_csv.append([cfg, op, b, p, f"{c['lat']:.4f}", f"{s['lat']:.4f}",
                                               f"{r:.4f}"])
                    else:
                        cell += " - | - | - |"
                md.append(cell)
            for lib in ["cohort"] + peers:
                for b in ss:
                    s = get(libs, lib, op, b)
                    if s:
                        rows_csv.append([cfg, op, b, lib, s["n"], s["lat"], s["lat_min"], s["lat_max"],
                                         s["busbw"], s["p50"], s["p99"], s["max"], s["fails"]])


def contract_table(data, md, rows_csv):
    libs = data.get("contract")
    if not libs or "on" not in libs or "off" not in libs:
        return None
    md.append("\n### contract: the cost of the contract check (2 ranks, shm, on vs off, "
              "interleaved)\n")
    md.append(f"Launches: on {launches(libs, 'on')}, off {launches(libs, 'off')}. "
              "on/off = ratio of median avg times; added = on - off per call.\n")
    res = {}
    for op in OPS:
        ss = sizes_of(libs, op)
        if not ss:
            continue
        md.append(f"\n#### {op}\n")
        md.append("| size | off us | on us | on/off | added ns | off p50 | on p50 |")
        md.append("|---:|---:|---:|---:|---:|---:|---:|")
        for b in ss:
            on, off = get(libs, "on", op, b), get(libs, "off", op, b)
            if not on or not off:
                continue
            r = on["lat"] / off["lat"] if off["lat"] > 0 else None
            add = (on["lat"] - off["lat"]) * 1000
            res[(op, b)] = (r, add)
            md.append(f"| {fmt_size(b) if op != 'barrier' else '-'} | {fmt_us(off['lat'])} | "
                      f"{fmt_us(on['lat'])} | {fmt_ratio(r)} | {add:.0f} | {fmt_us(off['p50'])} | "
                      f"{fmt_us(on['p50'])} |")
            for lib, s in (("on", on), ("off", off)):
                rows_csv.append(["contract", op, b, lib, s["n"], s["lat"], s["lat_min"], s["lat_max"],
                                 s["busbw"], s["p50"], s["p99"], s["max"], s["fails"]])
    return res


def memory_table(md):
    d = os.path.join(RAW, "memory")
    if not os.path.isdir(d):
        return []
    rows = {}  # (lib, n) -> {rank: [records]}
    for path in sorted(glob.glob(os.path.join(d, "*"))):
        m = re.match(r"^(cohort|ompi)\.n(\d+)\.(\d+)\.(json|txt)$", os.path.basename(path))
        if not m:
            continue
        lib, n, ext = m.group(1), int(m.group(2)), m.group(4)
        recs = []
        if lib == "cohort" and ext == "json":
            try:
                recs = json.load(open(path)).get("memory_kib", [])
            except (OSError, ValueError):
                continue
        elif lib == "ompi" and ext == "txt":
            for line in open(path):
                if line.startswith("{"):
                    try:
                        recs.append(json.loads(line))
                    except ValueError:
                        pass
        for r in recs:
            rows.setdefault((lib, n), {}).setdefault(r["rank"], []).append(r)
    if not rows:
        return []
    keys = ["rss_start", "rss_init", "rss_end", "hwm", "rss_shmem", "shared_size", "shared_rss",
            "shared_pss"]
    md.append("\n### memory per rank (KiB, mean over ranks of the median over launches)\n")
    md.append("rss_init - rss_start: the library after init and one tiny all_reduce. rss_end/hwm: "
              "after an all_reduce sweep up to the largest size, with the same two buffers in both "
              "programs. shared: writable MAP_SHARED mappings (the shm segments): mapped size, "
              "resident, proportional.\n")
    md.append("| ranks | library | rss_start | rss_init | init - start | rss_end | hwm | "
              "shared size | shared rss | shared pss |")
    md.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    out = []
    for (lib, n) in sorted(rows, key=lambda k: (k[1], k[0])):
        per_rank = {rk: {k: med([r[k] for r in rs]) for k in keys} for rk, rs in rows[(lib, n)].items()}
        for rk, v in sorted(per_rank.items()):
            out.append([lib, n, rk] + [v[k] for k in keys])
        mean = {k: st.mean(v[k] for v in per_rank.values()) for k in keys}
        md.append(f"| {n} | {LIBNAME[lib]} | {mean['rss_start']:,.0f} | {mean['rss_init']:,.0f} | "
                  f"{mean['rss_init'] - mean['rss_start']:,.0f} | {mean['rss_end']:,.0f} | "
                  f"{mean['hwm']:,.0f} | {mean['shared_size']:,.0f} | {mean['shared_rss']:,.0f} | "
                  f"{mean['shared_pss']:,.0f} |")
    return out


# ---- targets ---------------------------------------------------------------

def ratio(data, cfg, op, b, peer):
    libs = data.get(cfg, {})
    c, p = get(libs, "cohort", op, b), get(libs, peer, op, b)
    if not c or not p or p["lat"] <= 0:
        return None
    return c["lat"] / p["lat"]


def best_peer_ratio(data, cfg, op, b, peers):
    rs = [(ratio(data, cfg, op, b, p), p) for p in peers]
    rs = [(r, p) for r, p in rs if r is not None]
    # The best peer is the fastest one: the largest cohort/peer ratio.
    return max(rs) if rs else (None, None)


def verdict(checks, limit, what):
    """checks: [(label, value)], value <= limit is met."""
    have = [(l, v) for l, v in checks if v is not None]
    if not have:
        return "no data", "-", ""
    misses = [(l, v) for l, v in have if v > limit]
    worst = max(have, key=lambda x: x[1])
    res = "met" if not misses else f"missed at {len(misses)} of {len(have)}"
    detail = "; ".join(f"{l}: {v:.2f}" for l, v in misses[:12])
    if len(misses) > 12:
        detail += f"; ... ({len(misses) - 12} more)"
    return res, f"{worst[0]}: {worst[1]:.2f} {what}", detail


def targets(data, contract):
    T = []
    small = [8, 16, 64, 256, 1024, 4096]
    big = [16 << 20, 64 << 20]
    libs = data.get("shm2", {})
    if libs:
        ar = [b for b in sizes_of(libs, "all_reduce")]
        T.append(("shm 2 ranks all_reduce 8 B-4 KiB latency <= 1.2x Open MPI", "shm2",
                  verdict([(fmt_size(b), ratio(data, "shm2", "all_reduce", b, "ompi"))
                           for b in ar if b in small], 1.2, "x Open MPI time")))
        T.append(("shm 2 ranks all_reduce 16-64 MiB busbw >= 2x Open MPI (time ratio <= 0.5)", "shm2",
                  verdict([(fmt_size(b), ratio(data, "shm2", "all_reduce", b, "ompi"))
                           for b in ar if b in big], 0.5, "x Open MPI time")))
        mid = [b for b in ar if 4096 < b < (16 << 20)]
        T.append(("shm 2 ranks all_reduce in between: never slower than the best peer", "shm2",
                  verdict([(f"{fmt_size(b)} vs {LIBNAME.get(p, p)}", r) for b in mid
                           for r, p in [best_peer_ratio(data, "shm2", "all_reduce", b,
                                                        ["ompi", "mpich", "gloo"])]], 1.0,
                          "x best peer time")))
        for op in ("broadcast", "all_gather", "reduce_scatter"):
            ss = [b for b in sizes_of(libs, op) if b >= 65536]
            T.append((f"shm 2 ranks {op} >= 64 KiB: never slower than the best peer", "shm2",
                      verdict([(f"{fmt_size(b)} vs {LIBNAME.get(p, p)}", r) for b in ss
                               for r, p in [best_peer_ratio(data, "shm2", op, b,
                                                            ["ompi", "mpich", "gloo"])]], 1.0,
                              "x best peer time")))
    for cfg in ("over4", "over8"):
        libs = data.get(cfg, {})
        if not libs:
            continue
        checks, tails = [], []
        for op in OPS:
            for b in sizes_of(libs, op):
                checks.append((f"{op} {fmt_size(b)}", ratio(data, cfg, op, b, "ompi")))
                c = get(libs, "cohort", op, b)
                if c and c["p50"]:
                    tails.append((f"{op} {fmt_size(b)}", c["p99"] / c["p50"]))
        T.append((f"{cfg}: never slower than Open MPI", cfg, verdict(checks, 1.0, "x Open MPI time")))
        T.append((f"{cfg}: cohort p99 within 10x of p50", cfg, verdict(tails, 10.0, "p99/p50")))
    for cfg in ("tcp2", "tcp4", "tcp2osu", "tcp4osu", "netns2", "netns4", "netns2osu", "netns4osu"):
        libs = data.get(cfg, {})
        if not libs:
            continue
        checks, gl = [], []
        for op in OPS:
            for b in sizes_of(libs, op):
                checks.append((f"{op} {fmt_size(b)}", ratio(data, cfg, op, b, "ompi")))
                if b <= (1 << 20):
                    gl.append((f"{op} {fmt_size(b)}", ratio(data, cfg, op, b, "gloo")))
        T.append((f"{cfg}: never slower than Open MPI TCP", cfg, verdict(checks, 1.0, "x Open MPI time")))
        T.append((f"{cfg}: >= 10x faster than Gloo up to 1 MiB (time ratio <= 0.1)", cfg,
                  verdict(gl, 0.1, "x Gloo time")))
    if contract:
        big_r = [(f"{op} {fmt_size(b)}", r) for (op, b), (r, a) in sorted(contract.items())
                 if b >= 65536]
        T.append(("contract check on vs off: within 3% at >= 64 KiB", "contract",
                  verdict(big_r, 1.03, "on/off")))
        small_a = [(f"{op} {fmt_size(b)}", a) for (op, b), (r, a) in sorted(contract.items())
                   if b == 8]
        T.append(("contract check: <= 100 ns added at 8 B", "contract",
                  verdict(small_a, 100.0, "ns added")))
    return T


# ---- plots -------------------------------------------------------------------

def gq(s):
    """s as a gnuplot single-quoted string: a quote inside is doubled (a title
    such as shm2heap's "the program's buffers" ended the string and gnuplot
    stopped there, leaving every later plot unmade)."""
    return "'" + str(s).replace("'", "''") + "'"


def plots(data):
    pdir = os.path.join(OUT, "plots")
    os.makedirs(pdir, exist_ok=True)
    gp = ["set terminal pngcairo size 900,600 noenhanced", "set logscale xy", "set grid",
          "set key top left", "set xlabel 'size (full buffer)'",
          "set xtics (" + ", ".join(f"'{fmt_size(b)}' {b}" for b in
                                   [8, 64, 1024, 16384, 262144, 4 << 20, 64 << 20]) + ")"]
    cfgs = [(c, t, ["cohort"] + p) for c, t, p in CONFIGS] + \
        [("contract", "2 ranks shm: contract check on vs off", ["on", "off"])]
    n = 0
    for cfg, title, libs_order in cfgs:
        libs = data.get(cfg)
        if not libs:
            continue
        for op in OPS:
            if op == "barrier":
                continue
            lines = []
            for lib in libs_order:
                d = libs.get(lib)
                if not d:
                    continue
                ss = sorted(b for (o, b) in d if o == op)
                if not ss:
                    continue
                fn = f"{cfg}_{op}_{lib}.dat"
                with open(os.path.join(pdir, fn), "w") as f:
                    f.write("# size lat_us busbw_GBs (medians over launches)\n")
                    for b in ss:
                        s = summary(d[(op, b)])
                        f.write(f"{b} {s['lat']} {s['busbw'] if s['busbw'] > 0 else 'NaN'}\n")
                lines.append((fn, LIBNAME.get(lib, lib)))
            if not lines:
                continue
            n += 1
            for what, col, ylabel in (("busbw", 3, "bus bandwidth (GB/s)"), ("lat", 2, "time per op (us)")):
                gp.append(f"set output {gq(f'{cfg}_{op}_{what}.png')}")
                gp.append(f"set title {gq(f'{op}, {title[:90]}')}")
                gp.append(f"set ylabel {gq(ylabel)}")
                gp.append("plot " + ", ".join(f"{gq(fn)} using 1:{col} with linespoints title {gq(name)}"
                                             for fn, name in lines))
    with open(os.path.join(pdir, "plots.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")
    return n


# ---- main --------------------------------------------------------------------

def main():
    data = load_all()
    md = ["# cohort vs Open MPI, MPICH, Gloo (bench/compare/run.sh)\n"]
    info = os.path.join(OUT, "run_info.txt")
    if os.path.exists(info):
        md.append("```\n" + open(info).read().strip() + "\n```\n")
    rows_csv, ratios_csv = [], []
    head = len(md)  # the targets go right after the title and the run info
    config_tables(data, md, rows_csv, ratios_csv)
    contract = contract_table(data, md, rows_csv)
    mem = memory_table(md)
    mc = load_memcpy()
    if mc:
        md.append("\n### memcpy floor (memcpy_floor, one memcpy, cache-hot)\n")
        md.append("| size | launches | p50 us (median) | p99 us (median) | p50 per launch |")
        md.append("|---:|---:|---:|---:|---|")
        for b in sorted({m[0] for m in mc}):
            xs = [m for m in mc if m[0] == b]
            md.append(f"| {fmt_size(b)} | {len(xs)} | {fmt_us(med([m[1] for m in xs]))} | "
                      f"{fmt_us(med([m[2] for m in xs]))} | "
                      f"{', '.join(fmt_us(m[1]) for m in xs)} |")
    config_section(md)
    T = targets(data, contract)
    tmd = ["\n### targets (ratios of medians; cohort with the contract check on)\n",
           "| target | result | worst | misses (ratio) |", "|---|---|---|---|"]
    for name, cfg, (res, worst, detail) in T:
        tmd.append(f"| {name} | {res} | {worst} | {detail} |")
    md[head:head] = tmd
    # Check failures anywhere are reported loudly.
    fails = [(cfg, lib, k) for cfg, libs in data.items() for lib, d in libs.items()
             for k, recs in d.items() if any(r["check"] == "FAIL" for r in recs)]
    if fails:
        md.insert(head, f"\n**CHECK FAILURES: {len(fails)} (config, library, op/size): " +
                  ", ".join(f"{c}/{l}/{k[0]} {fmt_size(k[1])}" for c, l, k in fails[:20]) + "**\n")
    with open(os.path.join(OUT, "compare.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(OUT, "compare.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "op", "size", "lib", "launches", "lat_us_median", "lat_us_min",
                    "lat_us_max", "busbw_GBs_median", "p50_us_median", "p99_us_median",
                    "max_us_median", "check_failures"])
        w.writerows(rows_csv)
    with open(os.path.join(OUT, "ratios.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "op", "size", "peer", "cohort_lat_us", "peer_lat_us", "ratio"])
        w.writerows(ratios_csv)
    if mem:
        with open(os.path.join(OUT, "memory.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["lib", "ranks", "rank", "rss_start_kib", "rss_init_kib", "rss_end_kib",
                        "hwm_kib", "rss_shmem_kib", "shared_size_kib", "shared_rss_kib",
                        "shared_pss_kib"])
            w.writerows(mem)
    plots(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
