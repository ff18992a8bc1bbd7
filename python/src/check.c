/*
 * check.c - cohort.Checker: the contract check for collectives that cohort
 * does not carry (include/cohort_check.h, docs/check.md), for front ends
 * written in Python (the torch.distributed wrapper): "this rank is about to
 * make call K of external group G with fingerprint F; tell every member if
 * they disagree".
 *
 * The checker borrows the world Group (which cannot be finalized while the
 * checker lives). The handler runs on the checker's monitor thread: a
 * Python callable is called with the GIL; exit_code ends the process from C
 * (report on stderr) after a fatal event, which works even while the main
 * thread holds the GIL inside a backend call that never returns.
 */
#include "cohort_py.h"
#include <structmember.h>

#include <cohort_check.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    PyObject_HEAD
    cohort_check *c;
    PyObject *group;     /* the world Group (borrowed by the checker) */
    PyObject *handler;   /* callable or NULL: reports */
    PyObject *abort;     /* callable or NULL: ends the backend after every rank reported */
    int exit_code;       /* < 0: none */
    PyObject *names;     /* op/redop str -> bytes kept for the checker's life */
    PyObject *groups;    /* CheckGroup objects alive (id -> CheckGroup) */
    PyObject *dtypes;    /* torch dtype -> bytes name ("float32"), for begin_tensor */
    int inflight;
} CheckerObject;

typedef struct {
    PyObject_HEAD
    cohort_check_group *grp; /* NULL once removed */
    CheckerObject *owner;
    unsigned long long id;
    int size, index;
} CheckGroupObject;

static PyTypeObject Checker_Type, CheckGroup_Type;

/* interned at module init (begin_tensor) */
static PyObject *cpy_str_shape, *cpy_str_dtype, *cpy_str_torch_prefix, *cpy_str_empty;

/* FNV-1a: the hash of a readable signature / argument string, when the
 * caller gives no hash of its own. Stable across processes. */
static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h | 1; /* 0 means "none" */
}

static void call_py(PyObject *fn, const cohort_check_event *ev)
{
    PyGILState_STATE gs = PyGILState_Ensure();
    PyObject *r = PyObject_CallFunction(fn, "iis", ev->kind, (int)ev->status,
                                        ev->text ? ev->text : "");
    if (!r)
        PyErr_WriteUnraisable(fn);
    Py_XDECREF(r);
    PyGILState_Release(gs);
}

/* Reports (every stall warning, the first fatal event) on every rank. */
static void on_event(void *arg, const cohort_check_event *ev)
{
    CheckerObject *self = arg;
    if (self->handler)
        call_py(self->handler, ev);
}

/* After a fatal event, once every rank reported it (bounded): end the job
 * the backend's way. */
static void on_abort(void *arg, const cohort_check_event *ev)
{
    CheckerObject *self = arg;
    if (self->abort)
        call_py(self->abort, ev);
    if (self->exit_code >= 0) {
        /* The backend may never return: end the process from C. */
        dprintf(2, "cohort check: %s\n", ev->text ? ev->text : "");
        _exit(self->exit_code);
    }
}

/* ---- holding an abort until the report is out ----
 * A backend may end the process on a mismatch before the check has compared
 * the call: gloo throws gloo::EnforceNotMet on its own thread on a size
 * mismatch ("Received data size doesn't match expected size") and
 * std::terminate calls abort(). Both ranks published their fingerprints
 * before entering the backend, so the monitor finds the mismatch within a
 * tick or two: the SIGABRT handler holds the aborting thread until the
 * checker has failed (the monitor then prints the report on every rank and
 * ends the process with exit_code) or `hold_ms` passed without a failure
 * (an abort for another reason: it goes on as before, just later). Only
 * atomics, nanosleep and _exit here: async-signal-safe. */
static cohort_check *volatile hold_c;
static volatile int hold_ms, hold_code;
static volatile sig_atomic_t hold_busy;
static struct sigaction hold_old;
static int hold_installed;

static void hold_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void on_sigabrt(int sig)
{
    cohort_check *c = hold_c;
    if (c && !hold_busy) {
        hold_busy = 1;
        static const char msg[] = "cohort check: this process is aborting (SIGABRT): "
                                  "waiting for the contract check's report\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        int failed = 0;
        for (int i = 0; i < hold_ms && !(failed = cohort_check_status(c) != COHORT_OK); i++)
            hold_sleep_ms(1);
        if (failed) {
            /* The monitor waits (bounded, 5 s) for every rank's report, then
             * exits; past that, end here with the same code. */
            hold_sleep_ms(15000);
            _exit(hold_code);
        }
    }
    sigaction(sig, &hold_old, NULL);
    raise(sig); /* delivered with the previous disposition once this returns */
}

static void hold_off(CheckerObject *self)
{
    if (hold_c && hold_c == self->c)
        hold_c = NULL;
}

static PyObject *check_err(CheckerObject *self, cohort_status st)
{
    if (self->c && cohort_check_status(self->c) != COHORT_OK) {
        /* The calls return a failure at once (no_report_wait, made with
         * the GIL held); the report comes from the monitor thread through
         * the Python handler: wait for it without the GIL. */
        cohort_status fs;
        Py_BEGIN_ALLOW_THREADS
        fs = cohort_check_report_wait(self->c, -1);
        Py_END_ALLOW_THREADS
        if (fs != COHORT_OK)
            st = fs;
    }
    if (PyErr_CheckSignals() < 0)
        return NULL;
    const char *m = self->c ? cohort_check_last_error(self->c) : "";
    return cpy_raise(st, m, NULL);
}

static int ms_arg(PyObject *o, int *ms, const char *what, int none)
{
    *ms = none;
    if (!o || o == Py_None)
        return 0;
    double s = PyFloat_AsDouble(o);
    if (s == -1.0 && PyErr_Occurred())
        return -1;
    if (s > 2e6) {
        PyErr_Format(PyExc_ValueError, "%s: %g seconds is too long", what, s);
        return -1;
    }
    *ms = s < 0 ? -1 : (int)(s * 1000 + 0.5);
    return 0;
}

static PyObject *ck_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"world", "handler", "abort", "exit_code", "stall_warn", "timeout",
                          "deadlock", "transport", NULL};
    PyObject *world, *handler = Py_None, *aborter = Py_None, *exit_code = Py_None, *sw = Py_None,
                     *to = Py_None, *dl = Py_None;
    const char *transport = "auto";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|O$OOOOOs", kwl, &CpyGroup_Type, &world,
                                     &handler, &aborter, &exit_code, &sw, &to, &dl, &transport))
        return NULL;
    if ((handler != Py_None && !PyCallable_Check(handler)) ||
        (aborter != Py_None && !PyCallable_Check(aborter))) {
        PyErr_SetString(PyExc_TypeError, "Checker: handler and abort must be callable or None");
        return NULL;
    }
    cohort_check_options o;
    cohort_check_options_init(&o);
    int ec = -1;
    if (exit_code != Py_None) {
        ec = (int)PyLong_AsLong(exit_code);
        if (ec == -1 && PyErr_Occurred())
            return NULL;
        if (ec < 0 || ec > 255) {
            PyErr_Format(PyExc_ValueError, "Checker: exit_code must be 0..255, got %d", ec);
            return NULL;
        }
    }
    if (ms_arg(sw, &o.stall_warn_ms, "stall_warn", 0) < 0 ||
        ms_arg(to, &o.timeout_ms, "timeout", 0) < 0 ||
        ms_arg(dl, &o.deadlock_ms, "deadlock", 0) < 0)
        return NULL;
    if (!strcmp(transport, "store"))
        o.transport = 1;
    else if (strcmp(transport, "auto")) {
        PyErr_Format(PyExc_ValueError, "Checker: transport is 'auto' or 'store', not '%s'",
                     transport);
        return NULL;
    }
    cohort_group *g = cpy_group_borrow(world, "Checker");
    if (!g)
        return NULL;
    CheckerObject *self = (CheckerObject *)type->tp_alloc(type, 0);
    if (!self) {
        cpy_group_unborrow(world);
        return NULL;
    }
    self->group = Py_NewRef(world);
    self->handler = handler != Py_None ? Py_NewRef(handler) : NULL;
    self->abort = aborter != Py_None ? Py_NewRef(aborter) : NULL;
    self->exit_code = ec;
    self->names = PyDict_New();
    self->groups = PyDict_New();
    self->dtypes = PyDict_New();
    if (!self->names || !self->groups || !self->dtypes) {
        Py_DECREF(self);
        return NULL;
    }
    o.handler = on_event;
    o.no_report_wait = 1; /* begin/end/wait hold the GIL; check_err waits for the report */
    o.abort = on_abort;
    o.handler_arg = self;
    cohort_check *c = NULL;
    cohort_status st;
    char msg[1024] = "";
    Py_BEGIN_ALLOW_THREADS
    st = cohort_check_create(g, &o, &c);
    if (st != COHORT_OK)
        snprintf(msg, sizeof msg, "%s", cohort_last_error(g));
    Py_END_ALLOW_THREADS
    if (st != COHORT_OK) {
        Py_DECREF(self);
        return cpy_raise(st, msg, g);
    }
    self->c = c;
    return (PyObject *)self;
}

