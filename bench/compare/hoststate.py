# bench/compare/hoststate.py - host states from the probes of hoststate.sh
# (imported by the summaries of bench/mpi/run.sh and bench/torch/run.sh):
# xcore.txt has a line a launch, its key fields then the round trip before
# and after the launch (ns; "-": the probe got no answer).

def cls(ns):
    """The state of one probe: fast <90, mid 90-300, slow >=300 ns."""
    return "fast" if ns < 90 else "mid" if ns < 300 else "slow"


def read_xcore(path, nkey, key=tuple):
    """{key(the line's nkey key fields): (before, after)} from xcore.txt,
    launches without both probes left out; {} when there is no file."""
    xc = {}
    try:
        f = open(path)
    except FileNotFoundError:
        return xc
    with f:
        for line in f:
            x = line.split()
            if len(x) == nkey + 2 and "-" not in x[nkey:]:
                xc[key(x[:nkey])] = (float(x[nkey]), float(x[nkey + 1]))
    return xc
