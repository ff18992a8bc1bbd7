#!/usr/bin/env bash
# Installs the Debian packages cohort needs to build and test, when missing.
# Usage: scripts/deps.sh [build|test|bench]   (default: test)
set -euo pipefail
what=${1:-test}
pkgs=(build-essential cmake pkg-config libsodium-dev check libsubunit-dev scdoc
      libcurl4-openssl-dev libjansson-dev iproute2 procps)
case "$what" in
  # libcohort-mpi's tests: both MPIs (headers too: the layer is built per
  # MPI), Debian's hpcc, addr2line (call sites) from binutils
  test)  pkgs+=(clang libclang-rt-14-dev etcd-server etcd-client openssl python3 openmpi-bin
                python3-dev python3-pip python3-setuptools python3-wheel python3-numpy
                python3-pytest python3-torch
                slurm-wlm munge util-linux # slurm: tests/launch_slurm; torch: tests/store_torch
                libopenmpi-dev mpich libmpich-dev hpcc binutils) ;;
  bench) pkgs+=(clang etcd-server etcd-client python3 python3-torch openmpi-bin libopenmpi-dev
                mpich gnuplot-nox hyperfine linux-perf) ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "cohort: installing ${missing[*]}" >&2
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get -o DPkg::Lock::Timeout=900 update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# torch 2.x for the python3 on PATH (the TCPStore tests, docs/torch-store.md),
# when that is not Debian's python (which has python3-torch 1.13). A CPU
# build of a pinned version: a bare `pip install torch` pulls multi-GB CUDA.
if [ "$what" = test ] && command -v python3 >/dev/null &&
   [ "$(command -v python3)" != /usr/bin/python3 ] && ! python3 -c 'import torch' 2>/dev/null; then
  echo "cohort: installing torch==2.13.0 for $(command -v python3)" >&2
  python3 -m pip install -q torch==2.13.0 || echo "cohort: torch 2.x not installed: its tests are skipped" >&2
fi
