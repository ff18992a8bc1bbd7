#!/usr/bin/env bash
# scripts/hpcc-mpich.sh <hpcc-source> [workdir] [pairs]
#
# HPC Challenge under libcohort-mpi with MPICH. Debian ships hpcc built for
# Open MPI only (tests/mpi/run_hpcc.sh runs that one in the test command),
# so this builds hpcc from its source against MPICH, outside this
# repository, then:
#   1. the check: tests/mpi/run_hpcc.sh on 2 and 4 ranks (Success=1, no
#      report, every call compared);
#   2. the cost: bench/mpi/hpcc_cost.sh, `pairs` interleaved bare/layer
#      runs on 2 and 4 ranks (median wall time and hpcc's own results).
# <hpcc-source>: Debian's source (`apt-get source hpcc`, needs a deb-src
# line) or its orig tarball hpcc_1.5.0.orig.tar.gz, as a directory or the
# .tar.gz; never copied into this repository. Needs a build (build/mpi/).
# RANKS selects the cost runs' sizes (default "2 4").
# Also run by scripts/mpi-suites.sh when given an hpcc source.
set -uo pipefail
src=${1:?hpcc source (directory or .tar.gz)}
work=${2:-/tmp/cohort-mpi-suites}
pairs=${3:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$root/build/mpi/libcohort-mpi-mpich.so
[ -e "$lib" ] || { echo "missing $lib: build first" >&2; exit 1; }
command -v mpicc.mpich >/dev/null || { echo "mpicc.mpich missing (libmpich-dev)" >&2; exit 1; }
mkdir -p "$work"
b=$work/hpcc-mpich
hpcc=$b/hpcc

if [ ! -x "$hpcc" ]; then
  rm -rf "$b" && mkdir -p "$b"
  if [ -d "$src" ]; then cp -a "$src/." "$b/"
  else tar xzf "$src" -C "$b" --strip-components=1; fi
  [ -d "$b/hpl" ] || { echo "$src is not hpcc's source (no hpl/)" >&2; exit 1; }
  # HPL's build takes its settings from hpl/Make.<arch>: MPICH's compiler
  # wrapper, the system's Fortran BLAS (-DAdd_: gfortran's symbol names),
  # debug info so the layer's reports name file:line.
  cat > "$b/hpl/Make.cohort_mpich" <<'EOF'
SHELL = /bin/sh
CD = cd
CP = cp
LN_S = ln -s
MKDIR = mkdir -p
RM = /bin/rm -f
TOUCH = touch
ARCH = $(arch)
TOPdir = ../../..
INCdir = $(TOPdir)/include
BINdir = $(TOPdir)/bin/$(ARCH)
LIBdir = $(TOPdir)/lib/$(ARCH)
HPLlib = $(LIBdir)/libhpl.a
LAlib = -l:libblas.so.3
F2CDEFS = -DAdd_ -DF77_INTEGER=int -DStringSunStyle
HPL_INCLUDES = -I$(INCdir) -I$(INCdir)/$(ARCH)
HPL_LIBS = $(HPLlib) $(LAlib) -lm
HPL_DEFS = $(F2CDEFS) $(HPL_INCLUDES)
CC = mpicc.mpich
CCNOOPT = $(HPL_DEFS)
CCFLAGS = $(HPL_DEFS) -O2 -g -fcommon
LINKER = mpicc.mpich
LINKFLAGS = $(CCFLAGS)
ARCHIVER = ar
ARFLAGS = r
RANLIB = echo
EOF
  (cd "$b" && make arch=cohort_mpich) > "$work/hpcc-mpich-build.log" 2>&1
  [ -x "$hpcc" ] || { echo "building hpcc failed: $work/hpcc-mpich-build.log" >&2; exit 1; }
fi
ldd "$hpcc" | grep -q libmpich || { echo "$hpcc is not linked with MPICH" >&2; exit 1; }

echo "== hpcc $(basename "$(readlink -f "$src")") built for MPICH: the check (2 and 4 ranks, N=400)"
"$root/tests/mpi/run_hpcc.sh" mpich "$lib" "$hpcc"
check=$?

echo "== hpcc under MPICH: cost"
"$root/bench/mpi/hpcc_cost.sh" mpich "$lib" "$hpcc" "$pairs" "$work"
cost=$?
exit $((check || cost))
