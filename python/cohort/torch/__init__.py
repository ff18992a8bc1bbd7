"""cohort.torch: cohort's contract check for unchanged torch.distributed programs.

    import cohort.torch
    cohort.torch.install()                 # every rank, before or after init_process_group
    dist.init_process_group("gloo")
    ...                                    # a mismatched collective ends the job with a report

or without editing the program: ``python3 -m cohort.torch.run train.py ARGS``
under cohortrun or torchrun. See docs/pytorch.md.

Before each call of torch.distributed's module-level collectives the rank's
fingerprint (group, call number, operation, dtype, element count, reduce op,
root as a group rank, the Python call site) goes to cohort.Checker, which
compares it with the neighbour's through cohort's own world group (shm on one
host, the store across hosts). A mismatch is reported on every rank and, since
a rank may be stuck inside the backend (gloo cannot be interrupted), the
process ends with exit code EXIT_CODE (86) after printing the report.
"""
import atexit
import functools
import inspect
import os
import sys
import threading

import cohort
from cohort._cohort import _torch_depth, _torch_set_depth, _torch_pass

__all__ = ["install", "uninstall", "installed", "checker", "decline", "EXIT_CODE", "WRAPPED"]

# The exit code of a rank ended by the check (a mismatch, a dead peer, a
# timeout): distinct from Python's 1 and from signals (128+n).
EXIT_CODE = 86

# Seconds a failing backend call (an exception, or an abort of the process:
# gloo on a size mismatch) waits for the call to be compared, so that a
# mismatch is reported as such on every rank instead of as the backend's error.
FAIL_WAIT = 3.0

# Module-level functions wrapped, when the installed torch has them.
WRAPPED = (
    "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
    "_all_gather_base", "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor",
    "_reduce_scatter_base", "all_to_all", "all_to_all_single", "barrier",
    "send", "recv", "isend", "irecv", "new_group", "destroy_process_group",
    "init_process_group",
)

_REDOPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM")

_state = None
_lock = threading.Lock()
# The check is off for this process's job (decline, or a rank that did):
# a later install() - the program's own, under cohort.torch.run - checks
# nothing instead of joining cohort's world a second time.
_off = False

# The hot calls' per-call path in C (Checker.torch_call, docs/pytorch.md):
# COHORT_TORCH_C=0 keeps the Python wrappers (comparisons, a fallback).
_C_KINDS = {n: "tensor" for n in (
    "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
    "_all_gather_base", "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor",
    "_reduce_scatter_base")}
_C_KINDS.update(barrier="barrier", send="send", recv="recv")


def installed():
    return _state is not None


def checker():
    """The cohort.Checker of install() (None before)."""
    return _state.chk if _state else None


class _State:
    def __init__(self, dist, c10d, world, chk, exit_code):
        self.dist, self.c10d, self.world, self.chk = dist, c10d, world, chk
        self.exit_code = exit_code
        self.groups = {}      # process group object -> CheckGroup or None (not a member)
        self.created = {}     # tuple of world ranks -> groups made with them (new_group)
        self.names = {}       # pg -> (name, creation index) from new_group
        self.originals = {}   # (module, name) -> function
        self.redop_names = {}
        self.class_originals = []  # (class, name, raw attribute) to put back
        self.default_cg = None     # the default group's CheckGroup, once known
        self.prewait = os.environ.get("COHORT_TORCH_PREWAIT", "1") != "0"
        self.c_calls = []          # the TorchCall objects (the C path), detached at uninstall

    # -- groups ------------------------------------------------------------
    def default_pg(self):
        try:
            return self.c10d._get_default_group()
        except Exception:
            return None

    def group_for(self, pg):
        """The CheckGroup of a torch process group; None: do not check (not
        a member, not initialised, a single rank)."""
        default = pg is None
        if default:
            pg = self.default_pg()
            if pg is None:
                return None
        try:
            cg = self.groups[pg]
        except KeyError:
            cg = self.groups[pg] = self._register(pg)
        except TypeError:      # unhashable: not a process group
            return None
        if default:
            self.default_cg = cg  # until destroy_process_group
        return cg

    def _ranks(self, pg):
        """The members' world ranks in group-rank order, or None."""
        m = getattr(self.c10d, "_pg_group_ranks", None)
        if m is not None and pg in m:
            g2l = m[pg]  # world rank -> group rank
            return [w for w, _ in sorted(g2l.items(), key=lambda kv: kv[1])]
        f = getattr(self.dist, "get_process_group_ranks", None)
        if f is not None:
            try:
                return list(f(pg))
            except Exception:
                return None
        return None

    def _register(self, pg):
        ranks = self._ranks(pg)
        if not ranks or len(ranks) < 2 or self.world.rank not in ranks:
            return None
        if max(ranks) >= self.world.size:
            raise cohort.InvalidArgumentError(
                f"cohort.torch: process group of world ranks {ranks} but the cohort world "
                f"has {self.world.size} ranks (is cohort.init() reading another job?)")
        if pg is self.default_pg():
            name, k = "default pg", 0
        else:
            name, k = self.names.get(pg, (None, None))
            if k is None:  # made before install(): numbered in first-use order
                k = self._count(ranks)
                name = f"pg of ranks {_span(ranks)} #{k}"
        gid = cohort.Checker.group_id(0, k, ranks)
        return self.chk.add_group(gid, ranks, name=name)

    def _count(self, ranks):
        key = tuple(ranks)
        n = self.created.get(key, 0) + 1
        self.created[key] = n
        return n

    def redop(self, op):
        if op is None:
            return "SUM"
        name = getattr(op, "name", None)
        if isinstance(name, str):
            return name
        try:
            return self.redop_names[op]
        except (KeyError, TypeError):
            pass
        R = self.dist.ReduceOp
        for n in _REDOPS:
            v = getattr(R, n, None)
            try:
                if v is not None and op == v:
                    try:
                        self.redop_names[op] = n
                    except TypeError:
                        pass
                    return n
            except Exception:
                continue
        return type(op).__name__

    def group_rank(self, pg, world_rank):
        if world_rank is None:
            return -1
        if pg is None:
            return world_rank
        try:
            return self.c10d.get_group_rank(pg, world_rank)
        except Exception:
            m = getattr(self.c10d, "_pg_group_ranks", {})
            return m.get(pg, {}).get(world_rank, world_rank)


