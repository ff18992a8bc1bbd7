# netns_stale.sh - sourced by the scripts that build network namespaces
# (tests/launch_mpi, tests/launch_slurm, tests/tools_launcher, bench/compare).
#
# Their namespace and veth names carry the creating run's pid ($$), so two
# runs at once never share one. A run that is killed (SIGKILL, a CI timeout)
# cannot clean up: `netns_stale PREFIX...` deletes the namespaces named
# <PREFIX><pid>... and the root-namespace interfaces of the same form (a
# veth pair is made there before its ends are moved) whose pid no longer
# exists - a live run's are never touched. The C tests do the same in
# cht_netns_create (tests/support/support.c).
netns_stale() {
  for _pre in "$@"; do
    for _f in /run/netns/"$_pre"[0-9]*; do
      [ -e "$_f" ] || continue
      _n=${_f##*/}
      netns_stale_pid "$_pre" "$_n" && ip netns del "$_n" 2>/dev/null
    done
    for _n in $(ip -o link show 2>/dev/null |
                sed -n "s/^[0-9]*: \($_pre[0-9][^:@]*\)[:@].*/\1/p"); do
      netns_stale_pid "$_pre" "$_n" && ip link del "$_n" 2>/dev/null
    done
  done
  return 0
}

# netns_stale_pid PREFIX NAME: true when NAME is PREFIX<pid>... and that pid
# is gone (never this shell's own).
netns_stale_pid() {
  _p=${2#"$1"}
  _p=${_p%%[!0-9]*}
  [ -n "$_p" ] && [ "$_p" != "$$" ] && ! kill -0 "$_p" 2>/dev/null
}
