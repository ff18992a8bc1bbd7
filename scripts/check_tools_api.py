#!/usr/bin/env python3
"""check_tools_api.py [TOOL_BINARY...] - the tools use only the public API.

Fails on:
  - an #include "..." in a file under tools/ that is not a public header
    (include/), a header of tools/common, or a header of the tool's own
    folder - in particular any header of src/;
  - a tools/*/CMakeLists.txt that puts src/ on an include path or links
    cohort_static (the build side of the same rule: the tools see include/
    and tools/common only, and link libcohort.so, whose -fvisibility=hidden
    makes a call into an internal a link error);
  - with binaries given: a tool binary that defines a library symbol
    (coh_* or cohort_*), i.e. carries a copy of the library's code instead
    of calling libcohort.so.
KNOWN lists files still to be moved to the public API (none now; docs/
architecture.md, "The tools use the public API"). Run by ctest
(test_tools_api).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")

# Files and binaries still on internals, by path (tools/...) or binary name.
KNOWN = set()


def includes():
    bad = []
    pub = set(os.listdir(os.path.join(ROOT, "include")))
    common = set(os.listdir(os.path.join(TOOLS, "common")))
    for d, _, fs in os.walk(TOOLS):
        for f in sorted(fs):
            if not f.endswith((".c", ".h")):
                continue
            p = os.path.join(d, f)
            rel = os.path.relpath(p, ROOT)
            if rel in KNOWN:
                continue
            own = set(os.listdir(d))
            for n, line in enumerate(open(p, errors="replace"), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                h = m.group(1)
                if "/" not in h and (h in pub or h in common or h in own):
                    continue
                in_src = os.path.exists(os.path.join(ROOT, "src", h))
                where = " (a header of src/)" if in_src else ""
                bad.append(f"{rel}:{n}: #include \"{h}\": not a public header{where}")
    return bad


def cmake_files():
    bad = []
    for d in sorted(os.listdir(TOOLS)):
        p = os.path.join(TOOLS, d, "CMakeLists.txt")
        rel = os.path.relpath(p, ROOT)
        if not os.path.exists(p) or rel in KNOWN:
            continue
        for n, line in enumerate(open(p), 1):
            code = line.split("#", 1)[0]
            if re.search(r"SOURCE_DIR\}/src\b|\bcohort_static\b|PROJECT_BINARY_DIR", code):
                bad.append(f"{rel}:{n}: {code.strip()}: tools see include/ and tools/common "
                           "only and link libcohort.so (cohort_tool())")
    return bad


def binaries(paths):
    bad = []
    for b in paths:
        if os.path.basename(b) in KNOWN:
            continue
        out = subprocess.run(["nm", "--defined-only", b], capture_output=True, text=True,
                             check=True).stdout
        syms = sorted({l.split()[-1] for l in out.splitlines()
                       if re.search(r" [TtDdBbRr] (coh_|cohort_)", l)})
        if syms:
            bad.append(f"{b}: defines {len(syms)} library symbols ({', '.join(syms[:5])}"
                       f"{', ...' if len(syms) > 5 else ''}): link libcohort.so, not a copy")
    return bad


def main():
    bad = includes() + cmake_files() + binaries(sys.argv[1:])
    for b in bad:
        print(b)
    if bad:
        print(f"check_tools_api: {len(bad)} problem(s): tools use only include/ "
              "(add public API where a tool needs it)")
        return 1
    left = sorted(k for k in KNOWN if "/" not in k)
    print("check_tools_api: ok" + (f" (still on internals: {', '.join(left)})" if left else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