static void destroy_impl(CheckerObject *self)
{
    if (!self->c)
        return;
    cohort_check *c = self->c;
    hold_off(self);
    self->c = NULL;
    /* the groups' handles die with the checker */
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (self->groups && PyDict_Next(self->groups, &pos, &k, &v))
        ((CheckGroupObject *)v)->grp = NULL;
    Py_BEGIN_ALLOW_THREADS
    cohort_check_destroy(c);
    Py_END_ALLOW_THREADS
    cpy_group_unborrow(self->group);
}

static void ck_dealloc(CheckerObject *self)
{
    PyObject_GC_UnTrack(self);
    destroy_impl(self);
    Py_CLEAR(self->groups);
    Py_CLEAR(self->names);
    Py_CLEAR(self->dtypes);
    Py_CLEAR(self->handler);
    Py_CLEAR(self->abort);
    Py_CLEAR(self->group);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ck_traverse(CheckerObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->group);
    Py_VISIT(self->handler);
    Py_VISIT(self->abort);
    Py_VISIT(self->groups);
    return 0;
}

static int ck_open(CheckerObject *self, const char *what)
{
    if (!self->c) {
        PyErr_Format(cpy_error_class(COHORT_ERR_INVALID), "Checker.%s: the checker is destroyed",
                     what);
        return -1;
    }
    return 0;
}

/* A literal-like name the checker may keep a pointer to. */
static const char *intern(CheckerObject *self, PyObject *s)
{
    if (!s || s == Py_None)
        return NULL;
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "op and redop are str, not %.100s", Py_TYPE(s)->tp_name);
        return NULL;
    }
    PyObject *b = PyDict_GetItemWithError(self->names, s);
    if (!b) {
        if (PyErr_Occurred())
            return NULL;
        b = PyUnicode_AsUTF8String(s);
        if (!b || PyDict_SetItem(self->names, s, b) < 0) {
            Py_XDECREF(b);
            return NULL;
        }
        Py_DECREF(b);
    }
    return PyBytes_AS_STRING(b);
}

static int int_list(PyObject *o, int **out, int *n, const char *what)
{
    PyObject *seq = PySequence_Fast(o, "world_ranks must be a sequence of ints");
    if (!seq)
        return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    if (k < 1 || k > (1 << 24)) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s: 1.. ranks, got %zd", what, k);
        return -1;
    }
    int *r = PyMem_Calloc((size_t)k, sizeof *r);
    if (!r) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if ((v == -1 && PyErr_Occurred()) || v < 0 || v > INT32_MAX) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s: rank %ld out of range", what, v);
            PyMem_Free(r);
            Py_DECREF(seq);
            return -1;
        }
        r[i] = (int)v;
    }
    Py_DECREF(seq);
    *out = r;
    *n = (int)k;
    return 0;
}

static PyObject *ck_group_id(PyObject *cls, PyObject *args)
{
    unsigned long long parent, cseq;
    PyObject *ranks;
    if (!PyArg_ParseTuple(args, "KKO", &parent, &cseq, &ranks))
        return NULL;
    int *r, n;
    if (int_list(ranks, &r, &n, "group_id") < 0)
        return NULL;
    uint64_t id = cohort_check_group_id(parent, cseq, r, n);
    PyMem_Free(r);
    return PyLong_FromUnsignedLongLong(id);
}

static PyObject *ck_add_group(CheckerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"id", "world_ranks", "name", NULL};
    unsigned long long id;
    PyObject *ranks;
    const char *name = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KO|z", kwl, &id, &ranks, &name) ||
        ck_open(self, "add_group") < 0)
        return NULL;
    int *r, n;
    if (int_list(ranks, &r, &n, "add_group") < 0)
        return NULL;
    cohort_check_group *grp = NULL;
    cohort_status st = cohort_check_group_add(self->c, id, r, n, &grp);
    int me = -1, myrank = cohort_rank(cpy_group_get(self->group));
    for (int i = 0; i < n; i++)
        if (r[i] == myrank)
            me = i;
    PyMem_Free(r);
    if (st != COHORT_OK)
        return check_err(self, st);
    if (name)
        cohort_check_group_name(self->c, grp, name);
    CheckGroupObject *o = PyObject_New(CheckGroupObject, &CheckGroup_Type);
    if (!o) {
        cohort_check_group_remove(self->c, grp);
        return NULL;
    }
    o->grp = grp;
    o->owner = (CheckerObject *)Py_NewRef(self);
    o->id = id;
    o->size = n;
    o->index = me;
    PyObject *key = PyLong_FromVoidPtr(o);
    if (!key || PyDict_SetItem(self->groups, key, (PyObject *)o) < 0) {
        Py_XDECREF(key);
        Py_DECREF(o);
        return NULL;
    }
    Py_DECREF(key);
    return (PyObject *)o;
}

static CheckGroupObject *grp_arg(CheckerObject *self, PyObject *o, const char *what)
{
    if (!PyObject_TypeCheck(o, &CheckGroup_Type) || ((CheckGroupObject *)o)->owner != self) {
        PyErr_Format(PyExc_TypeError, "Checker.%s: a CheckGroup of this checker is needed", what);
        return NULL;
    }
    CheckGroupObject *g = (CheckGroupObject *)o;
    if (!g->grp) {
        PyErr_Format(cpy_error_class(COHORT_ERR_INVALID), "Checker.%s: the group was removed",
                     what);
        return NULL;
    }
    return g;
}

static PyObject *ck_remove_group(CheckerObject *self, PyObject *arg)
{
    CheckGroupObject *g = grp_arg(self, arg, "remove_group");
    if (!g || ck_open(self, "remove_group") < 0)
        return NULL;
    cohort_check_group *grp = g->grp;
    g->grp = NULL;
    Py_BEGIN_ALLOW_THREADS
    cohort_check_group_remove(self->c, grp);
    Py_END_ALLOW_THREADS
    PyObject *key = PyLong_FromVoidPtr(g);
    if (key && PyDict_DelItem(self->groups, key) < 0)
        PyErr_Clear();
    Py_XDECREF(key);
    Py_RETURN_NONE;
}

static PyObject *ck_begin(CheckerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"group", "op", "count", "sig", "sig_hash", "redop", "root", "args",
                          "args_hash", "file", "line", NULL};
    PyObject *grpo, *opo, *redo = Py_None, *sigo = Py_None, *argso = Py_None;
    unsigned long long count = 0, sig_hash = 0, args_hash = 0;
    int root = -1, line = 0;
    const char *file = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|KOKOiOKzi", kwl, &grpo, &opo, &count, &sigo,
                                     &sig_hash, &redo, &root, &argso, &args_hash, &file, &line) ||
        ck_open(self, "begin") < 0)
        return NULL;
    CheckGroupObject *g = grp_arg(self, grpo, "begin");
    if (!g)
        return NULL;
    cohort_check_fp fp;
    memset(&fp, 0, sizeof fp);
    fp.op = intern(self, opo);
    if (!fp.op) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "Checker.begin: op is required");
        return NULL;
    }
    fp.redop = intern(self, redo);
    if (!fp.redop && PyErr_Occurred())
        return NULL;
    Py_ssize_t sl = 0, al = 0;
    const char *sig = NULL, *ar = NULL;
    if (sigo != Py_None && !(sig = PyUnicode_AsUTF8AndSize(sigo, &sl)))
        return NULL;
    if (argso != Py_None && !(ar = PyUnicode_AsUTF8AndSize(argso, &al)))
        return NULL;
    fp.sig = sig;
    fp.sig_hash = sig_hash ? sig_hash : sig ? fnv1a(sig, (size_t)sl) : 0;
    fp.args = ar;
    fp.args_hash = args_hash ? args_hash : ar ? fnv1a(ar, (size_t)al) : 0;
    fp.count = count;
    fp.root = root;
    if (file) {
        fp.file = file;
        fp.line = line;
    } else {
        cpy_callsite(&fp.file, &fp.line);
    }
    uint64_t seq = 0;
    cohort_status st;
    /* The GIL stays held: begin does not wait for another rank (only when
     * its ring of 2048 records is full, which the neighbour's monitor
     * drains every 10 ms), and a release and re-take per call costs more
     * than the call - measured in a gloo program, where another thread
     * takes the GIL whenever it is free: +105 us per all_reduce at 8 B
     * with begin/wait/end releasing it, +40 us without. */
    self->inflight++;
    st = cohort_check_begin(self->c, g->grp, &fp, &seq);
    self->inflight--;
    if (st != COHORT_OK)
        return check_err(self, st);
    return PyLong_FromUnsignedLongLong(seq);
}