def _span(ranks):
    return ",".join(map(str, ranks))


_DTYPES = {}  # torch.dtype -> "float32" (str() of a dtype costs more than the rest)


def _dtype(t):
    try:
        d = t.dtype
    except AttributeError:
        return type(t).__name__
    try:
        return _DTYPES[d]
    except KeyError:
        n = _DTYPES[d] = str(d).replace("torch.", "")
        return n


def _numel(t):
    try:
        return int(t.numel())
    except Exception:
        return 0


def _shape(t):
    """The shape as compared: None for 0-d and 1-d tensors (their element
    count says it all, and that keeps the common case free), else
    "shape 2x4"."""
    try:
        if t.dim() <= 1:
            return None
        return "shape " + "x".join(map(str, t.shape))
    except Exception:
        return None


# -- fingerprints ----------------------------------------------------------
# Each returns (count, sig, redop, root, args, synced). `a` holds the bound
# arguments (defaults not applied); root/peer arguments are world ranks
# unless given as group_src/group_dst.

def _root(st, a, pg, world_key, group_key, default):
    g = a.get(group_key)
    if g is not None:
        return int(g)
    w = a.get(world_key, default)
    return st.group_rank(pg, w) if w is not None else -1


def _fp_all_reduce(st, a, pg):
    t = a["tensor"]
    return _numel(t), _dtype(t), st.redop(a.get("op")), -1, _shape(t), True


def _fp_broadcast(st, a, pg):
    t = a["tensor"]
    return (_numel(t), _dtype(t), None, _root(st, a, pg, "src", "group_src", None), _shape(t),
            False)


def _fp_reduce(st, a, pg):
    t = a["tensor"]
    return (_numel(t), _dtype(t), st.redop(a.get("op")),
            _root(st, a, pg, "dst", "group_dst", None), _shape(t), False)


def _fp_all_gather(st, a, pg):
    t = a["tensor"]
    return _numel(t), _dtype(t), None, -1, _shape(t), True


def _fp_into_tensor(st, a, pg):
    t = a["input_tensor"]
    return _numel(t), _dtype(t), None, -1, _shape(t), True


def _fp_gather(st, a, pg):
    t = a["tensor"]
    return (_numel(t), _dtype(t), None, _root(st, a, pg, "dst", "group_dst", 0), _shape(t),
            False)


def _fp_scatter(st, a, pg):
    t = a["tensor"]
    return (_numel(t), _dtype(t), None, _root(st, a, pg, "src", "group_src", 0), _shape(t),
            False)


def _fp_reduce_scatter(st, a, pg):
    t = a["output"]
    return _numel(t), _dtype(t), st.redop(a.get("op")), -1, _shape(t), True


def _fp_all_to_all(st, a, pg):
    lst = a["input_tensor_list"]
    t = lst[0] if lst else None
    return len(lst), _dtype(t), None, -1, None, True


def _fp_all_to_all_single(st, a, pg):
    t = a["input"]
    if a.get("input_split_sizes") is None and a.get("output_split_sizes") is None:
        return _numel(t), _dtype(t), None, -1, None, True
    # uneven splits: the per-rank amounts differ by design
    return 0, _dtype(t), None, -1, "splits", True


def _fp_barrier(st, a, pg):
    return 0, "", None, -1, None, True


_FP = {
    "all_reduce": _fp_all_reduce, "broadcast": _fp_broadcast, "reduce": _fp_reduce,
    "all_gather": _fp_all_gather, "all_gather_into_tensor": _fp_into_tensor,
    "_all_gather_base": _fp_into_tensor, "gather": _fp_gather, "scatter": _fp_scatter,
    "reduce_scatter": _fp_reduce_scatter, "reduce_scatter_tensor": _fp_reduce_scatter,
    "_reduce_scatter_base": _fp_reduce_scatter, "all_to_all": _fp_all_to_all,
    "all_to_all_single": _fp_all_to_all_single, "barrier": _fp_barrier,
}
# the names in reports (torch's deprecated aliases report as what they do)
_OPNAME = {"_all_gather_base": "all_gather_into_tensor",
           "_reduce_scatter_base": "reduce_scatter_tensor"}


