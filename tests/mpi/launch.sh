# launch.sh - sourced: launcher <impl> <n> <preload or ""> sets the array L
# to the command that starts n ranks with the layer preloaded (or bare).
launcher() {
  local impl=$1 n=$2 lib=$3
  if [ "$impl" = openmpi ]; then
    L=(mpirun.openmpi --allow-run-as-root --oversubscribe -n "$n")
    [ -n "$lib" ] && L+=(-x LD_PRELOAD="$lib")
  else
    L=(mpiexec.mpich -n "$n")
    [ -n "$lib" ] && L+=(-genv LD_PRELOAD "$lib")
  fi
}