/* end: with the GIL held when it cannot wait: not synchronising, or the
 * neighbour's fingerprint is there (the usual case: the backend
 * synchronised); only a wait for it releases the GIL. */
static cohort_status end_impl(CheckerObject *self, CheckGroupObject *g, uint64_t seq, int synced)
{
    cohort_status st = synced ? cohort_check_wait(self->c, g->grp, seq, 0) : COHORT_OK;
    if (st == COHORT_ERR_TIMEOUT) {
        Py_BEGIN_ALLOW_THREADS
        st = cohort_check_end(self->c, g->grp, seq, COHORT_CHECK_SYNCED);
        Py_END_ALLOW_THREADS
    } else {
        /* compared (or failed): end records the position, waits for nothing */
        cohort_status st2 = cohort_check_end(self->c, g->grp, seq, 0);
        if (st == COHORT_OK)
            st = st2;
    }
    return st;
}

/* wait: first without waiting, with the GIL held (see begin); a real wait
 * releases it. ms < 0: no limit. */
static cohort_status wait_impl(CheckerObject *self, CheckGroupObject *g, uint64_t seq, int ms)
{
    cohort_status st = cohort_check_wait(self->c, g->grp, seq, 0);
    if (st == COHORT_ERR_TIMEOUT && ms != 0) {
        Py_BEGIN_ALLOW_THREADS
        st = cohort_check_wait(self->c, g->grp, seq, ms);
        Py_END_ALLOW_THREADS
    }
    return st;
}

/* The name of a torch dtype as cohort.torch compares it: str(dtype)
 * without "torch." ("float32"), cached per dtype object. Borrowed. */
static const char *dtype_name(CheckerObject *self, PyObject *d)
{
    PyObject *b = PyDict_GetItemWithError(self->dtypes, d);
    if (b)
        return PyBytes_AS_STRING(b);
    if (PyErr_Occurred())
        return NULL;
    PyObject *s = PyObject_Str(d);
    if (!s)
        return NULL;
    PyObject *r = PyUnicode_Replace(s, cpy_str_torch_prefix, cpy_str_empty, -1);
    Py_DECREF(s);
    if (!r)
        return NULL;
    b = PyUnicode_AsUTF8String(r);
    Py_DECREF(r);
    if (!b || PyDict_SetItem(self->dtypes, d, b) < 0) {
        Py_XDECREF(b);
        return NULL;
    }
    Py_DECREF(b); /* the dict holds it */
    return PyBytes_AS_STRING(b);
}

/* The fingerprint of a tensor argument, read in C (cohort.torch's common
 * case: one attribute read each for shape and dtype instead of numel(),
 * dim(), shape and dtype through Python): the element count, the dtype's
 * name, and for two or more dimensions "shape AxB" (args). 0: done; 1: not
 * a tensor this can read (no error set: the caller takes the Python path). */
static int tensor_fp(CheckerObject *self, PyObject *t, unsigned long long *count,
                     const char **sig, char *shape, size_t cap)
{
    PyObject *sh = PyObject_GetAttr(t, cpy_str_shape);
    if (!sh || !PyTuple_Check(sh)) {
        Py_XDECREF(sh);
        PyErr_Clear();
        return 1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(sh);
    unsigned long long c = 1;
    size_t off = 0;
    shape[0] = 0;
    if (n >= 2)
        off = (size_t)snprintf(shape, cap, "shape ");
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(sh, i));
        if (v < 0 || (v > 0 && c > ULLONG_MAX / (unsigned long long)v)) {
            Py_DECREF(sh);
            PyErr_Clear();
            return 1;
        }
        c *= (unsigned long long)v;
        if (n >= 2 && off < cap) {
            int w = snprintf(shape + off, cap - off, i ? "x%lld" : "%lld", v);
            off += w > 0 ? (size_t)w : 0;
        }
    }
    Py_DECREF(sh);
    if (n >= 2 && off >= cap)
        return 1; /* a shape this long: the Python path */
    PyObject *d = PyObject_GetAttr(t, cpy_str_dtype);
    if (!d) {
        PyErr_Clear();
        return 1;
    }
    const char *name = dtype_name(self, d);
    Py_DECREF(d);
    if (!name) {
        PyErr_Clear();
        return 1;
    }
    *count = c;
    *sig = name;
    return 0;
}

/* The rest of a tensor call's fingerprint, from what tensor_fp read: count,
 * sig (hashed), args "shape AxB" when shape is not empty, root, and the
 * caller's frame as the call site. sig and shape must outlive fp's use. */
static void fp_set_tensor(cohort_check_fp *fp, unsigned long long count, const char *sig,
                          const char *shape, int root)
{
    fp->sig = sig;
    fp->sig_hash = fnv1a(sig, strlen(sig));
    if (shape[0]) {
        fp->args = shape;
        fp->args_hash = fnv1a(shape, strlen(shape));
    }
    fp->count = count;
    fp->root = root;
    cpy_callsite(&fp->file, &fp->line);
}

/* begin_tensor(group, op, tensor, redop, root) -> seq, or None (nothing
 * begun) when tensor is not one this reads: begin() with the tensor's
 * fingerprint, positional only (cohort.torch's per-call path). */
static PyObject *ck_begin_tensor(CheckerObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "Checker.begin_tensor(group, op, tensor, redop, root): 5 arguments");
        return NULL;
    }
    if (ck_open(self, "begin_tensor") < 0)
        return NULL;
    CheckGroupObject *g = grp_arg(self, args[0], "begin_tensor");
    if (!g)
        return NULL;
    int root = (int)PyLong_AsLong(args[4]);
    if (root == -1 && PyErr_Occurred())
        return NULL;
    cohort_check_fp fp;
    memset(&fp, 0, sizeof fp);
    if (!(fp.op = intern(self, args[1]))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "Checker.begin_tensor: op is required");
        return NULL;
    }
    fp.redop = intern(self, args[3]);
    if (!fp.redop && PyErr_Occurred())
        return NULL;
    char shape[256];
    unsigned long long count;
    const char *sig;
    if (tensor_fp(self, args[2], &count, &sig, shape, sizeof shape))
        Py_RETURN_NONE;
    fp_set_tensor(&fp, count, sig, shape, root);
    uint64_t seq = 0;
    self->inflight++;
    cohort_status st = cohort_check_begin(self->c, g->grp, &fp, &seq);
    self->inflight--;
    if (st != COHORT_OK)
        return check_err(self, st);
    return PyLong_FromUnsignedLongLong(seq);
}

/* finish(group, seq, how): after the backend returned, in one call. how 0:
 * end(); 1: end(synced=True); 2: wait() until compared (no limit), then
 * end() - the two-member (mutual) group's check after the backend. */
static PyObject *ck_finish(CheckerObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "Checker.finish(group, seq, how): 3 arguments");
        return NULL;
    }
    if (ck_open(self, "finish") < 0)
        return NULL;
    CheckGroupObject *g = grp_arg(self, args[0], "finish");
    if (!g)
        return NULL;
    unsigned long long seq = PyLong_AsUnsignedLongLong(args[1]);
    if (seq == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    long how = PyLong_AsLong(args[2]);
    if (how == -1 && PyErr_Occurred())
        return NULL;
    if (how < 0 || how > 2) {
        PyErr_Format(PyExc_ValueError, "Checker.finish: how is 0, 1 or 2, not %ld", how);
        return NULL;
    }
    self->inflight++;
    cohort_status st = how == 2 ? wait_impl(self, g, seq, -1) : COHORT_OK;
    if (st == COHORT_OK)
        st = end_impl(self, g, seq, how == 1);
    self->inflight--;
    if (st != COHORT_OK)
        return check_err(self, st);
    Py_RETURN_NONE;
}