def _backend_failed(st, cg, seq):
    """The backend raised in call seq: if the call was a mismatch, the
    report wins (on every rank; with an exit code the process ends here);
    else the backend's error goes on."""
    try:
        st.chk.wait(cg, seq, timeout=FAIL_WAIT)
    except cohort.CohortTimeoutError:
        return
    except cohort.Error:
        _await_exit(st)
        raise


def _await_exit(st):
    """The checker failed: with an exit code its monitor thread ends the
    process once every rank printed the report (bounded, 5 s)."""
    if st.exit_code is None:
        return
    import time
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        time.sleep(0.05)


class CheckedWork:
    """The Work of an async_op=True call: wait() returns once the call was
    compared (ContractError, or the job ends, otherwise). Everything else is
    the backend's Work."""

    __slots__ = ("_work", "_cg", "_seq", "_done")

    def __init__(self, work, cg, seq):
        self._work, self._cg, self._seq, self._done = work, cg, seq, False

    def wait(self, *args, **kwargs):
        try:
            r = self._work.wait(*args, **kwargs)
        except Exception:
            st = _state
            if st is not None and not self._done:
                _backend_failed(st, self._cg, self._seq)
            raise
        if not self._done:
            st = _state
            if st is not None:
                st.chk.wait(self._cg, self._seq)
            self._done = True
        return r

    def __getattr__(self, name):
        return getattr(self._work, name)


class _P2PWork:
    """isend/irecv: wait() is published as a wait for the peer (stall and
    deadlock reports)."""

    __slots__ = ("_work", "_cg", "_peer", "_tag", "_send", "_op")

    def __init__(self, work, cg, peer, tag, send, op):
        self._work, self._cg, self._peer = work, cg, peer
        self._tag, self._send, self._op = tag, send, op

    def wait(self, *args, **kwargs):
        st = _state
        if st is None:
            return self._work.wait(*args, **kwargs)
        st.chk.wait_begin(self._cg, self._peer, self._op, tag=self._tag, is_send=self._send)
        try:
            return self._work.wait(*args, **kwargs)
        finally:
            st.chk.wait_end()

    def __getattr__(self, name):
        return getattr(self._work, name)


def _binder(sig):
    """A fast inspect.Signature.bind for the calls torch's functions get:
    {name: value} of the arguments given, or None when they do not fit."""
    params = list(sig.parameters.values())
    names = [p.name for p in params]
    simple = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
    npos = sum(p.kind == p.POSITIONAL_OR_KEYWORD for p in params)
    known = frozenset(names)

    def bind(args, kwargs):
        if simple and len(args) <= npos:
            a = dict(zip(names, args))
            for k in kwargs:
                if k not in known or k in a:
                    return None
            a.update(kwargs)
            return a
        try:
            return sig.bind(*args, **kwargs).arguments
        except TypeError:
            return None
    return bind


# The tensor fingerprints read in C (Checker.begin_tensor): name ->
# (tensor argument, takes a reduce op, root: (world key, group key, default)
# or None, synchronises). The same fields as _FP's functions give.
_TENSOR_FP = {
    "all_reduce": ("tensor", True, None, True),
    "broadcast": ("tensor", False, ("src", "group_src", None), False),
    "reduce": ("tensor", True, ("dst", "group_dst", None), False),
    "all_gather": ("tensor", False, None, True),
    "all_gather_into_tensor": ("input_tensor", False, None, True),
    "_all_gather_base": ("input_tensor", False, None, True),
    "gather": ("tensor", False, ("dst", "group_dst", 0), False),
    "scatter": ("tensor", False, ("src", "group_src", 0), False),
    "reduce_scatter": ("output", True, None, True),
    "reduce_scatter_tensor": ("output", True, None, True),
    "_reduce_scatter_base": ("output", True, None, True),
}


