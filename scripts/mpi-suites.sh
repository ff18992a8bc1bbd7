#!/usr/bin/env bash
# scripts/mpi-suites.sh <mpi4py-source> <mpich-source> [<hpcc-source> [workdir]]
#
# Runs two other projects' test suites under libcohort-mpi, each bare and
# then with the layer preloaded, and prints both summaries (docs/mpi.md,
# "Suites", records the results). Their sources are given by path and never
# copied into this repository:
#   <mpi4py-source>: mpi4py at the version of Debian's python3-mpi4py
#     (3.1.4), e.g. `apt-get source mpi4py` or `pip download --no-binary
#     :all: --no-deps mpi4py==3.1.4`, unpacked; its test/ is run with
#     Debian's mpi4py (built for Open MPI) on 2 ranks.
#   <mpich-source>: MPICH at the version of Debian's mpich (4.0.2), e.g.
#     `apt-get source mpich`; its test/mpi is configured against the
#     installed MPICH in workdir and the coll tests (test/mpi/coll/testlist)
#     are run with mpiexec.mpich.
#   <hpcc-source>: HPC Challenge's source (`apt-get source hpcc` or its
#     orig tarball): scripts/hpcc-mpich.sh builds it against MPICH and runs
#     it bare and under the layer ("-" or nothing: skipped).
# Needs a build (build/mpi/libcohort-mpi-*.so). Takes tens of minutes.
set -uo pipefail
m4py=$(cd "${1:?mpi4py source}" && pwd)
mpich=$(cd "${2:?mpich source}" && pwd)
hpcc_src=${3:--}
work=${4:-/tmp/cohort-mpi-suites}
root=$(cd "$(dirname "$0")/.." && pwd)
ompi_lib=$root/build/mpi/libcohort-mpi-openmpi.so
mpich_lib=$root/build/mpi/libcohort-mpi-mpich.so
for f in "$ompi_lib" "$mpich_lib"; do [ -e "$f" ] || { echo "missing $f: build first" >&2; exit 1; }; done
mkdir -p "$work"

echo "== mpi4py $(sed -n 's/^Version: //p' "$m4py/PKG-INFO" 2>/dev/null) test suite, Open MPI, 2 ranks"
# Dynamic process tests (spawn) are left out in both runs: the layer does
# not register spawned communicators, and spawning on an oversubscribed
# machine is slow.
for mode in bare layer; do
  pre=(); [ $mode = layer ] && pre=(-x LD_PRELOAD="$ompi_lib" -x COHORT_MPI_STATS=1)
  (cd "$m4py/test" && timeout 3600 mpirun.openmpi --allow-run-as-root --oversubscribe -n 2 "${pre[@]}" \
     /usr/bin/python3 runtests.py --no-builddir -q -e test_dynproc -e test_spawn) \
     > "$work/mpi4py-$mode.log" 2>&1
  rc=$?
  echo "$mode: exit $rc; $(grep -E '^Ran [0-9]+ tests' "$work/mpi4py-$mode.log" | sort -u | tr '\n' ' ')$(grep -E '^(OK|FAILED)' "$work/mpi4py-$mode.log" | sed 's/-*$//' | sort -u | tr '\n' ' ')"
  grep '^cohort-mpi' "$work/mpi4py-$mode.log" | sed 's/^/    /'
done

echo "== MPICH $(basename "$mpich") test/mpi/coll, mpiexec.mpich"
t=$work/mpich-test
if [ ! -x "$t/coll/allred" ]; then
  rm -rf "$t" && cp -a "$mpich/test/mpi" "$t"
  # configure picks /usr/bin/mpicc (Debian's alternative: Open MPI) whatever CC says: the
  # Makefiles are pointed at MPICH's compiler wrapper afterwards.
  (cd "$t" && CC=mpicc.mpich ./configure --with-mpi=/usr --disable-fortran --disable-cxx \
     --disable-romio --disable-spawn --disable-ft-tests --disable-perftest > "$work/mpich-configure.log" 2>&1 &&
   grep -rl '^CC = /usr/bin/mpicc$' --include=Makefile . | xargs sed -i 's|^CC = /usr/bin/mpicc$|CC = mpicc.mpich|' &&
   make -j2 -C util && make -j2 -C dtpools && make -k -j2 -C coll; true) > "$work/mpich-build.log" 2>&1 ||
    { echo "building MPICH's tests failed: $work/mpich-build.log"; exit 1; }
fi
for mode in bare layer; do
  # runtests fails a test on any output but its own: the layer's per-rank
  # stats go to a file, and the stall warning (a rank waiting 30 s for
  # others busy elsewhere, as allgatherv4 does on a loaded machine: a
  # warning, not a finding) is set beyond runtests' own 180 s timeout.
  stats=$work/mpich-$mode.stats
  rm -f "$stats"
  if [ $mode = layer ]; then export MPITEST_MPIEXECARG="-genv LD_PRELOAD $mpich_lib -genv COHORT_MPI_STATS_FILE $stats -genv COHORT_STALL_WARN 3600"
  else unset MPITEST_MPIEXECARG; fi
  (cd "$t/coll" && ../runtests -srcdir=. -tests=testlist -mpiexec=mpiexec.mpich \
     -junitfile="$work/mpich-$mode.junit.xml" -maxnp=10) > "$work/mpich-$mode.log" 2>&1
  echo "$mode: $(grep -E 'tests failed out of|All [0-9]+ tests passed' "$work/mpich-$mode.log" | tail -1)"
  grep -E '^Unexpected output|^Program .* exited without No Errors|^Failed to ' "$work/mpich-$mode.log" | sort | uniq -c | head -20 | sed 's/^/    /'
  [ $mode = layer ] && echo "    layer stats: $(grep -c 'stats:' "$stats" 2>/dev/null) rank lines, $(grep -c 'NOT all compared' "$stats" 2>/dev/null) not all compared, $(awk '/stats:/ {s += $5} END {print s + 0}' "$stats" 2>/dev/null) calls checked"
done
if [ "$hpcc_src" != - ]; then
  echo "== hpcc built for MPICH (scripts/hpcc-mpich.sh)"
  "$root/scripts/hpcc-mpich.sh" "$hpcc_src" "$work"
fi
echo "logs: $work"