static PyObject *ck_end(CheckerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"group", "seq", "synced", NULL};
    PyObject *grpo;
    unsigned long long seq;
    int synced = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OK|p", kwl, &grpo, &seq, &synced) ||
        ck_open(self, "end") < 0)
        return NULL;
    CheckGroupObject *g = grp_arg(self, grpo, "end");
    if (!g)
        return NULL;
    self->inflight++;
    cohort_status st = end_impl(self, g, seq, synced);
    self->inflight--;
    if (st != COHORT_OK)
        return check_err(self, st);
    Py_RETURN_NONE;
}

static PyObject *ck_wait(CheckerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"group", "seq", "timeout", NULL};
    PyObject *grpo, *to = Py_None;
    unsigned long long seq;
    int ms;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OK|O", kwl, &grpo, &seq, &to) ||
        ms_arg(to, &ms, "wait", -1) < 0 || ck_open(self, "wait") < 0)
        return NULL;
    CheckGroupObject *g = grp_arg(self, grpo, "wait");
    if (!g)
        return NULL;
    self->inflight++;
    cohort_status st = wait_impl(self, g, seq, ms);
    self->inflight--;
    if (st != COHORT_OK)
        return check_err(self, st);
    Py_RETURN_NONE;
}

static PyObject *ck_wait_begin(CheckerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"group", "peer", "op", "tag", "is_send", "file", "line", NULL};
    int peer, tag = -1, is_send = 0, line = 0;
    PyObject *grpo, *opo;
    const char *file = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OiO|ipzi", kwl, &grpo, &peer, &opo, &tag,
                                     &is_send, &file, &line) ||
        ck_open(self, "wait_begin") < 0)
        return NULL;
    cohort_check_group *grp = NULL;
    if (grpo != Py_None) {
        CheckGroupObject *g = grp_arg(self, grpo, "wait_begin");
        if (!g)
            return NULL;
        grp = g->grp;
    }
    const char *op = intern(self, opo);
    if (!op)
        return NULL;
    if (!file)
        cpy_callsite(&file, &line);
    cohort_check_wait_begin(self->c, grp, peer, tag, is_send, op, file, line, NULL);
    Py_RETURN_NONE;
}

static PyObject *ck_fail_local(CheckerObject *self, PyObject *args)
{
    PyObject *grpo;
    const char *text;
    if (!PyArg_ParseTuple(args, "Os", &grpo, &text) || ck_open(self, "fail_local") < 0)
        return NULL;
    CheckGroupObject *g = grp_arg(self, grpo, "fail_local");
    if (!g)
        return NULL;
    char *copy = PyMem_Malloc(strlen(text) + 1);
    if (!copy)
        return PyErr_NoMemory();
    strcpy(copy, text);
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_check_fail_local(self->c, g->grp, copy);
    Py_END_ALLOW_THREADS
    self->inflight--;
    PyMem_Free(copy);
    return check_err(self, st != COHORT_OK ? st : COHORT_ERR_CONTRACT);
}

static PyObject *ck_wait_end(CheckerObject *self, PyObject *unused)
{
    if (ck_open(self, "wait_end") < 0)
        return NULL;
    cohort_check_wait_end(self->c);
    Py_RETURN_NONE;
}

static PyObject *ck_close(CheckerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"timeout", NULL};
    PyObject *to = Py_None;
    int ms;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwl, &to) || ms_arg(to, &ms, "close", -1) < 0 ||
        ck_open(self, "close") < 0)
        return NULL;
    cohort_status st;
    self->inflight++;
    cohort_group *wg = cpy_group_get(self->group);
    Py_BEGIN_ALLOW_THREADS
    int tok = cpy_intr_enter(wg);
    st = cohort_check_close(self->c, ms);
    cpy_intr_leave(tok);
    Py_END_ALLOW_THREADS
    self->inflight--;
    if (st != COHORT_OK)
        return check_err(self, st);
    Py_RETURN_NONE;
}

static PyObject *ck_destroy(CheckerObject *self, PyObject *unused)
{
    if (self->inflight) {
        PyErr_SetString(cpy_error_class(COHORT_ERR_INVALID),
                        "Checker.destroy: another thread is inside a call of this checker");
        return NULL;
    }
    destroy_impl(self);
    Py_RETURN_NONE;
}

static PyObject *ck_hold_abort(CheckerObject *self, PyObject *args)
{
    PyObject *wo = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &wo) || ck_open(self, "hold_abort") < 0)
        return NULL;
    if (wo == Py_None) {
        hold_off(self);
        Py_RETURN_NONE;
    }
    int ms;
    if (ms_arg(wo, &ms, "hold_abort", -1) < 0)
        return NULL;
    if (self->exit_code < 0 || ms <= 0) {
        PyErr_SetString(PyExc_ValueError,
                        "Checker.hold_abort: needs a checker made with exit_code and a wait > 0");
        return NULL;
    }
    if (hold_c && hold_c != self->c) {
        PyErr_SetString(cpy_error_class(COHORT_ERR_INVALID),
                        "Checker.hold_abort: another checker holds SIGABRT");
        return NULL;
    }
    hold_ms = ms;
    hold_code = self->exit_code;
    hold_c = self->c;
    if (!hold_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigabrt;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGABRT, &sa, &hold_old) != 0) {
            hold_c = NULL;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        hold_installed = 1;
    }
    Py_RETURN_NONE;
}

static PyObject *ck_stats(CheckerObject *self, PyObject *unused)
{
    if (ck_open(self, "stats") < 0)
        return NULL;
    cohort_check_stats s;
    cohort_check_get_stats(self->c, &s);
    return Py_BuildValue("{sKsKsKsKsKsK}", "calls", (unsigned long long)s.calls, "compared",
                         (unsigned long long)s.compared, "lazy", (unsigned long long)s.lazy,
                         "ring_waits", (unsigned long long)s.ring_waits, "sync_waits",
                         (unsigned long long)s.sync_waits, "ticks", (unsigned long long)s.ticks);
}

static PyObject *ck_last_error(CheckerObject *self, void *c)
{
    return PyUnicode_FromString(self->c ? cohort_check_last_error(self->c) : "");
}

static PyObject *ck_status(CheckerObject *self, void *c)
{
    return PyLong_FromLong(self->c ? (long)cohort_check_status(self->c) : 0);
}

static PyObject *ck_enter(CheckerObject *self, PyObject *unused)
{
    return Py_NewRef(self);
}

static PyObject *ck_exit(CheckerObject *self, PyObject *args)
{
    destroy_impl(self);
    Py_RETURN_FALSE;
}

/* ---- cohort.torch's per-call path, in C (docs/pytorch.md, Cost) ----
 * A TorchCall replaces one torch.distributed function (Checker.torch_call):
 * it binds the arguments (positional and keyword, by the function's
 * parameter names), finds the CheckGroup of the process group, reads the
 * tensor's fingerprint, takes the caller's frame as the call site, begins
 * the call, calls torch's function with the caller's own argument vector
 * and ends the call - what cohort.torch's Python wrapper does, without an
 * interpreter frame, a kwargs dict or a bound-arguments dict per call (in
 * a gloo program that Python work, cold in the caches every call, was most
 * of the check's cost). Anything else (an argument it cannot read, a group
 * not seen yet that is a plain miss is fine, a keyword it does not know)
 * goes to `slow`, the Python wrapper, before anything was begun, so the two
 * paths never both count a call. */

/* Calls torch makes inside a checked call are not separate calls: the
 * per-thread nesting depth, shared with cohort.torch's Python paths
 * (_torch_depth / _torch_set_depth). */
static _Thread_local int tc_depth;

#define TC_MAXP 16
enum { TC_TENSOR, TC_BARRIER, TC_P2P };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;        /* __name__, __doc__, __wrapped__, ... (functools.update_wrapper) */
    CheckerObject *chk;
    PyObject *orig;        /* torch's function */
    PyObject *slow;        /* the Python wrapper: the general path */
    PyObject *state;       /* cohort.torch's _State; NULL once detached (uninstall) */
    PyObject *groups;      /* state.groups: process group -> CheckGroup or None */
    PyObject *tensor_type; /* torch.Tensor */
    PyObject *work_type;   /* CheckedWork(work, group, seq): async_op=True */
    PyObject *failed;      /* _backend_failed(state, group, seq): the backend raised */
    PyObject *opname;      /* the name in reports (str) */
    PyObject *redops;      /* reduce op object -> its interned name (the bytes in
                            * chk->names), filled on first use */
    /* opname and "SUM" interned (borrowed from chk->names, which lives as
     * long as chk, held here): set at the first call, so a call makes no
     * dictionary look-up for them - every step of the per-call path runs
     * cold after the backend (docs/pytorch.md, "Cost"). */
    const char *opname_c, *sum_c;
    PyObject *names[TC_MAXP]; /* parameter names, in order */
    int nnames, npos;      /* npos: positional-or-keyword parameters first */
    int kind;              /* TC_TENSOR, TC_BARRIER, TC_P2P */
    /* parameter indices, -1: none */
    int i_tensor, i_op, i_rootw, i_rootg, i_group, i_async, i_tag;
    int root_default;      /* world rank when the root is not given; -1: none */
    int synced, prewait, is_send;
} TorchCallObject;

