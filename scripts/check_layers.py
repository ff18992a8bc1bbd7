#!/usr/bin/env python3
"""check_layers.py - src/ has one direction for every dependency.

Reads the module order from scripts/layers.txt (lowest first) and the
#include "..." lines of every file under src/. A module is a folder of src/
(transport/shm, transport/tcp, coll/shm and coll/fail are modules of their own,
store/etcd belongs to store). Fails on:
  - an include of a higher module's header (an upward edge), unless
    layers.txt lists that exact edge as a known exception;
  - a module that layers.txt does not place;
  - with --objects DIR: a call from one module into a function defined in a
    higher one (nm over the library's object files), same exceptions;
  - a cycle between modules in what remains;
  - a call that FORBIDDEN rules out although it runs downward (a transport
    changing group state: it reports a failure as a status and a record,
    transport/transport.h), found in the sources and, with --objects, in
    the objects' undefined symbols.
Prints the module graph with --graph. Run by ctest (test_layers).
"""
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
OWN = ("transport/shm", "transport/tcp", "coll/shm", "coll/fail")


# Downward calls a module must still not make: a transport never changes its
# group's state; it returns a status and records the failure (coh_tp_fail),
# and its caller turns that into the group's failure (coll/fail).
GROUP_FAIL = {"coh_group_fail", "coh_group_peer_lost", "coh_group_remote_abort",
              "coh_contract_mismatch"}
FORBIDDEN = {m: GROUP_FAIL for m in ("transport", "transport/shm", "transport/tcp")}


def module(rel):
    d = os.path.dirname(rel)
    for m in OWN:
        if d == m or d.startswith(m + "/"):
            return m
    return d.split("/")[0] if d else "."


def read_layers():
    order, allowed = [], set()
    for line in open(os.path.join(ROOT, "scripts", "layers.txt")):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if "->" in line:
            a, b = (x.strip() for x in line.split("->"))
            allowed.add((a, b))
        else:
            order.append(line.split())
    rank = {}
    for i, mods in enumerate(order):
        for m in mods:
            rank[m] = i
    return rank, allowed


def sources():
    """(path, path relative to src/, module) of every C source and header."""
    for d, _, fs in os.walk(SRC):
        for f in sorted(fs):
            if f.endswith((".c", ".h", ".inc")):
                p = os.path.join(d, f)
                rel = os.path.relpath(p, SRC)
                yield p, rel, module(rel)


def include_edges():
    edges = collections.defaultdict(list)  # (from, to) -> [where]
    for p, rel, m in sources():
        for n, line in enumerate(open(p, errors="replace"), 1):
            mm = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not mm or "/" not in mm.group(1):
                continue
            t = mm.group(1)
            if not os.path.exists(os.path.join(SRC, t)):
                continue
            tm = module(t)
            if tm != m:
                edges[(m, tm)].append(f"src/{rel}:{n}: #include \"{t}\"")
    return edges


def symbol_edges(objdir):
    defs, undef = {}, collections.defaultdict(set)
    for d, _, fs in os.walk(objdir):
        for f in fs:
            if not f.endswith(".o"):
                continue
            p = os.path.join(d, f)
            rel = os.path.relpath(p, objdir)
            if "src/" not in rel:
                continue
            rel = rel[rel.index("src/") + 4:]
            src = rel[:-2]  # x.c.o -> x.c
            if "/" not in src or not os.path.exists(os.path.join(SRC, src)):
                continue  # a stale object of a moved file, or not ours
            m = module(src)
            out = subprocess.run(["nm", p], capture_output=True, text=True, check=True).stdout
            for l in out.splitlines():
                x = l.split()
                if len(x) == 2 and x[0] == "U":
                    undef[src].add(x[1])
                elif len(x) == 3 and x[1] in "TDBRV":
                    defs[x[2]] = m
    if not undef:
        sys.exit(f"check_layers: no object files of src/ under {objdir}")
    edges = collections.defaultdict(list)
    forbidden = []
    for src, syms in undef.items():
        m = module(src)
        for s in sorted(syms):
            if s in defs and defs[s] != m:
                edges[(m, defs[s])].append(f"src/{src}: calls {s}")
            if s in FORBIDDEN.get(m, ()):
                forbidden.append(f"src/{src} ({m}) calls {s} (object file)")
    return edges, forbidden


def forbidden_in_sources():
    """Names FORBIDDEN to a module that its sources call (comments aside)."""
    out = []
    for p, rel, m in sources():
        if m not in FORBIDDEN:
            continue
        text = open(p, errors="replace").read()
        text = re.sub(r"/\*.*?\*/|//[^\n]*", lambda x: "\n" * x.group(0).count("\n"), text,
                      flags=re.S)
        for n, line in enumerate(text.split("\n"), 1):
            for name in FORBIDDEN[m]:
                if re.search(r"\b%s\s*\(" % name, line):
                    out.append(f"src/{rel}:{n} ({m}) calls {name}")
    return out


def cycles(nodes, adj):
    """Strongly connected components with more than one module."""
    index, low, stack, on, out, i = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = i[0]
        i[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main(argv):
    objdir = None
    if "--objects" in argv:
        objdir = argv[argv.index("--objects") + 1]
    rank, allowed = read_layers()
    edges = include_edges()
    kinds = [("include", edges)]
    bad = []
    for hit in forbidden_in_sources():
        bad.append("forbidden call: " + hit)
    if objdir:
        call_edges, hits = symbol_edges(objdir)
        kinds.append(("call", call_edges))
        bad += ["forbidden call: " + h for h in hits]
    mods = {x for _, e in kinds for (a, b) in e for x in (a, b)}
    for m in sorted(mods):
        if m not in rank:
            bad.append(f"module {m} is not placed in scripts/layers.txt")
    adj = collections.defaultdict(set)
    used = set()
    for kind, e in kinds:
        for (a, b), where in sorted(e.items()):
            if a not in rank or b not in rank:
                continue
            adj[a].add(b)
            if rank[b] < rank[a]:
                continue
            if (a, b) in allowed:
                used.add((a, b))
                continue
            what = "upward" if rank[b] > rank[a] else "sideways (same layer)"
            bad.append(f"{kind} edge {a} -> {b} runs {what}:\n    " + "\n    ".join(where[:5]))
    for comp in cycles(set(adj), adj):
        bad.append("dependency cycle between modules: " + ", ".join(comp))
    for a, b in sorted(allowed - used):
        bad.append(f"layers.txt allows {a} -> {b}, but no such edge exists any more: remove it")
    if "--graph" in argv:
        for a in sorted(adj, key=lambda m: (rank.get(m, -1), m)):
            print(f"{a:14s} -> " + ", ".join(sorted(adj[a], key=lambda m: (rank.get(m, -1), m))))
    if bad:
        print("check_layers: FAILED\n" + "\n".join(bad))
        return 1
    print(f"check_layers: ok ({len(rank)} modules, {sum(len(v) for v in adj.values())} edges, "
          f"all downward{'' if not allowed else f'; {len(allowed)} listed exceptions'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
