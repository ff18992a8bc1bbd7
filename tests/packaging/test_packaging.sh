#!/usr/bin/env bash
# tests/packaging: cohort consumed the way users consume it. Usage:
#   test_build.sh BUILD_DIR SOURCE_DIR
# Installs BUILD_DIR into a temporary prefix and builds tests/packaging/consumer
# against it (find_package: shared and static), as a subproject of the
# source tree (add_subdirectory, FetchContent), and with pkg-config (dynamic, fully
# static); runs each under the installed cohortrun -n 2. Also checks
# libcohort.so's NEEDED list and that the etcd plugin loads only on an
# etcd:// address (and is named when missing).
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
here=$src/tests/packaging
tmp=$(mktemp -d /tmp/cohort-build-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
jobs=2
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }
# Quiet builds; the log is shown when one fails.
quiet() { "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "$*"; }; }

step "no CMAKE_SOURCE_DIR/CMAKE_BINARY_DIR in cohort's CMake files (they break add_subdirectory)"
bad=$(cd "$src" && git ls-files 2>/dev/null '*CMakeLists.txt' '*.cmake' '*.cmake.in' |
      xargs grep -n 'CMAKE_SOURCE_DIR\|CMAKE_BINARY_DIR' 2>/dev/null |
      grep -v '^CMakeLists.txt:[0-9]*:if(CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)' || true)
[ -z "$bad" ] || fail "use PROJECT_SOURCE_DIR/PROJECT_BINARY_DIR or CMAKE_CURRENT_*: $bad"

step "cmake --install into a temporary prefix"
prefix=$tmp/prefix
quiet cmake --install "$build" --prefix "$prefix"
libdir=$(dirname "$(find "$prefix" -name 'libcohort.so.0' | head -1)")
[ -n "$libdir" ] || fail "no libcohort.so.0 installed"
for f in "$libdir/libcohort.a" "$libdir/libcohort-etcd.so" "$libdir/pkgconfig/cohort.pc" \
         "$libdir/cmake/cohort/cohortConfig.cmake" "$libdir/cmake/cohort/cohortConfigVersion.cmake" \
         "$prefix/include/cohort.h" "$prefix/bin/cohortrun" \
         "$prefix/share/man/man1/cohortrun.1" "$prefix/share/man/man1/cohort-perf.1" \
         "$prefix/share/man/man7/cohort.7" "$prefix/share/bash-completion/completions/cohortrun" \
         "$prefix/share/bash-completion/completions/cohort-kv"; do
  [ -e "$f" ] || fail "not installed: $f"
done
crun=$prefix/bin/cohortrun

step "cohortrun --heap preloads the installed libcohort-heap.so (beside libcohort.so)"
[ -e "$libdir/libcohort-heap.so" ] || fail "not installed: $libdir/libcohort-heap.so"
pre=$("$crun" -q --no-prefix -n 1 --heap sh -c 'echo "$LD_PRELOAD"' 2>&1) || fail "cohortrun --heap: $pre"
[ "$pre" = "$(realpath "$libdir/libcohort-heap.so")" ] || fail "cohortrun --heap set LD_PRELOAD=$pre"

step "libcohort.so needs only libc, pthreads, libsodium (the loader too)"
needed=$(readelf -d "$libdir/libcohort.so.0" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "$needed" | sed 's/^/  NEEDED /'
while read -r lib; do
  case "$lib" in
    libc.so.*|libsodium.so.*|libpthread.so.*|ld-linux*|libdl.so.*) ;;
    *) fail "libcohort.so needs $lib" ;;
  esac
done <<<"$needed"
grep -q '^libsodium' <<<"$needed" || fail "libcohort.so does not link libsodium?"
grep -q 'libcurl' <<<"$(readelf -d "$libdir/libcohort-etcd.so")" || fail "the plugin does not link libcurl"
grep -q 'RUNPATH\|RPATH' <<<"$(readelf -d "$libdir/libcohort-etcd.so")" && fail "installed plugin keeps a build RUNPATH"
nsyms=$(nm -D --defined-only "$libdir/libcohort-etcd.so" | awk '$2 ~ /[TDB]/' | wc -l)
[ "$nsyms" = 1 ] || fail "the plugin exports $nsyms symbols (only its entry point should be)"