def _c_call(st, name, orig, slow):
    """The per-call path in C for a hot call (Checker.torch_call), or None
    where it does not apply (COHORT_TORCH_C=0, a signature it cannot bind):
    the same binding, fingerprint, call site and error paths as the Python
    wrapper `slow`, which it hands every call it cannot read itself (before
    anything is begun)."""
    kind = _C_KINDS.get(name)
    if kind is None or os.environ.get("COHORT_TORCH_C", "1") == "0":
        return None
    try:
        params = list(inspect.signature(orig).parameters.values())
    except (TypeError, ValueError):
        return None
    if len(params) > 16 or not all(
            p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        return None
    names = tuple(p.name for p in params)
    npos = sum(p.kind == p.POSITIONAL_OR_KEYWORD for p in params)
    if any(p.kind == p.POSITIONAL_OR_KEYWORD for p in params[npos:]):
        return None  # positional parameters after keyword-only ones: not a Python signature
    roles = {"group": "group", "async_op": "async_op"}
    root_default = -1
    synced = False
    if kind == "tensor":
        tkey, has_op, rootspec, synced = _TENSOR_FP[name]
        roles["tensor"] = tkey
        if has_op:
            roles["op"] = "op"
        if rootspec is not None:
            roles["root"], roles["group_root"] = rootspec[0], rootspec[1]
            if rootspec[2] is not None:
                root_default = int(rootspec[2])
    elif kind == "barrier":
        synced = True
    else:
        peer = "dst" if kind == "send" else "src"
        roles.update(root=peer, group_root="group_" + peer, tag="tag")
    indices = {r: names.index(k) for r, k in roles.items() if k in names}
    if kind == "tensor" and "tensor" not in indices:
        return None
    import torch
    c = st.chk.torch_call(orig, slow, st, kind, _OPNAME.get(name, name), names, npos, indices,
                          root_default, synced, st.prewait, torch.Tensor, CheckedWork,
                          _backend_failed)
    functools.update_wrapper(c, orig)
    return c


def _wrap_collective(name, orig):
    sig = inspect.signature(orig)
    _bind = _binder(sig)
    params = list(sig.parameters.values())
    names = tuple(p.name for p in params)
    # all positional, as many as the positional parameters: bound by zip
    npos = (sum(p.kind == p.POSITIONAL_OR_KEYWORD for p in params)
            if all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params) else -1)
    fp = _FP[name]
    opname = _OPNAME.get(name, name)
    tkey, has_op, rootspec, tsynced = _TENSOR_FP.get(name, (None, False, None, False))
    import torch
    Tensor = torch.Tensor

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        # The per-call path (docs/pytorch.md, Cost): every step here costs
        # several us in a gloo program, where other threads run between
        # calls and the interpreter's caches are cold.
        st = _state
        if st is None or _torch_depth():
            return orig(*args, **kwargs)
        if not kwargs and len(args) <= npos:
            a = dict(zip(names, args))
        else:
            a = _bind(args, kwargs)
            if a is None:
                return orig(*args, **kwargs)  # torch reports the bad call
        pg = a.get("group")
        cg = st.default_cg if pg is None and st.default_cg is not None else st.group_for(pg)
        if cg is None:
            return orig(*args, **kwargs)
        chk = st.chk
        seq = None
        if tkey is not None:
            t = a.get(tkey)
            if isinstance(t, Tensor):
                if has_op:
                    op = a.get("op")
                    redop = "SUM" if op is None else st.redop(op)
                else:
                    redop = None
                root = _root(st, a, pg, *rootspec) if rootspec is not None else -1
                seq = chk.begin_tensor(cg, opname, t, redop, root)
                synced = tsynced
        if seq is None:
            count, tsig, redop, root, extra, synced = fp(st, a, pg)
            seq = chk.begin(cg, opname, count, tsig, 0, redop, root, extra)
        # No wait for the neighbour's fingerprint before the backend: both
        # fingerprints are published before either rank enters it, so a
        # mismatch is found (here after the call, or by the monitor thread
        # within ms while this thread is blocked in the backend) before any
        # result reaches the program; a backend that fails on the mismatch
        # first is held (SIGABRT, hold_abort) or caught (an exception) until
        # the report is out.
        async_op = a.get("async_op")
        how = 1 if synced else 0  # Checker.finish: end(synced)
        if synced and st.prewait and not async_op:
            if cg.mutual:
                # Two members on one host compare each other: once the
                # backend returned, both fingerprints are published, and
                # waiting for the neighbour's there compares this call with
                # every member's before the result reaches the program -
                # the same guarantee without a hand-off before the backend.
                how = 2  # Checker.finish: wait, then end
            else:
                # A blocking collective completes only when every member
                # entered it: the member that finds its predecessor
                # different does not enter, so no member gets a result
                # from a mismatched call (without this wait the others
                # may, for the ms until the monitor ends them).
                # COHORT_TORCH_PREWAIT=0 trades that for less time per
                # call (docs/pytorch.md).
                chk.wait(cg, seq)
        _torch_set_depth(1)  # torch's own nested calls (e.g. _all_gather_base) are not separate calls
        try:
            out = orig(*args, **kwargs)
        except Exception:
            _backend_failed(st, cg, seq)
            raise
        finally:
            _torch_set_depth(0)
        if async_op:
            chk.end(cg, seq)
            return CheckedWork(out, cg, seq) if out is not None else out
        chk.finish(cg, seq, how)
        return out

    wrapper.__cohort_original__ = orig
    return wrapper


def _wrap_p2p(name, orig):
    _bind = _binder(inspect.signature(orig))
    is_send = name in ("send", "isend")
    peer_key = "dst" if is_send else "src"
    nonblocking = name.startswith("i")

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        st = _state
        if st is None or _torch_depth():
            return orig(*args, **kwargs)
        a = _bind(args, kwargs)
        if a is None:
            return orig(*args, **kwargs)
        pg = a.get("group")
        cg = st.group_for(pg)
        peer = a.get(peer_key)  # a world rank; None: any source (recv)
        gpeer = a.get("group_" + peer_key)
        if peer is None and gpeer is not None:
            ranks = st._ranks(pg if pg is not None else st.default_pg()) or []
            peer = ranks[gpeer] if 0 <= gpeer < len(ranks) else None
        peer = -1 if peer is None else int(peer)
        tag = int(a.get("tag", 0) or 0)
        if nonblocking:
            out = orig(*args, **kwargs)
            return _P2PWork(out, cg, peer, tag, is_send, name) if out is not None else out
        st.chk.wait_begin(cg, peer, name, tag=tag, is_send=is_send)
        try:
            return orig(*args, **kwargs)
        finally:
            st.chk.wait_end()

    wrapper.__cohort_original__ = orig
    return wrapper