static PyObject *cpy_str_default_cg, *cpy_str_group_for, *cpy_str_redop, *cpy_str_group_rank,
    *cpy_str_sum;

/* Binds args/kwnames to the parameter slots (borrowed). 0: bound; 1: not
 * a call this binds (the general path binds it or torch reports it). */
static int tc_bind(TorchCallObject *self, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames, PyObject **v)
{
    if (nargs > self->npos)
        return 1;
    for (Py_ssize_t i = 0; i < nargs; i++)
        v[i] = args[i];
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int j = 0;
        /* keyword names are interned: identity first, then by value */
        while (j < self->nnames && self->names[j] != key)
            j++;
        if (j == self->nnames) {
            for (j = 0; j < self->nnames; j++) {
                int eq = PyUnicode_Compare(self->names[j], key);
                if (eq == 0)
                    break;
                if (eq == -1 && PyErr_Occurred()) {
                    PyErr_Clear();
                    return 1;
                }
            }
            if (j == self->nnames)
                return 1;
        }
        if (v[j])
            return 1; /* given twice */
        v[j] = args[nargs + k];
    }
    return 0;
}

static PyObject *tc_arg(PyObject **v, int i)
{
    return i >= 0 && v[i] && v[i] != Py_None ? v[i] : NULL;
}

/* The CheckGroup (new reference) or None for the process group pg (NULL:
 * the default group), as _State.group_for; NULL with an error. */
static PyObject *tc_group(TorchCallObject *self, PyObject *pg)
{
    if (!pg) {
        PyObject *cg = PyObject_GetAttr(self->state, cpy_str_default_cg);
        if (!cg || cg != Py_None)
            return cg;
        Py_DECREF(cg);
        return PyObject_CallMethodOneArg(self->state, cpy_str_group_for, Py_None);
    }
    PyObject *cg = PyDict_GetItemWithError(self->groups, pg);
    if (cg)
        return Py_NewRef(cg);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError))
            return NULL;
        PyErr_Clear(); /* unhashable: not a process group, not checked */
        Py_RETURN_NONE;
    }
    return PyObject_CallMethodOneArg(self->state, cpy_str_group_for, pg);
}

/* The reduce op's name (borrowed from the cache, or new in *keep). */
static const char *tc_redop(TorchCallObject *self, PyObject *op, PyObject **keep)
{
    if (!op) {
        if (!self->sum_c)
            self->sum_c = intern(self->chk, cpy_str_sum);
        return self->sum_c;
    }
    PyObject *b = PyDict_GetItemWithError(self->redops, op);
    if (b)
        return PyBytes_AS_STRING(b);
    int cacheable = 1;
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError))
            return NULL;
        PyErr_Clear(); /* unhashable: asked each call */
        cacheable = 0;
    }
    PyObject *n = PyObject_CallMethodOneArg(self->state, cpy_str_redop, op);
    if (!n)
        return NULL;
    *keep = n;
    const char *name = intern(self->chk, n);
    /* intern put n's bytes in chk->names: the cache holds that object */
    if (name && cacheable && (b = PyDict_GetItemWithError(self->chk->names, n)) &&
        PyDict_SetItem(self->redops, op, b) < 0)
        PyErr_Clear();
    if (name && PyErr_Occurred())
        PyErr_Clear();
    return name;
}

/* The root as a group rank (_root of cohort.torch). 0, or 1: not an int
 * this reads (the general path), -1: an error. */
static int tc_root(TorchCallObject *self, PyObject **v, PyObject *pg, int *root)
{
    *root = -1;
    PyObject *g = tc_arg(v, self->i_rootg);
    if (g) {
        if (!PyLong_CheckExact(g))
            return 1;
        long r = PyLong_AsLong(g);
        if (r == -1 && PyErr_Occurred())
            return -1;
        *root = (int)r;
        return 0;
    }
    PyObject *w = tc_arg(v, self->i_rootw);
    if (!w) {
        if (self->root_default < 0)
            return 0;
        if (!pg) {
            *root = self->root_default;
            return 0;
        }
    } else if (!PyLong_CheckExact(w)) {
        return 1;
    } else if (!pg) {
        long r = PyLong_AsLong(w);
        if (r == -1 && PyErr_Occurred())
            return -1;
        *root = (int)r;
        return 0;
    }
    PyObject *wr = w ? Py_NewRef(w) : PyLong_FromLong(self->root_default);
    if (!wr)
        return -1;
    PyObject *r = PyObject_CallMethodObjArgs(self->state, cpy_str_group_rank, pg, wr, NULL);
    Py_DECREF(wr);
    if (!r)
        return -1;
    long x = PyLong_Check(r) ? PyLong_AsLong(r) : -1;
    int bad = !PyLong_Check(r);
    Py_DECREF(r);
    if (bad)
        return 1;
    if (x == -1 && PyErr_Occurred())
        return -1;
    *root = (int)x;
    return 0;
}

/* The backend raised: as cohort.torch's `except Exception:
 * _backend_failed(...); raise` - the report wins if the call was a
 * mismatch (its exception, chained to the backend's), else the backend's
 * exception goes on. BaseException (KeyboardInterrupt) goes on as is. */
static PyObject *tc_backend_failed(TorchCallObject *self, PyObject *cg, uint64_t seq)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return NULL;
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *val = PyErr_GetRaisedException();
#else
    PyObject *t, *val, *tb;
    PyErr_Fetch(&t, &val, &tb);
    PyErr_NormalizeException(&t, &val, &tb);
#endif
    PyObject *s = PyLong_FromUnsignedLongLong(seq);
    PyObject *r = s ? PyObject_CallFunctionObjArgs(self->failed, self->state, cg, s, NULL) : NULL;
    Py_XDECREF(s);
    if (r) { /* no mismatch: the backend's exception goes on, as raised */
        Py_DECREF(r);
#if PY_VERSION_HEX >= 0x030C0000
        PyErr_SetRaisedException(val);
#else
        PyErr_Restore(t, val, tb);
#endif
        return NULL;
    }
    /* the report's exception, its context the backend's (as a raise inside
     * `except` chains it) */
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *v2 = PyErr_GetRaisedException();
    if (v2 && val && v2 != val)
        PyException_SetContext(v2, Py_NewRef(val));
    Py_XDECREF(val);
    PyErr_SetRaisedException(v2);
#else
    PyObject *t2, *v2, *tb2;
    PyErr_Fetch(&t2, &v2, &tb2);
    PyErr_NormalizeException(&t2, &v2, &tb2);
    if (val && tb)
        PyException_SetTraceback(val, tb);
    if (v2 && val && v2 != val)
        PyException_SetContext(v2, Py_NewRef(val));
    Py_XDECREF(t);
    Py_XDECREF(val);
    Py_XDECREF(tb);
    PyErr_Restore(t2, v2, tb2);
#endif
    return NULL;
}

static PyObject *tc_orig(TorchCallObject *self, PyObject *const *args, size_t nargsf,
                         PyObject *kwnames)
{
    return PyObject_Vectorcall(self->orig, args, nargsf, kwnames);
}

static PyObject *tc_p2p(TorchCallObject *self, PyObject **v, PyObject *const *args, size_t nargsf,
                        PyObject *kwnames)
{
    PyObject *pg = tc_arg(v, self->i_group);
    PyObject *peer = tc_arg(v, self->i_rootw), *tag = tc_arg(v, self->i_tag);
    if ((!peer && tc_arg(v, self->i_rootg)) || (peer && !PyLong_CheckExact(peer)) ||
        (tag && !PyLong_CheckExact(tag)))
        return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    long p = peer ? PyLong_AsLong(peer) : -1, tg = tag ? PyLong_AsLong(tag) : 0;
    if (PyErr_Occurred())
        return NULL;
    PyObject *cg = tc_group(self, pg);
    if (!cg)
        return NULL;
    cohort_check_group *grp = NULL;
    if (cg != Py_None) {
        CheckGroupObject *g = grp_arg(self->chk, cg, "wait_begin");
        if (!g) {
            Py_DECREF(cg);
            return NULL;
        }
        grp = g->grp;
    }
    if (!self->opname_c)
        self->opname_c = intern(self->chk, self->opname);
    const char *op = self->opname_c;
    if (!op || ck_open(self->chk, "wait_begin") < 0) {
        Py_DECREF(cg);
        return NULL;
    }
    const char *file;
    int line;
    cpy_callsite(&file, &line);
    cohort_check_wait_begin(self->chk->c, grp, (int)p, (int)tg, self->is_send, op, file, line,
                            NULL);
    PyObject *out = PyObject_Vectorcall(self->orig, args, nargsf, kwnames);
    if (self->chk->c)
        cohort_check_wait_end(self->chk->c);
    Py_DECREF(cg);
    return out;
}