run2() { # program: run as 2 ranks, expect sum=3
  local out
  out=$("$crun" -n 2 "$@" 2>&1) || { echo "$out" >&2; fail "cohortrun -n 2 $*"; }
  grep -q 'sum=3' <<<"$out" || { echo "$out" >&2; fail "$*: wrong result"; }
  grep -q 'curl=not mapped' <<<"$out" || { echo "$out" >&2; fail "$*: libcurl loaded without etcd"; }
}
etcd_check() { # program expected(found|missing) [env...]: etcd:// on a closed port
  local prog=$1 want=$2 out; shift 2
  out=$(env "$@" "$prog" etcd etcd://127.0.0.1:1/t 2>&1)
  grep -q 'curl before: not mapped' <<<"$out" || { echo "$out" >&2; fail "$prog: libcurl mapped before etcd"; }
  if [ "$want" = found ]; then
    grep -q 'etcd cluster unreachable' <<<"$out" || { echo "$out" >&2; fail "$prog: plugin not used"; }
    grep -q 'curl after: mapped' <<<"$out" || { echo "$out" >&2; fail "$prog: libcurl not loaded"; }
  else
    grep -q 'COHORT_ERR_UNSUPPORTED' <<<"$out" || { echo "$out" >&2; fail "$prog: missing plugin not reported"; }
    grep -q 'libcohort-etcd.so' <<<"$out" || { echo "$out" >&2; fail "$prog: error does not name the plugin"; }
    grep -q 'No such file' <<<"$out" || { echo "$out" >&2; fail "$prog: error lacks dlerror's reason"; }
  fi
}

step "find_package(cohort CONFIG) against the prefix: shared and static"
pk=$tmp/pkg
quiet cmake -S "$here/consumer" -B "$pk" -DCMAKE_PREFIX_PATH="$prefix" -DMODE=package
quiet cmake --build "$pk" -j$jobs
grep -q "$libdir/libcohort.so.0" <<<"$(ldd "$pk/app_shared")" || fail "app_shared does not use the installed libcohort.so"
grep -q 'libcohort' <<<"$(ldd "$pk/app_static")" && fail "app_static links libcohort.so"
grep -q 'libcurl' <<<"$(ldd "$pk/app_shared")" && fail "app_shared loads libcurl at start"
run2 "$pk/app_shared"
run2 "$pk/app_static"
# The shared library finds the plugin beside itself; a static program finds
# it through COHORT_ETCD_PLUGIN (or the configured libdir, not this prefix).
etcd_check "$pk/app_shared" found
etcd_check "$pk/app_static" found COHORT_ETCD_PLUGIN="$libdir/libcohort-etcd.so"
etcd_check "$pk/app_static" missing COHORT_ETCD_PLUGIN="$tmp/nowhere/libcohort-etcd.so"
mv "$libdir/libcohort-etcd.so" "$tmp/"
etcd_check "$pk/app_shared" missing
mv "$tmp/libcohort-etcd.so" "$libdir/"
# Files that are not this libcohort's plugin are refused with a reason: a
# library without the entry point, and one whose entry refuses the host.
printf 'int not_the_plugin(void) { return 0; }\n' >"$tmp/noentry.c"
printf '%s\n' '#include <stdio.h>' \
  'const void *cohort_etcd_plugin_v1(const void *host, char *why, unsigned long n)' \
  '{ (void)host; snprintf(why, n, "built for cohort 9.9"); return 0; }' >"$tmp/refuse.c"
quiet cc -shared -fPIC "$tmp/noentry.c" -o "$tmp/noentry.so"
quiet cc -shared -fPIC "$tmp/refuse.c" -o "$tmp/refuse.so"
out=$(COHORT_ETCD_PLUGIN=$tmp/noentry.so "$pk/app_shared" etcd etcd://127.0.0.1:1/t 2>&1)
grep -q 'COHORT_ERR_UNSUPPORTED.*cohort_etcd_plugin_v1' <<<"$out" || fail "plugin without entry: $out"
out=$(COHORT_ETCD_PLUGIN=$tmp/refuse.so "$pk/app_shared" etcd etcd://127.0.0.1:1/t 2>&1)
grep -q 'COHORT_ERR_UNSUPPORTED.*refuse.so: built for cohort 9.9' <<<"$out" || fail "refusing plugin: $out"
# The real plugin built as another version: refused by its own check.
mkdir -p "$tmp/v99"
sed 's/#define COHORT_VERSION_STRING .*/#define COHORT_VERSION_STRING "9.9.9"/' \
    "$build/cohort_config.h" >"$tmp/v99/cohort_config.h"
quiet cc -shared -fPIC -fvisibility=hidden -D_GNU_SOURCE -std=c11 -I"$tmp/v99" -I"$src/include" \
    -I"$src/src" "$src"/src/store/etcd/*.c -o "$tmp/v99/libcohort-etcd.so" \
    $(pkg-config --cflags --libs libcurl jansson libsodium) -pthread
out=$(COHORT_ETCD_PLUGIN=$tmp/v99/libcohort-etcd.so "$pk/app_shared" etcd etcd://127.0.0.1:1/t 2>&1)
grep -q 'the plugin is cohort 9.9.9 .*the library is cohort 0' <<<"$out" ||
  fail "plugin of another version: $out"
# The installed tools link libcohort.so (they use only the public API) and
# find it, and through it the plugin, in <prefix>/lib from <prefix>/bin,
# wherever the prefix is (RUNPATH $ORIGIN/../lib, no build path).
kvdyn=$(readelf -d "$prefix/bin/cohort-kv")
grep -q 'NEEDED.*libcohort\.so' <<<"$kvdyn" || fail "installed cohort-kv does not link libcohort.so"
grep -q 'RUNPATH.*\$ORIGIN/\.\./' <<<"$kvdyn" || fail "installed cohort-kv has no \$ORIGIN RUNPATH: $kvdyn"
grep -q "RUNPATH.*$build" <<<"$kvdyn" && fail "installed cohort-kv keeps the build RUNPATH"
out=$(COHORT_TOKEN=t "$prefix/bin/cohort-kv" --addr etcd://127.0.0.1:1/t --job j \
      --connect-timeout 300 ping 2>&1 || true)
grep -q 'etcd cluster unreachable' <<<"$out" || fail "installed cohort-kv did not load the plugin: $out"
# A version the package does not provide is refused.
cat >"$tmp/v.cmake" <<V
find_package(cohort 9.0 CONFIG QUIET PATHS "$prefix" NO_DEFAULT_PATH)
if(cohort_FOUND)
  message(FATAL_ERROR "cohort 9.0 found")
endif()
V
quiet cmake -P "$tmp/v.cmake"

step "pkg-config: dynamic, and a fully static program (--static)"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg-config --exists cohort || fail "pkg-config does not find cohort"
[ "$(pkg-config --variable=prefix cohort)" -ef "$prefix" ] || fail "cohort.pc prefix is not the install prefix"
quiet cc "$here/consumer/app.c" $(pkg-config --cflags --libs cohort) -Wl,-rpath,"$libdir" -o "$tmp/app_pc"
run2 "$tmp/app_pc"
# glibc warns that dlopen/getaddrinfo in a static program need its shared
# libraries at run time; that is expected (the plugin is dlopened).
quiet cc -static "$here/consumer/app.c" $(pkg-config --static --cflags --libs cohort) -o "$tmp/app_pc_static"
grep -q NEEDED <<<"$(readelf -d "$tmp/app_pc_static" 2>/dev/null)" && fail "app_pc_static is not static"
run2 "$tmp/app_pc_static"

step "add_subdirectory on the source tree (a parent project's flags untouched)"
sd=$tmp/subdir
quiet cmake -S "$here/consumer" -B "$sd" -DMODE=subdir -DCOHORT_SRC="$src"
grep -q '^COHORT_TESTS:BOOL=OFF' "$sd/CMakeCache.txt" || fail "tests on by default in a subproject"
grep -q '^COHORT_TOOLS:BOOL=OFF' "$sd/CMakeCache.txt" || fail "tools on by default in a subproject"
grep -q '^COHORT_WERROR:BOOL=OFF' "$sd/CMakeCache.txt" || fail "-Werror on by default in a subproject"
grep -q '^COHORT_MPI:BOOL=OFF' "$sd/CMakeCache.txt" || fail "the PMPI layer on by default in a subproject"
grep -q '^COHORT_PYTHON_CHECK:BOOL=OFF' "$sd/CMakeCache.txt" || fail "the Python check on by default in a subproject"
grep -q '^CMAKE_BUILD_TYPE:STRING=$' "$sd/CMakeCache.txt" || fail "cohort set the parent's CMAKE_BUILD_TYPE"
quiet cmake --build "$sd" -j$jobs --target app_shared app_static cohort-etcd
run2 "$sd/app_shared"
run2 "$sd/app_static"
etcd_check "$sd/app_shared" found
# A static program of the parent finds the plugin once installed (libdir),
# or where COHORT_ETCD_PLUGIN says; the build tree is not searched.
etcd_check "$sd/app_static" missing
etcd_check "$sd/app_static" found COHORT_ETCD_PLUGIN="$sd/cohort/libcohort-etcd.so"

step "FetchContent (FETCHCONTENT_SOURCE_DIR_COHORT: no download)"
fc=$tmp/fetch
quiet cmake -S "$here/consumer" -B "$fc" -DMODE=fetch -DFETCHCONTENT_SOURCE_DIR_COHORT="$src"
grep -q '^COHORT_TESTS:BOOL=OFF' "$fc/CMakeCache.txt" || fail "tests on by default via FetchContent"
quiet cmake --build "$fc" -j$jobs --target app_shared app_static
run2 "$fc/app_shared"
run2 "$fc/app_static"
echo "== tests/packaging: all passed"