def _wrap_new_group(orig):
    sig = inspect.signature(orig)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        pg = orig(*args, **kwargs)
        st = _state
        if st is None:
            return pg
        try:
            a = sig.bind(*args, **kwargs).arguments
        except TypeError:
            return pg
        ranks = a.get("ranks")
        ranks = list(range(st.world.size)) if ranks is None else sorted(int(r) for r in ranks)
        # Counted per member set, on members and non-members alike: members
        # agree on the number even with use_local_synchronization.
        k = st._count(ranks)
        try:
            st.names[pg] = (f"new_group([{_span(ranks)}]) #{k}", k)
        except TypeError:
            return pg
        try:
            st.group_for(pg)  # registered now on every member (see _wrap_init)
        except cohort.Error:
            raise
        except Exception:
            pass
        return pg

    wrapper.__cohort_original__ = orig
    return wrapper



# -- calls that do not go through the module-level functions ----------------
# ProcessGroup methods called from Python (pg.allreduce([t]), what some
# libraries do), torch.distributed._functional_collectives, and DDP's
# gradient all-reduces (the C++ reducer calls the process group directly:
# they are checked through a DDP communication hook that does what the
# reducer's built-in path does). Calls torch makes inside a wrapped call are
# skipped (_torch_depth()), so nothing is counted twice.

def _first(x):
    """The first tensor of a tensor, a list of tensors or a list of lists."""
    while isinstance(x, (list, tuple)):
        if not x:
            return None
        x = x[0]
    return x


def _opts(args, kwargs):
    for v in list(args) + list(kwargs.values()):
        if hasattr(v, "reduceOp") or hasattr(v, "rootRank") or hasattr(v, "timeout"):
            if not isinstance(v, (int, float, list, tuple)) and not hasattr(v, "numel"):
                return v
    return None


def _pg_redop(st, args, kwargs, opts):
    if opts is not None and hasattr(opts, "reduceOp"):
        return st.redop(opts.reduceOp)
    op = kwargs.get("op")
    if op is None:
        for v in args[1:]:
            if not isinstance(v, (int, list, tuple)) and not hasattr(v, "numel") \
                    and v is not opts and v is not None:
                op = v
                break
    return st.redop(op)


def _pg_root(args, kwargs, opts, pos):
    if opts is not None and hasattr(opts, "rootRank"):
        return int(opts.rootRank)
    r = kwargs.get("root")
    if r is None and len(args) > pos and isinstance(args[pos], int):
        r = args[pos]
    return -1 if r is None else int(r)


# name: (report name, how to fingerprint, synced)
_PG_METHODS = {
    "allreduce": "all_reduce", "broadcast": "broadcast", "reduce": "reduce",
    "allgather": "all_gather", "_allgather_base": "all_gather_into_tensor",
    "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter_tensor",
    "gather": "gather", "scatter": "scatter", "alltoall": "all_to_all",
    "alltoall_base": "all_to_all_single", "barrier": "barrier",
}


def _pg_fp(st, name, args, kwargs):
    """(count, sig, redop, root, args) of a ProcessGroup method call (group
    ranks for roots, as the methods take them)."""
    opts = _opts(args, kwargs)
    a0 = args[0] if args else None
    if name in ("allreduce",):
        t = _first(a0)
        return _numel(t), _dtype(t), _pg_redop(st, args, kwargs, opts), -1, _shape(t)
    if name == "broadcast":
        t = _first(a0)
        return _numel(t), _dtype(t), None, _pg_root(args, kwargs, opts, 1), _shape(t)
    if name == "reduce":
        t = _first(a0)
        return (_numel(t), _dtype(t), _pg_redop(st, args, kwargs, opts),
                _pg_root(args, kwargs, opts, 1), _shape(t))
    if name in ("allgather", "_allgather_base", "gather"):
        t = _first(args[1]) if len(args) > 1 else None
        root = _pg_root(args, kwargs, opts, 99) if name == "gather" else -1
        return _numel(t), _dtype(t), None, root, _shape(t)
    if name == "scatter":
        t = _first(a0)
        return _numel(t), _dtype(t), None, _pg_root(args, kwargs, opts, 99), _shape(t)
    if name in ("reduce_scatter", "_reduce_scatter_base"):
        t = _first(a0)
        return _numel(t), _dtype(t), _pg_redop(st, args, kwargs, opts), -1, _shape(t)
    if name == "alltoall":
        lst = args[1] if len(args) > 1 else []
        return len(lst), _dtype(_first(lst)), None, -1, None
    if name == "alltoall_base":
        t = args[1] if len(args) > 1 else None
        if any(len(x) for x in args[2:4] if isinstance(x, (list, tuple))):
            return 0, _dtype(t), None, -1, "splits"
        return _numel(t), _dtype(t), None, -1, None
    return 0, "", None, -1, None  # barrier


