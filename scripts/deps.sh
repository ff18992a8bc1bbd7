#!/usr/bin/env bash
# Installs the Debian packages cohort needs to build and test, when missing.
# Usage: scripts/deps.sh [build|test|bench]   (default: test)
set -euo pipefail
what=${1:-test}
pkgs=(build-essential cmake pkg-config libsodium-dev check libsubunit-dev scdoc
      libcurl4-openssl-dev libjansson-dev iproute2 procps)
case "$what" in
  test)  pkgs+=(clang libclang-rt-14-dev etcd-server etcd-client openssl python3 openmpi-bin
                python3-dev python3-pip python3-setuptools python3-wheel python3-numpy
                python3-pytest
                slurm-wlm munge util-linux) ;; # slurm: tests/launch_slurm
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
