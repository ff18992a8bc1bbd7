"""python3 -m cohort.torch.run SCRIPT [ARGS...]  (or -m MODULE [ARGS...])

Runs an unchanged torch.distributed program with cohort's contract check
installed (cohort.torch.install()) on this rank; start it under cohortrun or
torchrun like the program itself. COHORT_TORCH_CHECK=0 runs the program
without the check (same launch, e.g. for A/B comparisons); set on some ranks
only, the check is off on every rank (rank 0 says so) instead of a hang.
"""
import os
import runpy
import sys

USAGE = "usage: python3 -m cohort.torch.run SCRIPT [ARGS...] | -m MODULE [ARGS...]"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    as_module = argv[0] == "-m"
    if as_module:
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        target, rest = argv[1], argv[2:]
    else:
        target, rest = argv[0], argv[1:]
    import cohort.torch
    if os.environ.get("COHORT_TORCH_CHECK", "1") != "0":
        cohort.torch.install()
    else:
        cohort.torch.decline()  # the other ranks learn it: no check anywhere
    sys.argv = [target] + rest
    if as_module:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        runpy.run_path(target, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