def _wrap_pg_method(name, orig):
    opname = _PG_METHODS[name]

    @functools.wraps(orig)
    def method(self, *args, **kwargs):
        st = _state
        if st is None or _torch_depth():
            return orig(self, *args, **kwargs)
        try:
            cg = st.group_for(self)
            fpv = _pg_fp(st, name, args, kwargs) if cg is not None else None
        except Exception:
            cg = None
        if cg is None:
            return orig(self, *args, **kwargs)
        count, tsig, redop, root, extra = fpv
        seq = st.chk.begin(cg, opname, count, sig=tsig, redop=redop, root=root, args=extra)
        _torch_set_depth(1)
        try:
            out = orig(self, *args, **kwargs)
        except Exception:
            _backend_failed(st, cg, seq)
            raise
        finally:
            _torch_set_depth(0)
        st.chk.end(cg, seq)
        # the method returns a Work the program waits on: compared by then
        return CheckedWork(out, cg, seq) if out is not None else out

    method.__cohort_original__ = orig
    return method


# torch.distributed._functional_collectives: name -> (report name, fingerprint)
def _fc_fp(st, name, a):
    t = a.get("self")
    if t is None:
        t = a.get("inputs")
    if isinstance(t, (list, tuple)):
        lst = t
        t = _first(lst)
        return len(lst), _dtype(t), _fc_redop(a), -1, None
    root = int(a["src"]) if "src" in a else -1
    extra = _shape(t)
    if name == "all_to_all_single" and (a.get("output_split_sizes") or a.get("input_split_sizes")):
        return 0, _dtype(t), None, -1, "splits"
    for k in ("gather_dim", "scatter_dim"):
        if k in a:
            extra = f"{k} {a[k]}" + (f", {extra}" if extra else "")
    return _numel(t), _dtype(t), _fc_redop(a), root, extra


def _fc_redop(a):
    r = a.get("reduceOp")
    return str(r).upper() if r is not None else None


_FC_NAMES = ("all_reduce", "all_gather_tensor", "all_gather_tensor_autograd",
             "reduce_scatter_tensor", "reduce_scatter_tensor_autograd", "all_to_all_single",
             "all_to_all_single_autograd", "broadcast", "all_reduce_coalesced",
             "all_gather_into_tensor_coalesced", "reduce_scatter_tensor_coalesced")


def _wrap_functional(fc, name, orig):
    _bind = _binder(inspect.signature(orig))
    opname = "functional " + name

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        st = _state
        if st is None or _torch_depth():
            return orig(*args, **kwargs)
        a = _bind(args, kwargs)
        if a is None or "group" not in a:
            return orig(*args, **kwargs)
        try:
            gname = fc._resolve_group_name(a["group"], a.get("tag", ""))
            pg = st.c10d._resolve_process_group(gname)
            cg = st.group_for(pg)
        except Exception:
            cg = None
        if cg is None:
            return orig(*args, **kwargs)
        if "src" in a:  # a world rank, as dist.broadcast takes it
            a = dict(a)
            a["src"] = st.group_rank(pg, int(a["src"]))
        count, tsig, redop, root, extra = _fc_fp(st, name, a)
        seq = st.chk.begin(cg, opname, count, sig=tsig, redop=redop, root=root, args=extra)
        _torch_set_depth(1)
        try:
            out = orig(*args, **kwargs)
        except Exception:
            _backend_failed(st, cg, seq)
            raise
        finally:
            _torch_set_depth(0)
        # asynchronous (the result waits when read): compared at this rank's
        # next call or by the monitor within ms
        st.chk.end(cg, seq)
        return out

    wrapper.__cohort_original__ = orig
    return wrapper


# DDP: the reducer's gradient all-reduces, through a communication hook.
def _ddp_hook(ddp, bucket):
    """What the reducer does without a hook (torch 2.x): multiply the bucket
    by 1/world size (the reducer multiplies while copying the gradients in;
    bit-identical), all-reduce it (SUM) - checked like a dist.all_reduce,
    compared before the future completes, i.e. before DDP copies the result
    into the gradients."""
    st = _state
    buf = bucket.buffer()
    pg = ddp.process_group
    buf.mul_(1.0 / pg.size())
    orig = getattr(_state_orig("all_reduce"), "__cohort_original__", None) or _state_orig(
        "all_reduce")
    cg = st.group_for(pg) if st is not None else None
    if cg is None:
        return orig(buf, group=pg, async_op=True).get_future().then(lambda f: f.value()[0])
    seq = st.chk.begin(cg, "all_reduce", _numel(buf), sig=_dtype(buf), redop="SUM", root=-1,
                       file=f"<DDP gradient bucket {bucket.index()}>", line=0)
    _torch_set_depth(1)
    try:
        work = orig(buf, group=pg, async_op=True)
    except Exception:
        _backend_failed(st, cg, seq)
        raise
    finally:
        _torch_set_depth(0)
    st.chk.end(cg, seq)

    def compared(fut):
        r = fut.value()[0]
        s2 = _state
        if s2 is not None:
            s2.chk.wait(cg, seq)
        return r
    return work.get_future().then(compared)


