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

__all__ = ["install", "uninstall", "installed", "checker", "EXIT_CODE", "WRAPPED"]

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
    "send", "recv", "isend", "irecv", "new_group",
)

_REDOPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM")

_state = None
_lock = threading.Lock()
_tls = threading.local()


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

    # -- groups ------------------------------------------------------------
    def default_pg(self):
        try:
            return self.c10d._get_default_group()
        except Exception:
            return None

    def group_for(self, pg):
        """The CheckGroup of a torch process group; None: do not check (not
        a member, not initialised, a single rank)."""
        if pg is None:
            pg = self.default_pg()
            if pg is None:
                return None
        try:
            return self.groups[pg]
        except KeyError:
            pass
        except TypeError:      # unhashable: not a process group
            return None
        cg = self._register(pg)
        self.groups[pg] = cg
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


def _dtype(t):
    try:
        return str(t.dtype).replace("torch.", "")
    except AttributeError:
        return type(t).__name__


def _numel(t):
    try:
        return int(t.numel())
    except Exception:
        return 0


def _shape(t):
    try:
        return "x".join(map(str, t.shape)) or "scalar"
    except Exception:
        return "?"


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
    return _numel(t), _dtype(t), st.redop(a.get("op")), -1, None, True


def _fp_broadcast(st, a, pg):
    t = a["tensor"]
    return _numel(t), _dtype(t), None, _root(st, a, pg, "src", "group_src", None), None, False


def _fp_reduce(st, a, pg):
    t = a["tensor"]
    return (_numel(t), _dtype(t), st.redop(a.get("op")),
            _root(st, a, pg, "dst", "group_dst", None), None, False)


def _fp_all_gather(st, a, pg):
    t = a["tensor"]
    return _numel(t), _dtype(t), None, -1, None, True


def _fp_into_tensor(st, a, pg):
    t = a["input_tensor"]
    return _numel(t), _dtype(t), None, -1, None, True


def _fp_gather(st, a, pg):
    t = a["tensor"]
    return _numel(t), _dtype(t), None, _root(st, a, pg, "dst", "group_dst", 0), None, False


def _fp_scatter(st, a, pg):
    t = a["tensor"]
    return _numel(t), _dtype(t), None, _root(st, a, pg, "src", "group_src", 0), None, False


def _fp_reduce_scatter(st, a, pg):
    t = a["output"]
    return _numel(t), _dtype(t), st.redop(a.get("op")), -1, None, True


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


def _wrap_collective(name, orig):
    sig = inspect.signature(orig)
    _bind = _binder(sig)
    fp = _FP[name]
    opname = _OPNAME.get(name, name)

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        st = _state
        if st is None or getattr(_tls, "depth", 0):
            return orig(*args, **kwargs)
        a = _bind(args, kwargs)
        if a is None:
            return orig(*args, **kwargs)  # torch reports the bad call
        pg = a.get("group")
        cg = st.group_for(pg)
        if cg is None:
            return orig(*args, **kwargs)
        count, tsig, redop, root, extra, synced = fp(st, a, pg)
        seq = st.chk.begin(cg, opname, count, sig=tsig, redop=redop, root=root, args=extra)
        # No wait for the neighbour's fingerprint before the backend: both
        # fingerprints are published before either rank enters it, so a
        # mismatch is found (here after the call, or by the monitor thread
        # within ms while this thread is blocked in the backend) before any
        # result reaches the program; a backend that fails on the mismatch
        # first is held (SIGABRT, hold_abort) or caught (an exception) until
        # the report is out.
        _tls.depth = 1  # torch's own nested calls (e.g. _all_gather_base) are not separate calls
        try:
            out = orig(*args, **kwargs)
        except Exception:
            _backend_failed(st, cg, seq)
            raise
        finally:
            _tls.depth = 0
        if a.get("async_op"):
            st.chk.end(cg, seq)
            return CheckedWork(out, cg, seq) if out is not None else out
        st.chk.end(cg, seq, synced=synced)
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
        if st is None or getattr(_tls, "depth", 0):
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
            pass
        return pg

    wrapper.__cohort_original__ = orig
    return wrapper


def _print_event(kind, status, text):
    # Every rank prints here, before any rank ends (the checker waits until
    # every rank's handler returned); with exit_code the checker then repeats
    # the report as "cohort check: ..." and ends the process.
    print(f"cohort.torch: {text}", file=sys.stderr, flush=True)


def install(world=None, *, exit_code=EXIT_CODE, stall_warn=None, timeout=None, handler=None):
    """Wraps torch.distributed's collectives with cohort's contract check.

    Every rank calls it once (before or after init_process_group, before
    new_group). world: a cohort Group (default: cohort.init(), which reads
    torchrun's or cohortrun's environment). exit_code: the process ends with
    it, after printing the report, on a mismatch, a lost peer or a timeout
    (None: raise ContractError instead - only safe when no rank can be stuck
    in the backend). stall_warn/timeout: seconds (None: COHORT_STALL_WARN /
    COHORT_TIMEOUT). handler(kind, status, text): reports (default: print to
    stderr). Returns the cohort.Checker.
    """
    global _state
    with _lock:
        if _state is not None:
            return _state.chk
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d
        own = world is None
        if own:
            world = cohort.init()
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
            elif name in ("send", "recv", "isend", "irecv"):
                w = _wrap_p2p(name, orig)
            else:
                w = _wrap_collective(name, orig)
            for mod in (dist, c10d):
                if getattr(mod, name, None) is not None:
                    st.originals[(mod, name)] = getattr(mod, name)
                    setattr(mod, name, w)
        _state = st
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