static PyObject *tc_call(TorchCallObject *self, PyObject *const *args, size_t nargsf,
                         PyObject *kwnames)
{
    if (!self->state || tc_depth || !self->chk->c)
        return tc_orig(self, args, nargsf, kwnames);
    PyObject *v[TC_MAXP] = {0};
    if (tc_bind(self, args, PyVectorcall_NARGS(nargsf), kwnames, v))
        return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    if (self->kind == TC_P2P)
        return tc_p2p(self, v, args, nargsf, kwnames);
    PyObject *pg = tc_arg(v, self->i_group);
    cohort_check_fp fp;
    memset(&fp, 0, sizeof fp);
    char shape[256];
    unsigned long long count = 0;
    const char *sig = "";
    int root = -1;
    shape[0] = 0;
    if (self->kind == TC_TENSOR) {
        /* before anything is begun: what this path does not read goes to
         * the general one */
        PyObject *t = tc_arg(v, self->i_tensor);
        if (!t || !PyObject_TypeCheck(t, (PyTypeObject *)self->tensor_type))
            return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    }
    PyObject *cg = tc_group(self, pg);
    if (!cg)
        return NULL;
    if (cg == Py_None) {
        Py_DECREF(cg);
        return tc_orig(self, args, nargsf, kwnames);
    }
    PyObject *keep = NULL, *out = NULL;
    CheckGroupObject *g = grp_arg(self->chk, cg, "begin");
    if (!g)
        goto done;
    if (self->kind == TC_TENSOR) {
        int rr = tc_root(self, v, pg, &root);
        if (rr < 0)
            goto done;
        if (rr > 0 || tensor_fp(self->chk, v[self->i_tensor], &count, &sig, shape, sizeof shape)) {
            out = PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
            goto done;
        }
        if (self->i_op >= 0 && !(fp.redop = tc_redop(self, tc_arg(v, self->i_op), &keep)))
            goto done;
    }
    if (!self->opname_c && !(self->opname_c = intern(self->chk, self->opname)))
        goto done;
    fp.op = self->opname_c;
    fp_set_tensor(&fp, count, sig, shape, root);
    int async_op = 0;
    PyObject *ao = tc_arg(v, self->i_async);
    if (ao && (async_op = PyObject_IsTrue(ao)) < 0)
        goto done;
    CheckerObject *chk = self->chk;
    uint64_t seq = 0;
    chk->inflight++;
    cohort_status st = cohort_check_begin(chk->c, g->grp, &fp, &seq);
    chk->inflight--;
    if (st != COHORT_OK) {
        check_err(chk, st);
        goto done;
    }
    /* as cohort.torch's wrapper: see the comments there */
    int how = self->synced ? 1 : 0;
    if (self->synced && self->prewait && !async_op) {
        if (cohort_check_group_mutual(g->grp)) {
            how = 2;
        } else {
            chk->inflight++;
            st = wait_impl(chk, g, seq, -1);
            chk->inflight--;
            if (st != COHORT_OK) {
                check_err(chk, st);
                goto done;
            }
        }
    }
    tc_depth = 1;
    out = tc_orig(self, args, nargsf, kwnames);
    tc_depth = 0;
    if (!out) {
        tc_backend_failed(self, cg, seq);
        goto done;
    }
    if (!chk->c) { /* destroyed while in the backend */
        Py_CLEAR(out);
        ck_open(chk, "finish");
        goto done;
    }
    chk->inflight++;
    if (async_op) {
        st = end_impl(chk, g, seq, 0);
    } else {
        st = how == 2 ? wait_impl(chk, g, seq, -1) : COHORT_OK;
        if (st == COHORT_OK)
            st = end_impl(chk, g, seq, how == 1);
    }
    chk->inflight--;
    if (st != COHORT_OK) {
        Py_CLEAR(out);
        check_err(chk, st);
        goto done;
    }
    if (async_op && out != Py_None) {
        PyObject *s = PyLong_FromUnsignedLongLong(seq);
        PyObject *w = s ? PyObject_CallFunctionObjArgs(self->work_type, out, cg, s, NULL) : NULL;
        Py_XDECREF(s);
        Py_SETREF(out, w);
    }
done:
    Py_XDECREF(keep);
    Py_DECREF(cg);
    return out;
}

static int tc_traverse(TorchCallObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dict);
    Py_VISIT(self->chk);
    Py_VISIT(self->orig);
    Py_VISIT(self->slow);
    Py_VISIT(self->state);
    Py_VISIT(self->groups);
    Py_VISIT(self->tensor_type);
    Py_VISIT(self->work_type);
    Py_VISIT(self->failed);
    Py_VISIT(self->redops);
    return 0;
}

static int tc_clear(TorchCallObject *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->chk);
    Py_CLEAR(self->orig);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->state);
    Py_CLEAR(self->groups);
    Py_CLEAR(self->tensor_type);
    Py_CLEAR(self->work_type);
    Py_CLEAR(self->failed);
    Py_CLEAR(self->redops);
    Py_CLEAR(self->opname);
    for (int i = 0; i < TC_MAXP; i++)
        Py_CLEAR(self->names[i]);
    return 0;
}