def _user_hook(hook):
    """A program's own DDP communication hook: the bucket (index, count,
    dtype) is compared; the hook's own collectives go to the backend as the
    hook makes them."""
    @functools.wraps(hook)
    def checked(state, bucket):
        st = _state
        ddp = getattr(checked, "_cohort_ddp", None)
        cg = st.group_for(ddp.process_group) if st is not None and ddp is not None else None
        if cg is not None:
            buf = bucket.buffer()
            seq = st.chk.begin(cg, "ddp_comm_hook", _numel(buf), sig=_dtype(buf),
                               args=f"bucket {bucket.index()}",
                               file=f"<DDP gradient bucket {bucket.index()}>", line=0)
            st.chk.end(cg, seq)
        _torch_set_depth(1)
        try:
            return hook(state, bucket)
        finally:
            _torch_set_depth(0)
    return checked


def _state_orig(name):
    st = _state
    f = getattr(st.dist, name) if st is not None else None
    return getattr(f, "__cohort_original__", f)


def _patch_ddp(st):
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
    except Exception:
        return
    if not hasattr(DDP, "register_comm_hook"):
        return
    forward = DDP.forward
    register = DDP.register_comm_hook
    builtin = getattr(DDP, "_register_builtin_comm_hook", None)
    fused = getattr(DDP, "_register_fused_optim", None)

    @functools.wraps(forward)
    def ddp_forward(self, *args, **kwargs):
        if not getattr(self, "_cohort_hook", False) and _state is not None:
            self._cohort_hook = True
            join = getattr(self, "_join_config", None)
            # Under DDP.join() the reducer divides by the ranks still in; a
            # hook cannot: leave that model's reducer alone.
            if not (join is not None and getattr(join, "enable", False)):
                register(self, self, _ddp_hook)
        return forward(self, *args, **kwargs)

    @functools.wraps(register)
    def ddp_register(self, state, hook):
        self._cohort_hook = True
        h = _user_hook(hook)
        h._cohort_ddp = self
        return register(self, state, h)

    def mark(f):
        @functools.wraps(f)
        def g(self, *a, **k):
            self._cohort_hook = True
            return f(self, *a, **k)
        return g

    st.class_originals.append((DDP, "forward", forward))
    st.class_originals.append((DDP, "register_comm_hook", register))
    DDP.forward = ddp_forward
    DDP.register_comm_hook = ddp_register
    for nm, f in (("_register_builtin_comm_hook", builtin), ("_register_fused_optim", fused)):
        if f is not None:
            st.class_originals.append((DDP, nm, f))
            setattr(DDP, nm, mark(f))


def _patch_more(st):
    """torch 2.x: ProcessGroup methods, functional collectives, DDP."""
    PG = getattr(st.c10d, "ProcessGroup", None)
    if PG is not None and hasattr(PG, "_get_backend"):  # torch 2.x (1.13: see docs)
        for name in _PG_METHODS:
            f = PG.__dict__.get(name)
            if f is None:
                continue
            st.class_originals.append((PG, name, f))
            # torch's own dist.* calls reach these inside a checked call: the
            # pass-through to the original is in C (no Python frame per call)
            bound = getattr(PG, name)
            setattr(PG, name, _torch_pass(bound, _wrap_pg_method(name, bound)))
    try:
        import torch.distributed._functional_collectives as fc
    except Exception:
        fc = None
    if fc is not None and hasattr(st.c10d, "_resolve_process_group"):
        for name in _FC_NAMES:
            f = getattr(fc, name, None)
            if f is None:
                continue
            st.originals[(fc, name)] = f
            setattr(fc, name, _wrap_functional(fc, name, f))
    if PG is not None and hasattr(PG, "_get_backend"):
        _patch_ddp(st)

def _wrap_init(orig):
    # The default group is registered with the checker at once, so that every
    # member has it before the first call: a member that has not made any
    # call yet still sends its (empty) history to a report.
    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        out = orig(*args, **kwargs)
        st = _state
        if st is not None:
            st.default_cg = None
            st.group_for(None)
        return out

    wrapper.__cohort_original__ = orig
    return wrapper


def _wrap_destroy(orig):
    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        st = _state
        if st is not None:
            st.default_cg = None  # a later init_process_group makes another default group
        return orig(*args, **kwargs)

    wrapper.__cohort_original__ = orig
    return wrapper


def _print_event(kind, status, text):
    # Every rank prints here, before any rank ends (the checker waits until
    # every rank's handler returned); with exit_code the checker then repeats
    # the report as "cohort check: ..." and ends the process.
    print(f"cohort.torch: {text}", file=sys.stderr, flush=True)


