# bench/compare/ab_rows.py - reading the files of an interleaved A/B run
# (ab_common.sh: OUT/<variant>.<round>.txt, one launch each), shared by the
# summaries of copy_path_ab.sh, single_copy_ab.sh, single_copy_ops_ab.sh,
# tcp_knobs_ab.sh and by pair_ratios.py.
import glob, os, statistics


def launches(out):
    """(variant, round, path) of each launch's output; info.txt and the
    summaries have no round and are left out."""
    for path in sorted(glob.glob(os.path.join(out, "*.*.txt"))):
        v, r = os.path.basename(path)[:-4].rsplit(".", 1)
        yield v, r, path


def lines(path):
    """(config, op, fields) for each line of one launch's output: fields is
    the line split; config is the last '## config NAME' line before it
    (tcp_knobs_ab.sh) and op the last '# Collective: OP' (cohort-perf), None
    before any."""
    cfg = op = None
    for line in open(path, errors="replace"):
        f = line.split()
        if line.startswith("## config ") and len(f) > 2:
            cfg = f[2]
        elif line.startswith("# Collective: ") and len(f) > 2:
            op = f[2]
        else:
            yield cfg, op, f


def perf_row(op, f):
    """(size, mean us, p50 us, p99 us) when fields f are a row of cohort-perf
    --percentiles under a '# Collective:' line (size count type redop root
    time algbw busbw #wrong p50 p99 max), else None."""
    if op and len(f) >= 12 and f[0].isdigit():
        return int(f[0]), float(f[5]), float(f[9]), float(f[10])
    return None


def perf_cells(out, variants):
    """{(op, size): {variant: {round: (p50 us, p99 us)}}} of the cohort-perf
    --percentiles launches of an A/B run (the out-of-place rows: root -1 or 0),
    for the variants named (contract_ab.sh's summary, bench/compare/check)."""
    cell = {}
    for v, r, path in launches(out):
        if v not in variants:
            continue
        for _, op, f in lines(path):
            row = perf_row(op, f)
            if row and f[4] in ("-1", "0"):
                cell.setdefault((op, row[0]), {}).setdefault(v, {})[r] = row[2:]
    return cell


def median(xs):
    """The median of the values that are not None; None when there are none."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x):
    """A time for a table: "-" for None, 3 significant-ish digits."""
    return "-" if x is None else (f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:,.0f}")


# mpi_coll_bench's names of the collectives (its rows: NAME SIZE NP MEAN_US ...).
MPI_OPS = {"allreduce": "all_reduce", "allgather": "all_gather", "bcast": "broadcast"}