static void tc_dealloc(TorchCallObject *self)
{
    PyObject_GC_UnTrack(self);
    tc_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tc_detach(TorchCallObject *self, PyObject *unused)
{
    Py_CLEAR(self->state);
    Py_RETURN_NONE;
}

static PyObject *tc_get_original(TorchCallObject *self, void *c)
{
    return Py_NewRef(self->orig ? self->orig : Py_None);
}

static PyObject *tc_get_python(TorchCallObject *self, void *c)
{
    return Py_NewRef(self->slow ? self->slow : Py_None);
}

static PyObject *tc_get_dict(TorchCallObject *self, void *c)
{
    if (!self->dict && !(self->dict = PyDict_New()))
        return NULL;
    return Py_NewRef(self->dict);
}

static PyMethodDef tc_methods[] = {
    {"detach", (PyCFunction)tc_detach, METH_NOARGS,
     "detach(): from now on every call goes straight to torch's function (uninstall)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tc_getset[] = {
    {"__cohort_original__", (getter)tc_get_original, NULL, "torch's function", NULL},
    {"__cohort_python__", (getter)tc_get_python, NULL,
     "the Python wrapper (the general path; bench/torch/split.py compares the two)", NULL},
    {"__dict__", (getter)tc_get_dict, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *tc_vcall_tp(PyObject *self, PyObject *args, PyObject *kw)
{
    return PyVectorcall_Call(self, args, kw);
}

static PyTypeObject TorchCall_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cohort.TorchCall",
    .tp_basicsize = sizeof(TorchCallObject),
    .tp_dealloc = (destructor)tc_dealloc,
    .tp_vectorcall_offset = offsetof(TorchCallObject, vectorcall),
    .tp_call = tc_vcall_tp,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A torch.distributed function checked by cohort.torch (Checker.torch_call).",
    .tp_traverse = (traverseproc)tc_traverse,
    .tp_clear = (inquiry)tc_clear,
    .tp_methods = tc_methods,
    .tp_getset = tc_getset,
    .tp_dictoffset = offsetof(TorchCallObject, dict),
};

/* A ProcessGroup method in the class dict (cohort.TorchPass): torch's own
 * module-level calls (dist.all_reduce -> group.allreduce) reach it while a
 * checked call runs (tc_depth > 0) and go straight to the original; a
 * program's direct call (depth 0) goes to the Python wrapper that checks it.
 * In C so that the pass-through costs no Python frame per checked call. */
typedef struct {
    PyObject_HEAD PyObject *orig;
    PyObject *slow;
    vectorcallfunc vectorcall;
} TorchPassObject;

static PyObject *tp_pass_vc(PyObject *self, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames)
{
    TorchPassObject *p = (TorchPassObject *)self;
    return PyObject_Vectorcall(tc_depth > 0 ? p->orig : p->slow, args, nargsf, kwnames);
}

/* a method: bound to the instance it is read from, like a Python function */
static PyObject *tp_pass_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (!obj || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static int tp_pass_traverse(TorchPassObject *p, visitproc visit, void *arg)
{
    Py_VISIT(p->orig);
    Py_VISIT(p->slow);
    return 0;
}

static int tp_pass_clear(TorchPassObject *p)
{
    Py_CLEAR(p->orig);
    Py_CLEAR(p->slow);
    return 0;
}

static void tp_pass_dealloc(TorchPassObject *p)
{
    PyObject_GC_UnTrack(p);
    tp_pass_clear(p);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyMemberDef tp_pass_members[] = {
    {"__cohort_original__", T_OBJECT, offsetof(TorchPassObject, orig), READONLY, NULL},
    {"__cohort_python__", T_OBJECT, offsetof(TorchPassObject, slow), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject TorchPass_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cohort.TorchPass",
    .tp_basicsize = sizeof(TorchPassObject),
    .tp_dealloc = (destructor)tp_pass_dealloc,
    .tp_vectorcall_offset = offsetof(TorchPassObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = tp_pass_get,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A ProcessGroup method: the original inside a checked call, else the checking "
              "Python wrapper (cohort.torch).",
    .tp_traverse = (traverseproc)tp_pass_traverse,
    .tp_clear = (inquiry)tp_pass_clear,
    .tp_members = tp_pass_members,
};

/* torch_pass(orig, slow) -> TorchPass */
static PyObject *py_torch_pass(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *orig, *slow;
    if (!PyArg_ParseTuple(args, "OO", &orig, &slow))
        return NULL;
    if (!PyCallable_Check(orig) || !PyCallable_Check(slow))
        return PyErr_Format(PyExc_TypeError, "torch_pass: orig and slow must be callable");
    TorchPassObject *p = PyObject_GC_New(TorchPassObject, &TorchPass_Type);
    if (!p)
        return NULL;
    p->orig = Py_NewRef(orig);
    p->slow = Py_NewRef(slow);
    p->vectorcall = tp_pass_vc;
    PyObject_GC_Track(p);
    return (PyObject *)p;
}

/* torch_call(orig, slow, state, kind, opname, names, npos, indices, root_default,
 *            synced, prewait, tensor_type, work_type, failed) -> TorchCall
 * kind: "tensor", "barrier", "send" or "recv"; indices: a dict of the
 * parameters' roles (tensor, op, root, group_root, group, async_op, tag) to
 * their positions in names. */
static PyObject *ck_torch_call(CheckerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"orig", "slow", "state", "kind", "opname", "names", "npos",
                          "indices", "root_default", "synced", "prewait", "tensor_type",
                          "work_type", "failed", NULL};
    PyObject *orig, *slow, *state, *opname, *names, *indices, *tensor_type, *work_type, *failed;
    const char *kind;
    int npos, root_default, synced, prewait;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOsUO!iO!ippOOO", kwl, &orig, &slow, &state,
                                     &kind, &opname, &PyTuple_Type, &names, &npos, &PyDict_Type,
                                     &indices, &root_default, &synced, &prewait, &tensor_type,
                                     &work_type, &failed) ||
        ck_open(self, "torch_call") < 0)
        return NULL;
    Py_ssize_t nn = PyTuple_GET_SIZE(names);
    if (nn > TC_MAXP || npos < 0 || npos > nn || !PyType_Check(tensor_type)) {
        PyErr_SetString(PyExc_ValueError, "Checker.torch_call: a signature this cannot bind");
        return NULL;
    }
    int k;
    if (!strcmp(kind, "tensor"))
        k = TC_TENSOR;
    else if (!strcmp(kind, "barrier"))
        k = TC_BARRIER;
    else if (!strcmp(kind, "send") || !strcmp(kind, "recv"))
        k = TC_P2P;
    else {
        PyErr_Format(PyExc_ValueError, "Checker.torch_call: unknown kind %s", kind);
        return NULL;
    }
    PyObject *groups = PyObject_GetAttrString(state, "groups");
    if (!groups)
        return NULL;
    if (!PyDict_Check(groups)) {
        Py_DECREF(groups);
        PyErr_SetString(PyExc_TypeError, "Checker.torch_call: state.groups is not a dict");
        return NULL;
    }
    TorchCallObject *t = PyObject_GC_New(TorchCallObject, &TorchCall_Type);
    if (!t) {
        Py_DECREF(groups);
        return NULL;
    }
    t->vectorcall = (vectorcallfunc)tc_call;
    t->dict = NULL;
    t->chk = (CheckerObject *)Py_NewRef((PyObject *)self);
    t->orig = Py_NewRef(orig);
    t->slow = Py_NewRef(slow);
    t->state = Py_NewRef(state);
    t->groups = groups;
    t->tensor_type = Py_NewRef(tensor_type);
    t->work_type = Py_NewRef(work_type);
    t->failed = Py_NewRef(failed);
    t->opname = Py_NewRef(opname);
    t->opname_c = t->sum_c = NULL;
    t->redops = PyDict_New();
    t->nnames = (int)nn;
    t->npos = npos;
    t->kind = k;
    t->root_default = root_default;
    t->synced = synced;
    t->prewait = prewait;
    t->is_send = !strcmp(kind, "send");
    for (int i = 0; i < TC_MAXP; i++) {
        t->names[i] = NULL;
        if (i < nn) {
            PyObject *s = PyTuple_GET_ITEM(names, i);
            if (!PyUnicode_Check(s)) {
                PyErr_SetString(PyExc_TypeError, "Checker.torch_call: names are str");
                goto fail;
            }
            Py_INCREF(s);
            PyUnicode_InternInPlace(&s);
            t->names[i] = s;
        }
    }
    static const char *const roles[] = {"tensor", "op", "root", "group_root", "group", "async_op",
                                        "tag"};
    int *slots[] = {&t->i_tensor, &t->i_op, &t->i_rootw, &t->i_rootg, &t->i_group, &t->i_async,
                    &t->i_tag};
    for (size_t r = 0; r < sizeof roles / sizeof *roles; r++) {
        PyObject *o = PyDict_GetItemString(indices, roles[r]);
        long i = o ? PyLong_AsLong(o) : -1;
        if (i == -1 && PyErr_Occurred())
            goto fail;
        if (i < -1 || i >= nn) {
            PyErr_Format(PyExc_ValueError, "Checker.torch_call: index of %s out of range",
                         roles[r]);
            goto fail;
        }
        *slots[r] = (int)i;
    }
    if (!t->redops)
        goto fail;
    if (k == TC_TENSOR && t->i_tensor < 0) {
        PyErr_SetString(PyExc_ValueError, "Checker.torch_call: a tensor call needs its tensor");
        goto fail;
    }
    PyObject_GC_Track(t);
    return (PyObject *)t;
fail:
    PyObject_GC_Track(t);
    Py_DECREF(t);
    return NULL;
}

static PyObject *py_torch_depth(PyObject *m, PyObject *unused)
{
    return PyLong_FromLong(tc_depth);
}

static PyObject *py_torch_set_depth(PyObject *m, PyObject *arg)
{
    long d = PyLong_AsLong(arg);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    tc_depth = (int)d;
    Py_RETURN_NONE;
}

static PyMethodDef tc_module_methods[] = {
    {"_torch_depth", py_torch_depth, METH_NOARGS,
     "internal: this thread is inside a call cohort.torch checks (1) or not (0)"},
    {"_torch_set_depth", py_torch_set_depth, METH_O, "internal: see _torch_depth"},
    {"_torch_pass", py_torch_pass, METH_VARARGS,
     "internal: _torch_pass(orig, slow): a ProcessGroup method that is orig inside a checked "
     "call and slow otherwise"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef ck_methods[] = {
    {"group_id", (PyCFunction)ck_group_id, METH_VARARGS | METH_STATIC,
     "group_id(parent_id, creation_seq, world_ranks) -> int: the id every member of an "
     "external group computes alike (cohort_check_group_id)"},
    {"add_group", (PyCFunction)(void (*)(void))ck_add_group, METH_VARARGS | METH_KEYWORDS,
     "add_group(id, world_ranks, name=None) -> CheckGroup: registers an external group on this "
     "member (local; every member before its first call)"},
    {"remove_group", (PyCFunction)ck_remove_group, METH_O, "remove_group(group)"},
    {"begin", (PyCFunction)(void (*)(void))ck_begin, METH_VARARGS | METH_KEYWORDS,
     "begin(group, op, count=0, sig=None, sig_hash=None, redop=None, root=-1, args=None,\n"
     "      args_hash=None, file=None, line=None) -> seq\n"
     "The call is about to enter the backend. sig/args: readable forms (hashed with FNV-1a\n"
     "unless a hash is given). file/line: the call site (default: the Python caller outside\n"
     "the cohort package). Raises ContractError when the checker already failed."},
    {"end", (PyCFunction)(void (*)(void))ck_end, METH_VARARGS | METH_KEYWORDS,
     "end(group, seq, synced=False): the backend call returned; synced: its return implies "
     "every member entered it (compare now). Raises ContractError on a mismatch: do not use "
     "the backend's result then."},
    {"begin_tensor", (PyCFunction)(void (*)(void))ck_begin_tensor, METH_FASTCALL,
     "begin_tensor(group, op, tensor, redop, root) -> seq or None\n"
     "begin() with count, sig (the dtype's name, e.g. 'float32') and, for two or more\n"
     "dimensions, args 'shape AxB' read from a tensor's shape and dtype; None (nothing\n"
     "begun) when tensor has no readable shape tuple and dtype. Positional only."},
    {"torch_call", (PyCFunction)(void (*)(void))ck_torch_call, METH_VARARGS | METH_KEYWORDS,
     "torch_call(orig, slow, state, kind, opname, names, npos, indices, root_default, synced,\n"
     "           prewait, tensor_type, work_type, failed) -> TorchCall: cohort.torch's per-call\n"
     "path in C for one torch.distributed function (internal; python/cohort/torch)"},
    {"finish", (PyCFunction)(void (*)(void))ck_finish, METH_FASTCALL,
     "finish(group, seq, how): the backend call returned. how 0: end(group, seq); 1:\n"
     "end(group, seq, synced=True); 2: wait(group, seq) then end(group, seq) (a mutual\n"
     "group compared after a synchronising backend call)."},
    {"wait", (PyCFunction)(void (*)(void))ck_wait, METH_VARARGS | METH_KEYWORDS,
     "wait(group, seq, timeout=None): until call seq was compared"},
    {"wait_begin", (PyCFunction)(void (*)(void))ck_wait_begin, METH_VARARGS | METH_KEYWORDS,
     "wait_begin(group, peer, op, tag=-1, is_send=False, file=None, line=None): a blocking\n"
     "point-to-point call on group (None: unknown) waits for world rank peer (-1: any); for\n"
     "stall reports and deadlock detection"},
    {"fail_local", (PyCFunction)ck_fail_local, METH_VARARGS,
     "fail_local(group, text): this rank found the call's arguments inconsistent on its own;\n"
     "every rank gets '<group name>: text'. Raises ContractError once the report is out."},
    {"wait_end", (PyCFunction)ck_wait_end, METH_NOARGS, "wait_end()"},
    {"close", (PyCFunction)(void (*)(void))ck_close, METH_VARARGS | METH_KEYWORDS,
     "close(timeout=None): the closing check, collective over the world (call it last)"},
    {"destroy", (PyCFunction)ck_destroy, METH_NOARGS,
     "destroy(): stops the monitor, frees the checker; the world Group can be finalized after"},
    {"hold_abort", (PyCFunction)ck_hold_abort, METH_VARARGS,
     "hold_abort(wait=None): while this checker lives, a SIGABRT (a backend aborting the\n"
     "process, e.g. gloo on a size mismatch) waits up to `wait` seconds for the checker to\n"
     "fail; if it does, the report comes out on every rank and the process ends with\n"
     "exit_code; else the abort goes on. Needs exit_code. None: stop holding."},
    {"stats", (PyCFunction)ck_stats, METH_NOARGS,
     "stats() -> {'calls', 'compared', 'lazy', 'ring_waits'}"},
    {"__enter__", (PyCFunction)ck_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)ck_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ck_getset[] = {
    {"last_error", (getter)ck_last_error, NULL, "the first failure's report, or ''", NULL},
    {"status", (getter)ck_status, NULL, "0, or the status of the first failure", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Checker_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cohort.Checker",
    .tp_basicsize = sizeof(CheckerObject),
    .tp_dealloc = (destructor)ck_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc =
        "Checker(world, handler=None, *, abort=None, exit_code=None, stall_warn=None,\n"
        "        timeout=None, deadlock=None, transport='auto')\n"
        "The contract check for collectives of other libraries (cohort_check.h). Collective\n"
        "over world, which it borrows (not finalizable until destroy()). handler(kind, status,\n"
        "text) reports (monitor thread, with the GIL: each stall warning, the first fatal\n"
        "event) and returns; abort(kind, status, text) ends the backend once every rank\n"
        "reported; exit_code: then print the report and _exit(exit_code) from C.\n"
        "Times in seconds; None: the environment's defaults.",
    .tp_traverse = (traverseproc)ck_traverse,
    .tp_methods = ck_methods,
    .tp_getset = ck_getset,
    .tp_new = ck_new,
};

static void cg_dealloc(CheckGroupObject *self)
{
    Py_CLEAR(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *cg_repr(CheckGroupObject *self)
{
    return PyUnicode_FromFormat("<cohort.CheckGroup id %llx, member %d of %d%s>", self->id,
                                self->index, self->size, self->grp ? "" : ", removed");
}

static PyObject *cg_get_id(CheckGroupObject *self, void *c)
{
    return PyLong_FromUnsignedLongLong(self->id);
}
static PyObject *cg_get_size(CheckGroupObject *self, void *c)
{
    return PyLong_FromLong(self->size);
}
static PyObject *cg_get_index(CheckGroupObject *self, void *c)
{
    return PyLong_FromLong(self->index);
}
static PyObject *cg_get_mutual(CheckGroupObject *self, void *c)
{
    return PyBool_FromLong(cohort_check_group_mutual(self->grp));
}

static PyGetSetDef cg_getset[] = {
    {"id", (getter)cg_get_id, NULL, "the group id", NULL},
    {"size", (getter)cg_get_size, NULL, "members", NULL},
    {"index", (getter)cg_get_index, NULL, "this rank's index in the group (-1: not a member)",
     NULL},
    {"mutual", (getter)cg_get_mutual, NULL,
     "two members on one host that compare each other: Checker.wait after a synchronising "
     "backend call compares with every member (cohort_check_group_mutual)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CheckGroup_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cohort.CheckGroup",
    .tp_basicsize = sizeof(CheckGroupObject),
    .tp_dealloc = (destructor)cg_dealloc,
    .tp_repr = (reprfunc)cg_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An external group registered with a Checker (Checker.add_group).",
    .tp_getset = cg_getset,
};

int cpy_check_add(PyObject *m)
{
    if (PyType_Ready(&Checker_Type) < 0 || PyType_Ready(&CheckGroup_Type) < 0 ||
        PyType_Ready(&TorchCall_Type) < 0 || PyType_Ready(&TorchPass_Type) < 0 ||
        PyModule_AddFunctions(m, tc_module_methods) < 0)
        return -1;
    if (!(cpy_str_default_cg = PyUnicode_InternFromString("default_cg")) ||
        !(cpy_str_group_for = PyUnicode_InternFromString("group_for")) ||
        !(cpy_str_redop = PyUnicode_InternFromString("redop")) ||
        !(cpy_str_group_rank = PyUnicode_InternFromString("group_rank")) ||
        !(cpy_str_sum = PyUnicode_InternFromString("SUM")))
        return -1;
    if (!(cpy_str_shape = PyUnicode_InternFromString("shape")) ||
        !(cpy_str_dtype = PyUnicode_InternFromString("dtype")) ||
        !(cpy_str_torch_prefix = PyUnicode_InternFromString("torch.")) ||
        !(cpy_str_empty = PyUnicode_InternFromString("")))
        return -1;
    if (PyModule_AddObjectRef(m, "Checker", (PyObject *)&Checker_Type) < 0 ||
        PyModule_AddObjectRef(m, "CheckGroup", (PyObject *)&CheckGroup_Type) < 0 ||
        PyModule_AddObjectRef(m, "TorchCall", (PyObject *)&TorchCall_Type) < 0 ||
        PyModule_AddIntConstant(m, "CHECK_MISMATCH", COHORT_CHECK_MISMATCH) < 0 ||
        PyModule_AddIntConstant(m, "CHECK_STALL", COHORT_CHECK_STALL) < 0 ||
        PyModule_AddIntConstant(m, "CHECK_TIMEOUT", COHORT_CHECK_TIMEOUT) < 0 ||
        PyModule_AddIntConstant(m, "CHECK_DEADLOCK", COHORT_CHECK_DEADLOCK) < 0 ||
        PyModule_AddIntConstant(m, "CHECK_ABORTED", COHORT_CHECK_ABORTED) < 0)
        return -1;
    return 0;
}