def _ranks_without_check(world, on):
    """Every rank of the world says whether it runs with the check (one
    all_gather); the ranks that do not. COHORT_TORCH_CHECK is a job setting,
    but a wrapper can set it per rank: a rank that ran the program without
    joining left the others waiting for it to join until COHORT_TIMEOUT,
    while it waited for them in gloo (session 38: 3 ranks, 0 on one)."""
    import array
    send = array.array("i", [1 if on else 0])
    recv = array.array("i", [0] * world.size)
    world.all_gather(send, recv)
    return [r for r in range(world.size) if not recv[r]]


def _say_off(world, off):
    if world.rank != 0 or not off or len(off) == world.size:
        return
    on = next(r for r in range(world.size) if r not in off)
    shown = ", ".join(map(str, off[:8])) + (f" and {len(off) - 8} more" if len(off) > 8 else "")
    print(f"cohort.torch: rank 0: the check is off for this job: COHORT_TORCH_CHECK=0 on "
          f"rank{'s' if len(off) > 1 else ''} {shown} but not on rank {on} (set it for the "
          f"whole job, not per rank)", file=sys.stderr, flush=True)


def decline():
    """What ``python3 -m cohort.torch.run`` does with COHORT_TORCH_CHECK=0:
    joins cohort's world only to tell the other ranks that this one runs
    without the check (so that, where some rank set it alone, the check is
    off for the whole job instead of a hang), then leaves it. Where cohort
    cannot start here the program runs all the same."""
    global _off
    with _lock:
        if _off or _state is not None:
            return
        _off = True
    try:
        world = cohort.init()
    except cohort.Error:
        return
    try:
        _say_off(world, _ranks_without_check(world, False))
    except cohort.Error:
        pass
    finally:
        world.finalize()


def install(world=None, *, exit_code=EXIT_CODE, stall_warn=None, timeout=None, handler=None):
    """Wraps torch.distributed's collectives with cohort's contract check.

    Every rank calls it once (before or after init_process_group, before
    new_group). Returns None, checking nothing, where a rank of the job
    runs without the check (cohort.torch.run with COHORT_TORCH_CHECK=0 on
    that rank: decline); rank 0 says so on stderr. Once so, later calls in
    the process return None too. world: a cohort Group (default: cohort.init(), which reads
    torchrun's or cohortrun's environment). exit_code: the process ends with
    it, after printing the report, on a mismatch, a lost peer or a timeout
    (None: raise ContractError instead - only safe when no rank can be stuck
    in the backend). stall_warn/timeout: seconds (None: COHORT_STALL_WARN /
    COHORT_TIMEOUT). handler(kind, status, text): reports (default: print to
    stderr). Returns the cohort.Checker.
    """
    global _state, _off
    with _lock:
        if _state is not None:
            return _state.chk
        if _off:
            return None
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d
        own = world is None
        if own:
            world = cohort.init()
            # a rank of python3 -m cohort.torch.run with COHORT_TORCH_CHECK=0
            # says so here (decline): then nobody checks
            try:
                off = _ranks_without_check(world, True)
            except BaseException:
                world.finalize()
                raise
            if off:
                _say_off(world, off)
                world.finalize()
                _off = True
                return None
        try:
            chk = cohort.Checker(world, handler=handler or _print_event, exit_code=exit_code,
                                 stall_warn=stall_warn, timeout=timeout)
        except BaseException:
            if own:
                world.finalize()
            raise
        if exit_code is not None:
            chk.hold_abort(FAIL_WAIT)
        st = _State(dist, c10d, world, chk, exit_code)
        st.own_world = own
        for name in WRAPPED:
            orig = getattr(c10d, name, None) or getattr(dist, name, None)
            if orig is None:
                continue
            orig = getattr(orig, "__cohort_original__", orig)
            if name == "new_group":
                w = _wrap_new_group(orig)
            elif name == "destroy_process_group":
                w = _wrap_destroy(orig)
            elif name == "init_process_group":
                w = _wrap_init(orig)
            elif name in ("send", "recv", "isend", "irecv"):
                w = _wrap_p2p(name, orig)
            else:
                w = _wrap_collective(name, orig)
            if name in _C_KINDS:
                cw = _c_call(st, name, orig, w)
                if cw is not None:
                    st.c_calls.append(cw)
                    w = cw
            for mod in (dist, c10d):
                if getattr(mod, name, None) is not None:
                    st.originals[(mod, name)] = getattr(mod, name)
                    setattr(mod, name, w)
        _patch_more(st)
        _state = st
        st.group_for(None)  # when init_process_group ran before install()
        atexit.register(_at_exit)
        return chk


def uninstall(timeout=60):
    """Puts torch.distributed's functions back, runs the checker's closing
    check (every rank: collective) and finalizes cohort's world."""
    global _state
    with _lock:
        st = _state
        if st is None:
            return
        for (mod, name), f in st.originals.items():
            setattr(mod, name, f)
        for cls, name, f in reversed(st.class_originals):
            setattr(cls, name, f)
        for c in st.c_calls:
            c.detach()  # a reference the program kept goes straight to torch now
        _state = None
        try:
            st.chk.close(timeout=timeout)
        finally:
            st.chk.destroy()
            if st.own_world:
                st.world.finalize()


def _at_exit():
    try:
        uninstall()
    except cohort.Error as e:
        print(f"cohort.torch: at exit: {e}", file=sys.stderr, flush=True)

