#!/usr/bin/env python3
"""check_exports.py LIBCOHORT_SO - the shared library's boundary.

libcohort is built with -fvisibility=hidden; the public headers mark each
API function COHORT_API. This fails if libcohort.so exports a symbol that
is not a cohort_* function declared COHORT_API in include/ (an internal
leaking out), or if a COHORT_API function is not exported (hidden, or
declared and never defined). Run by ctest (test_exports).
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def declared():
    """COHORT_API functions, and cohort_* functions declared without it."""
    names, unmarked = set(), set()
    for f in glob.glob(os.path.join(ROOT, "include", "*.h")):
        text = open(f).read()
        for m in re.finditer(r"^COHORT_API\b[^(;]*?\b(cohort_[a-z0-9_]+)\s*\(", text, re.M):
            names.add(m.group(1))
        for m in re.finditer(r"^(?!COHORT_API\b|typedef\b|#)[a-z][a-z0-9_ ]*[ *]+(cohort_[a-z0-9_]+)\s*\(",
                             text, re.M):
            unmarked.add(f"{os.path.basename(f)}: {m.group(1)}")
    return names, unmarked


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] not in "AaUw":
            names.add(parts[2].split("@")[0])
    return names


def main(argv):
    if len(argv) != 1:
        sys.exit("usage: check_exports.py path/to/libcohort.so")
    (api, unmarked), exp = declared(), exported(argv[0])
    if not api:
        sys.exit("check_exports: no COHORT_API declarations found in include/")
    bad = [f"public function declared without COHORT_API (it would not be exported): {u}"
           for u in sorted(unmarked)]
    for s in sorted(exp - api):
        bad.append(f"exported but not public API: {s}")
    for s in sorted(api - exp):
        bad.append(f"declared COHORT_API but not exported: {s}")
    if bad:
        print("check_exports: FAILED (nm -D " + argv[0] + ")\n  " + "\n  ".join(bad))
        return 1
    print(f"check_exports: ok ({len(exp)} symbols, all cohort_* COHORT_API functions)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
