/*
 * group.c - cohort.Group (a cohort_group) and cohort.Work (an async call).
 *
 * Every blocking call releases the GIL and is guarded against Ctrl-C
 * (interrupt.c). Buffers are taken without a copy (buffer.c) and checked
 * before the call. An async call's Work holds its buffers (and the Python
 * objects behind them) until it completed: a Work dropped while pending
 * hands them to its group, which releases them once the call finished.
 */
#include "cohort_py.h"

#include <string.h>

typedef struct orphan {
    struct orphan *next;
    cohort_work *w;
    cpy_buf b[2];
} orphan;

typedef struct WorkObject WorkObject;

typedef struct GroupObject {
    PyObject_HEAD
    cohort_group *g;          /* NULL once finalized */
    int rank, size;
    unsigned long generation;
    int issuing;              /* a thread is issuing a call (one at a time) */
    int inflight;             /* threads inside the library on g */
    int borrowers;            /* objects using g (a Checker): no finalize */
    PyObject *parent;         /* Group, or NULL for the world */
    PyObject *children;       /* list of weakrefs to sub-groups */
    orphan *orphans;          /* dropped pending Works' buffers */
    WorkObject *pending;      /* live Works not yet completed */
    PyObject *weakreflist;
} GroupObject;

struct WorkObject {
    PyObject_HEAD
    GroupObject *group;
    cohort_work *w;           /* NULL once completed */
    cpy_buf b[2];
    PyObject *result;         /* returned by wait() */
    const char *name;
    int done;
    cohort_status st;
    PyObject *error;          /* the exception of a failed call, raised by wait() */
    WorkObject *next, *prev;  /* in group->pending */
};

enum kind {
    K_ALL_REDUCE,
    K_BROADCAST,
    K_REDUCE,
    K_ALL_GATHER,
    K_GATHER,
    K_SCATTER,
    K_REDUCE_SCATTER,
    K_ALL_TO_ALL,
    K_BARRIER,
    K_SEND,
    K_RECV,
};

typedef struct call {
    int kind;
    const char *name;
    const void *send;
    void *recv;
    size_t count;
    int dt, op, root, tag;
    const char *file;
    int line;
} call;

static cohort_status issue(cohort_group *g, const call *c, cohort_work **w)
{
    const char *f = c->file;
    int l = c->line;
    cohort_dtype dt = (cohort_dtype)c->dt;
    cohort_op op = (cohort_op)c->op;
    switch (c->kind) {
    case K_ALL_REDUCE:
        return w ? cohort_all_reduce_async_at(f, l, g, c->send, c->recv, c->count, dt, op, w)
                 : cohort_all_reduce_at(f, l, g, c->send, c->recv, c->count, dt, op);
    case K_BROADCAST:
        return w ? cohort_broadcast_async_at(f, l, g, c->recv, c->count, dt, c->root, w)
                 : cohort_broadcast_at(f, l, g, c->recv, c->count, dt, c->root);
    case K_REDUCE:
        return w ? cohort_reduce_async_at(f, l, g, c->send, c->recv, c->count, dt, op, c->root, w)
                 : cohort_reduce_at(f, l, g, c->send, c->recv, c->count, dt, op, c->root);
    case K_ALL_GATHER:
        return w ? cohort_all_gather_async_at(f, l, g, c->send, c->recv, c->count, dt, w)
                 : cohort_all_gather_at(f, l, g, c->send, c->recv, c->count, dt);
    case K_GATHER:
        return w ? cohort_gather_async_at(f, l, g, c->send, c->recv, c->count, dt, c->root, w)
                 : cohort_gather_at(f, l, g, c->send, c->recv, c->count, dt, c->root);
    case K_SCATTER:
        return w ? cohort_scatter_async_at(f, l, g, c->send, c->recv, c->count, dt, c->root, w)
                 : cohort_scatter_at(f, l, g, c->send, c->recv, c->count, dt, c->root);
    case K_REDUCE_SCATTER:
        return w ? cohort_reduce_scatter_async_at(f, l, g, c->send, c->recv, c->count, dt, op, w)
                 : cohort_reduce_scatter_at(f, l, g, c->send, c->recv, c->count, dt, op);
    case K_ALL_TO_ALL:
        return w ? cohort_all_to_all_async_at(f, l, g, c->send, c->recv, c->count, dt, w)
                 : cohort_all_to_all_at(f, l, g, c->send, c->recv, c->count, dt);
    case K_BARRIER:
        return w ? cohort_barrier_async_at(f, l, g, w) : cohort_barrier_at(f, l, g);
    case K_SEND:
        return w ? cohort_send_async_at(f, l, g, c->send, c->count, dt, c->root, c->tag, w)
                 : cohort_send_at(f, l, g, c->send, c->count, dt, c->root, c->tag);
    case K_RECV:
        return w ? cohort_recv_async_at(f, l, g, c->recv, c->count, dt, c->root, c->tag, w)
                 : cohort_recv_at(f, l, g, c->recv, c->count, dt, c->root, c->tag);
    default:
        return COHORT_ERR_INVALID;
    }
}

/* ---- group state ---- */

static int check_open(GroupObject *self, const char *what)
{
    if (!self->g) {
        PyErr_Format(cpy_error_class(COHORT_ERR_INVALID), "%s: the group is finalized", what);
        return -1;
    }
    return 0;
}

/* Frees the buffers of orphaned Works whose call has finished. */
static void reap_orphans(GroupObject *self, int wait)
{
    orphan **pp = &self->orphans;
    while (*pp) {
        orphan *o = *pp;
        int done = 0;
        if (wait) {
            Py_BEGIN_ALLOW_THREADS
            cohort_work_wait(o->w, -1);
            Py_END_ALLOW_THREADS
            done = 1;
        } else {
            cohort_work_test(o->w, &done);
        }
        if (!done) {
            pp = &o->next;
            continue;
        }
        *pp = o->next;
        cohort_work_free(o->w);
        cpy_buf_release(&o->b[0]);
        cpy_buf_release(&o->b[1]);
        PyMem_Free(o);
    }
}

static int begin_issue(GroupObject *self, const char *what)
{
    if (check_open(self, what) < 0)
        return -1;
    if (self->issuing) {
        PyErr_Format(cpy_error_class(COHORT_ERR_INVALID),
                     "%s: another thread is issuing a call on this group (calls on a group "
                     "must come from one thread at a time)",
                     what);
        return -1;
    }
    if (self->orphans)
        reap_orphans(self, 0);
    return 0;
}

/* The error of a call that returned st on this group. */
static PyObject *raise_call(GroupObject *self, cohort_status st, int fired)
{
    /* A SIGINT that aborted the call: Python's handler raises
     * KeyboardInterrupt here (fired: ours saw it; else it may have come
     * just before the call) */
    (void)fired;
    if (PyErr_CheckSignals() < 0)
        return NULL;
    return cpy_raise(st, cohort_last_error(self->g), self->g);
}

/* ---- Work ---- */

static void work_unlink(WorkObject *w)
{
    GroupObject *g = w->group;
    if (!g)
        return;
    if (w->prev)
        w->prev->next = w->next;
    else if (g->pending == w)
        g->pending = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->next = w->prev = NULL;
}

/* Records the outcome of a finished call and releases its buffers. */
static void work_complete(WorkObject *w, cohort_status st)
{
    w->done = 1;
    w->st = st;
    if (st != COHORT_OK && !w->error) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        cpy_raise(st, w->group->g ? cohort_last_error(w->group->g) : "", w->group->g);
        PyObject *et, *ev, *etb;
        PyErr_Fetch(&et, &ev, &etb);
        PyErr_NormalizeException(&et, &ev, &etb);
        w->error = ev;
        Py_XDECREF(et), Py_XDECREF(etb);
        PyErr_Restore(t, v, tb);
    }
    cohort_work_free(w->w);
    w->w = NULL;
    cpy_buf_release(&w->b[0]);
    cpy_buf_release(&w->b[1]);
    work_unlink(w);
}

static PyObject *work_result(WorkObject *w)
{
    if (w->st != COHORT_OK) {
        if (w->error) {
            PyErr_SetObject((PyObject *)Py_TYPE(w->error), w->error);
            return NULL;
        }
        return cpy_raise(w->st, "", NULL);
    }
    return Py_NewRef(w->result ? w->result : Py_None);
}

static PyObject *work_wait(WorkObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"timeout", NULL};
    PyObject *to = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwl, &to))
        return NULL;
    int ms = -1;
    if (to != Py_None) {
        double s = PyFloat_AsDouble(to);
        if (s == -1.0 && PyErr_Occurred())
            return NULL;
        if (s < 0 || s > 2e6) {
            PyErr_Format(PyExc_ValueError, "wait: timeout must be 0..2e6 seconds or None, got %g",
                         s);
            return NULL;
        }
        ms = (int)(s * 1000 + 0.5);
    }
    if (self->done)
        return work_result(self);
    GroupObject *g = self->group;
    cohort_status st;
    g->inflight++;
    int fired;
    Py_BEGIN_ALLOW_THREADS
    int tok = cpy_intr_enter(g->g);
    st = cohort_work_wait(self->w, ms);
    fired = cpy_intr_leave(tok);
    Py_END_ALLOW_THREADS
    g->inflight--;
    if (self->done) /* another thread finished it meanwhile */
        return work_result(self);
    (void)fired;
    if (st != COHORT_OK && PyErr_CheckSignals() < 0) {
        work_complete(self, st);
        return NULL;
    }
    work_complete(self, st);
    return work_result(self);
}

static PyObject *work_test(WorkObject *self, PyObject *unused)
{
    if (!self->done) {
        int done = 0;
        cohort_status st = cohort_work_test(self->w, &done);
        if (!done)
            Py_RETURN_FALSE;
        work_complete(self, st);
    }
    if (self->st != COHORT_OK)
        return work_result(self);
    Py_RETURN_TRUE;
}

static PyObject *work_done(WorkObject *self, void *c)
{
    return PyBool_FromLong(self->done);
}

static PyObject *work_repr(WorkObject *self)
{
    return PyUnicode_FromFormat("<cohort.Work %s %s>", self->name,
                                !self->done ? "pending"
                                : self->st == COHORT_OK ? "done"
                                                        : cohort_status_name(self->st));
}

static void work_dealloc(WorkObject *self)
{
    if (self->w && self->group) {
        /* Pending: the group keeps the buffers until the call finished. */
        orphan *o = PyMem_Malloc(sizeof *o);
        if (o) {
            o->w = self->w;
            o->b[0] = self->b[0];
            o->b[1] = self->b[1];
            o->next = self->group->orphans;
            self->group->orphans = o;
        } else {
            Py_BEGIN_ALLOW_THREADS
            cohort_work_wait(self->w, -1);
            Py_END_ALLOW_THREADS
            cohort_work_free(self->w);
            cpy_buf_release(&self->b[0]);
            cpy_buf_release(&self->b[1]);
        }
        self->w = NULL;
        work_unlink(self);
    } else {
        cpy_buf_release(&self->b[0]);
        cpy_buf_release(&self->b[1]);
    }
    Py_CLEAR(self->result);
    Py_CLEAR(self->error);
    Py_CLEAR(self->group);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef work_methods[] = {
    {"wait", (PyCFunction)(void (*)(void))work_wait, METH_VARARGS | METH_KEYWORDS,
     "wait(timeout=None) -> the output buffer (None for calls without one)\n\n"
     "Blocks (GIL released) until the call finished; raises its error. timeout in seconds;\n"
     "None: the group's timeout. A wait that times out poisons the group."},
    {"test", (PyCFunction)work_test, METH_NOARGS,
     "test() -> bool: True once the call finished (raises its error), False while pending."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef work_getset[] = {
    {"done", (getter)work_done, NULL, "True once wait() or test() saw the call finish", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject CpyWork_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cohort.Work",
    .tp_basicsize = sizeof(WorkObject),
    .tp_dealloc = (destructor)work_dealloc,
    .tp_repr = (reprfunc)work_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An async call in progress. Its buffers belong to cohort until wait() or test()\n"
              "reports completion: do not read the output or write the input before then.",
    .tp_methods = work_methods,
    .tp_getset = work_getset,
};

/* ---- running a call ---- */

/* Runs c on the group, blocking or async; takes ownership of b[0..1]
 * (released on every path). result: what the call returns. */
static PyObject *run(GroupObject *self, call *c, cpy_buf *b, PyObject *result, int async)
{
    cohort_status st;
    /* Two different views of overlapping memory are neither in place nor
     * out of place: the result would be silently wrong. */
    if (b[0].ptr && b[1].ptr && b[0].ptr != b[1].ptr && b[0].nbytes && b[1].nbytes &&
        (char *)b[0].ptr < (char *)b[1].ptr + b[1].nbytes &&
        (char *)b[1].ptr < (char *)b[0].ptr + b[0].nbytes) {
        PyErr_Format(PyExc_ValueError,
                     "%s: send and recv overlap without being the same buffer (pass the same "
                     "object, or recv=None, for in place)",
                     c->name);
        cpy_buf_release(&b[0]);
        cpy_buf_release(&b[1]);
        return NULL;
    }
    if (!async) {
        self->issuing++;
        self->inflight++;
        int fired;
        Py_BEGIN_ALLOW_THREADS
        int tok = cpy_intr_enter(self->g);
        st = issue(self->g, c, NULL);
        fired = cpy_intr_leave(tok);
        Py_END_ALLOW_THREADS
        self->inflight--;
        self->issuing--;
        cpy_buf_release(&b[0]);
        cpy_buf_release(&b[1]);
        if (st != COHORT_OK)
            return raise_call(self, st, fired);
        return Py_NewRef(result ? result : Py_None);
    }
    WorkObject *w = PyObject_New(WorkObject, &CpyWork_Type);
    if (!w) {
        cpy_buf_release(&b[0]);
        cpy_buf_release(&b[1]);
        return NULL;
    }
    w->group = (GroupObject *)Py_NewRef(self);
    w->w = NULL;
    w->b[0] = b[0];
    w->b[1] = b[1];
    w->result = Py_XNewRef(result);
    w->name = c->name;
    w->done = 0;
    w->st = COHORT_OK;
    w->error = NULL;
    w->next = w->prev = NULL;
    self->issuing++;
    self->inflight++;
    cohort_work *cw = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = issue(self->g, c, &cw);
    Py_END_ALLOW_THREADS
    self->inflight--;
    self->issuing--;
    if (st != COHORT_OK || !cw) {
        PyObject *r = raise_call(self, st != COHORT_OK ? st : COHORT_ERR_INVALID, 0);
        Py_DECREF(w); /* releases the buffers (w->w is NULL) */
        return r;
    }
    w->w = cw;
    w->next = self->pending;
    if (self->pending)
        self->pending->prev = w;
    self->pending = w;
    return (PyObject *)w;
}

/* ---- argument helpers ---- */

static int parse_root(PyObject *o, const char *what, const char *name, int *v)
{
    long x = PyLong_AsLong(o);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (x < INT32_MIN || x > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: %s %ld is out of range", what, name, x);
        return -1;
    }
    *v = (int)x;
    return 0;
}

static int same_dtype(const char *what, const cpy_buf *a, const char *an, const cpy_buf *b,
                      const char *bn)
{
    if (a->dtype == b->dtype)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s: %s is %s but %s is %s (pass dtype= to reinterpret both)",
                 what, an, cohort_dtype_name((cohort_dtype)a->dtype), bn,
                 cohort_dtype_name((cohort_dtype)b->dtype));
    return -1;
}

static int wrong_size(const char *what, const char *bn, size_t have, size_t want,
                      const char *why)
{
    PyErr_Format(PyExc_ValueError, "%s: %s has %zu elements, expected %zu (%s)", what, bn, have,
                 want, why);
    return -1;
}

#define PARSE_COMMON                                                                               \
    int dt = -1, op = COHORT_SUM;                                                                  \
    cpy_buf b[2];                                                                                  \
    memset(b, 0, sizeof b);                                                                        \
    call c;                                                                                        \
    memset(&c, 0, sizeof c);                                                                       \
    c.op = -1;                                                                                     \
    c.root = -1;                                                                                   \
    (void)op

#define FAIL_RELEASE                                                                               \
    do {                                                                                           \
        cpy_buf_release(&b[0]);                                                                    \
        cpy_buf_release(&b[1]);                                                                    \
        return NULL;                                                                               \
    } while (0)

/* all_reduce(send, recv=None, op=SUM, *, dtype=None) */
static PyObject *all_reduce_impl(GroupObject *self, PyObject *args, PyObject *kw, int async)
{
    static char *kwl[] = {"send", "recv", "op", "dtype", NULL};
    const char *what = async ? "all_reduce_async" : "all_reduce";
    PyObject *send, *recv = Py_None, *opo = NULL, *dto = NULL;
    PARSE_COMMON;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO$O", kwl, &send, &recv, &opo, &dto) ||
        cpy_parse_dtype(dto, &dt) < 0 || cpy_parse_op(opo, &op) < 0 || begin_issue(self, what) < 0)
        return NULL;
    int inplace = recv == Py_None || recv == send;
    if (cpy_buf_get(send, what, "send", inplace ? CPY_OUT : CPY_IN, dt, &b[0]) < 0)
        return NULL;
    if (!inplace) {
        if (cpy_buf_get(recv, what, "recv", CPY_OUT, dt, &b[1]) < 0 ||
            same_dtype(what, &b[0], "send", &b[1], "recv") < 0)
            FAIL_RELEASE;
        if (b[1].count != b[0].count) {
            wrong_size(what, "recv", b[1].count, b[0].count, "as many as send");
            FAIL_RELEASE;
        }
    }
    c.kind = K_ALL_REDUCE;
    c.send = b[0].ptr;
    c.recv = inplace ? b[0].ptr : b[1].ptr;
    c.count = b[0].count;
    c.dt = b[0].dtype;
    c.op = op;
    c.name = what;
    cpy_callsite(&c.file, &c.line);
    return run(self, &c, b, inplace ? send : recv, async);
}

/* broadcast(buf, root=0, *, dtype=None) */
static PyObject *broadcast_impl(GroupObject *self, PyObject *args, PyObject *kw, int async)
{
    static char *kwl[] = {"buf", "root", "dtype", NULL};
    const char *what = async ? "broadcast_async" : "broadcast";
    PyObject *buf, *rooto = NULL, *dto = NULL;
    PARSE_COMMON;
    int root = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$O", kwl, &buf, &rooto, &dto) ||
        cpy_parse_dtype(dto, &dt) < 0 || (rooto && parse_root(rooto, what, "root", &root) < 0) ||
        begin_issue(self, what) < 0)
        return NULL;
    /* the root only reads it */
    if (cpy_buf_get(buf, what, "buf", root == self->rank ? CPY_IN : CPY_OUT, dt, &b[0]) < 0)
        return NULL;
    c.kind = K_BROADCAST;
    c.recv = b[0].ptr;
    c.count = b[0].count;
    c.dt = b[0].dtype;
    c.root = root;
    c.name = what;
    cpy_callsite(&c.file, &c.line);
    return run(self, &c, b, buf, async);
}

/* reduce(send, recv=None, op=SUM, root=0, *, dtype=None) */
static PyObject *reduce_impl(GroupObject *self, PyObject *args, PyObject *kw, int async)
{
    static char *kwl[] = {"send", "recv", "op", "root", "dtype", NULL};
    const char *what = async ? "reduce_async" : "reduce";
    PyObject *send, *recv = Py_None, *opo = NULL, *rooto = NULL, *dto = NULL;
    PARSE_COMMON;
    int root = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO$O", kwl, &send, &recv, &opo, &rooto,
                                     &dto) ||
        cpy_parse_dtype(dto, &dt) < 0 || cpy_parse_op(opo, &op) < 0 ||
        (rooto && parse_root(rooto, what, "root", &root) < 0) || begin_issue(self, what) < 0)
        return NULL;
    int at_root = root == self->rank;
    int inplace = recv == Py_None || recv == send;
    if (cpy_buf_get(send, what, "send", inplace && at_root ? CPY_OUT : CPY_IN, dt, &b[0]) < 0)
        return NULL;
    PyObject *result = Py_None;
    c.recv = NULL; /* off the root the result is nobody's: the library uses scratch */
    if (at_root) {
        if (inplace) {
            c.recv = b[0].ptr;
            result = send;
        } else {
            if (cpy_buf_get(recv, what, "recv", CPY_OUT, dt, &b[1]) < 0 ||
                same_dtype(what, &b[0], "send", &b[1], "recv") < 0)
                FAIL_RELEASE;
            if (b[1].count != b[0].count) {
                wrong_size(what, "recv", b[1].count, b[0].count, "as many as send");
                FAIL_RELEASE;
            }
            c.recv = b[1].ptr;
            result = recv;
        }
    }
    c.kind = K_REDUCE;
    c.send = b[0].ptr;
    c.count = b[0].count;
    c.dt = b[0].dtype;
    c.op = op;
    c.root = root;
    c.name = what;
    cpy_callsite(&c.file, &c.line);
    return run(self, &c, b, result, async);
}

/* all_gather(send, recv, *, dtype=None): send None or send is recv: in
 * place (this rank's input is its slot of recv) */
static PyObject *all_gather_impl(GroupObject *self, PyObject *args, PyObject *kw, int async)
{
    static char *kwl[] = {"send", "recv", "dtype", NULL};
    const char *what = async ? "all_gather_async" : "all_gather";
    PyObject *send, *recv, *dto = NULL;
    PARSE_COMMON;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$O", kwl, &send, &recv, &dto) ||
        cpy_parse_dtype(dto, &dt) < 0 || begin_issue(self, what) < 0)
        return NULL;
    int inplace = send == Py_None || send == recv;
    if (cpy_buf_get(recv, what, "recv", CPY_OUT, dt, &b[1]) < 0)
        return NULL;
    size_t n = (size_t)self->size;
    if (inplace) {
        if (b[1].count % n) {
            wrong_size(what, "recv", b[1].count, (b[1].count / n + 1) * n,
                       "a multiple of the group size");
            FAIL_RELEASE;
        }
        c.count = b[1].count / n;
        c.send = b[1].ptr;
    } else {
        if (cpy_buf_get(send, what, "send", CPY_IN, dt, &b[0]) < 0 ||
            same_dtype(what, &b[0], "send", &b[1], "recv") < 0)
            FAIL_RELEASE;
        if (b[1].count != b[0].count * n) {
            wrong_size(what, "recv", b[1].count, b[0].count * n, "group size x send");
            FAIL_RELEASE;
        }
        c.count = b[0].count;
        c.send = b[0].ptr;
    }
    c.kind = K_ALL_GATHER;
    c.recv = b[1].ptr;
    c.dt = b[1].dtype;
    c.name = what;
    cpy_callsite(&c.file, &c.line);
    return run(self, &c, b, recv, async);
}

/* gather(send, recv=None, root=0, *, dtype=None): recv (group size x send)
 * at the root only; send None or send is recv at the root: in place */
static PyObject *gather_impl(GroupObject *self, PyObject *args, PyObject *kw, int async)
{
    static char *kwl[] = {"send", "recv", "root", "dtype", NULL};
    const char *what = async ? "gather_async" : "gather";
    PyObject *send, *recv = Py_None, *rooto = NULL, *dto = NULL;
    PARSE_COMMON;
    int root = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO$O", kwl, &send, &recv, &rooto, &dto) ||
        cpy_parse_dtype(dto, &dt) < 0 || (rooto && parse_root(rooto, what, "root", &root) < 0) ||
        begin_issue(self, what) < 0)
        return NULL;
    int at_root = root == self->rank;
    size_t n = (size_t)self->size;
    PyObject *result = Py_None;
    if (at_root) {
        if (cpy_buf_get(recv, what, "recv", CPY_OUT, dt, &b[1]) < 0)
            return NULL;
        result = recv;
        if (send == Py_None || send == recv) {
            if (b[1].count % n) {
                wrong_size(what, "recv", b[1].count, (b[1].count / n + 1) * n,
                           "a multiple of the group size");
                FAIL_RELEASE;
            }
            c.count = b[1].count / n;
            c.send = b[1].ptr;
        } else {
            if (cpy_buf_get(send, what, "send", CPY_IN, dt, &b[0]) < 0 ||
                same_dtype(what, &b[0], "send", &b[1], "recv") < 0)
                FAIL_RELEASE;
            if (b[1].count != b[0].count * n) {
                wrong_size(what, "recv", b[1].count, b[0].count * n, "group size x send");
                FAIL_RELEASE;
            }
            c.count = b[0].count;
            c.send = b[0].ptr;
        }
        c.recv = b[1].ptr;
        c.dt = b[1].dtype;
    } else {
        if (cpy_buf_get(send, what, "send", CPY_IN, dt, &b[0]) < 0)
            return NULL;
        c.count = b[0].count;
        c.send = b[0].ptr;
        c.dt = b[0].dtype;
    }
    c.kind = K_GATHER;
    c.root = root;
    c.name = what;
    cpy_callsite(&c.file, &c.line);
    return run(self, &c, b, result, async);
}

/* scatter(send, recv=None, root=0, *, dtype=None): send (group size x recv)
 * at the root only; recv None or recv is send at the root: in place */
static PyObject *scatter_impl(GroupObject *self, PyObject *args, PyObject *kw, int async)
{
    static char *kwl[] = {"send", "recv", "root", "dtype", NULL};
    const char *what = async ? "scatter_async" : "scatter";
    PyObject *send, *recv = Py_None, *rooto = NULL, *dto = NULL;
    PARSE_COMMON;
    int root = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO$O", kwl, &send, &recv, &rooto, &dto) ||
        cpy_parse_dtype(dto, &dt) < 0 || (rooto && parse_root(rooto, what, "root", &root) < 0) ||
        begin_issue(self, what) < 0)
        return NULL;
    int at_root = root == self->rank;
    size_t n = (size_t)self->size;
    PyObject *result;
    if (at_root) {
        if (cpy_buf_get(send, what, "send", CPY_IN, dt, &b[0]) < 0)
            return NULL;
        if (recv == Py_None || recv == send) {
            if (b[0].count % n) {
                wrong_size(what, "send", b[0].count, (b[0].count / n + 1) * n,
                           "a multiple of the group size");
                FAIL_RELEASE;
            }
            c.count = b[0].count / n;
            c.recv = b[0].ptr;
            result = send;
        } else {
            if (cpy_buf_get(recv, what, "recv", CPY_OUT, dt, &b[1]) < 0 ||
                same_dtype(what, &b[0], "send", &b[1], "recv") < 0)
                FAIL_RELEASE;
            if (b[0].count != b[1].count * n) {
                wrong_size(what, "send", b[0].count, b[1].count * n, "group size x recv");
                FAIL_RELEASE;
            }
            c.count = b[1].count;
            c.recv = b[1].ptr;
            result = recv;
        }
        c.send = b[0].ptr;
        c.dt = b[0].dtype;
    } else {
        /* off the root, send is not used: recv is the second argument or,
         * for symmetry with the root's in-place form, the first */
        PyObject *out = recv != Py_None ? recv : send;
        if (cpy_buf_get(out, what, "recv", CPY_OUT, dt, &b[1]) < 0)
            return NULL;
        c.count = b[1].count;
        c.recv = b[1].ptr;
        c.dt = b[1].dtype;
        result = out;
    }
    c.kind = K_SCATTER;
    c.root = root;
    c.name = what;
    cpy_callsite(&c.file, &c.line);
    return run(self, &c, b, result, async);
}

/* reduce_scatter(send, recv=None, op=SUM, *, dtype=None): send has group
 * size x recv elements; recv None or recv is send: in place (the result is
 * the first 1/size of send) */
static PyObject *reduce_scatter_impl(GroupObject *self, PyObject *args, PyObject *kw, int async)
{
    static char *kwl[] = {"send", "recv", "op", "dtype", NULL};
    const char *what = async ? "reduce_scatter_async" : "reduce_scatter";
    PyObject *send, *recv = Py_None, *opo = NULL, *dto = NULL;
    PARSE_COMMON;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO$O", kwl, &send, &recv, &opo, &dto) ||
        cpy_parse_dtype(dto, &dt) < 0 || cpy_parse_op(opo, &op) < 0 || begin_issue(self, what) < 0)
        return NULL;
    int inplace = recv == Py_None || recv == send;
    size_t n = (size_t)self->size;
    if (cpy_buf_get(send, what, "send", inplace ? CPY_OUT : CPY_IN, dt, &b[0]) < 0)
        return NULL;
    if (inplace) {
        if (b[0].count % n) {
            wrong_size(what, "send", b[0].count, (b[0].count / n + 1) * n,
                       "a multiple of the group size");
            FAIL_RELEASE;
        }
        c.count = b[0].count / n;
        c.recv = b[0].ptr;
    } else {
        if (cpy_buf_get(recv, what, "recv", CPY_OUT, dt, &b[1]) < 0 ||
            same_dtype(what, &b[0], "send", &b[1], "recv") < 0)
            FAIL_RELEASE;
        if (b[0].count != b[1].count * n) {
            wrong_size(what, "send", b[0].count, b[1].count * n, "group size x recv");
            FAIL_RELEASE;
        }
        c.count = b[1].count;
        c.recv = b[1].ptr;
    }
    c.kind = K_REDUCE_SCATTER;
    c.send = b[0].ptr;
    c.dt = b[0].dtype;
    c.op = op;
    c.name = what;
    cpy_callsite(&c.file, &c.line);
    return run(self, &c, b, inplace ? send : recv, async);
}

/* all_to_all(send, recv=None, *, dtype=None): block j of send goes to rank j */
static PyObject *all_to_all_impl(GroupObject *self, PyObject *args, PyObject *kw, int async)
{
    static char *kwl[] = {"send", "recv", "dtype", NULL};
    const char *what = async ? "all_to_all_async" : "all_to_all";
    PyObject *send, *recv = Py_None, *dto = NULL;
    PARSE_COMMON;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$O", kwl, &send, &recv, &dto) ||
        cpy_parse_dtype(dto, &dt) < 0 || begin_issue(self, what) < 0)
        return NULL;
    int inplace = recv == Py_None || recv == send;
    size_t n = (size_t)self->size;
    if (cpy_buf_get(send, what, "send", inplace ? CPY_OUT : CPY_IN, dt, &b[0]) < 0)
        return NULL;
    if (b[0].count % n) {
        wrong_size(what, "send", b[0].count, (b[0].count / n + 1) * n,
                   "a multiple of the group size");
        FAIL_RELEASE;
    }
    if (!inplace) {
        if (cpy_buf_get(recv, what, "recv", CPY_OUT, dt, &b[1]) < 0 ||
            same_dtype(what, &b[0], "send", &b[1], "recv") < 0)
            FAIL_RELEASE;
        if (b[1].count != b[0].count) {
            wrong_size(what, "recv", b[1].count, b[0].count, "as many as send");
            FAIL_RELEASE;
        }
    }
    c.kind = K_ALL_TO_ALL;
    c.send = b[0].ptr;
    c.recv = inplace ? b[0].ptr : b[1].ptr;
    c.count = b[0].count / n;
    c.dt = b[0].dtype;
    c.name = what;
    cpy_callsite(&c.file, &c.line);
    return run(self, &c, b, inplace ? send : recv, async);
}

static PyObject *barrier_impl(GroupObject *self, PyObject *args, PyObject *kw, int async)
{
    static char *kwl[] = {NULL};
    const char *what = async ? "barrier_async" : "barrier";
    PARSE_COMMON;
    (void)dt;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "", kwl) || begin_issue(self, what) < 0)
        return NULL;
    c.kind = K_BARRIER;
    c.name = what;
    cpy_callsite(&c.file, &c.line);
    return run(self, &c, b, NULL, async);
}

/* send(buf, peer, tag=0, *, dtype=None) / recv(buf, peer, tag=0, *, dtype=None) */
static PyObject *p2p_impl(GroupObject *self, PyObject *args, PyObject *kw, int async, int is_send)
{
    static char *kwl[] = {"buf", "peer", "tag", "dtype", NULL};
    const char *what = is_send ? (async ? "send_async" : "send") : (async ? "recv_async" : "recv");
    PyObject *buf, *peero, *dto = NULL;
    int tag = 0, peer;
    PARSE_COMMON;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|i$O", kwl, &buf, &peero, &tag, &dto) ||
        cpy_parse_dtype(dto, &dt) < 0 || parse_root(peero, what, "peer", &peer) < 0 ||
        begin_issue(self, what) < 0)
        return NULL;
    if (cpy_buf_get(buf, what, "buf", is_send ? CPY_IN : CPY_OUT, dt, &b[0]) < 0)
        return NULL;
    c.kind = is_send ? K_SEND : K_RECV;
    c.send = b[0].ptr;
    c.recv = b[0].ptr;
    c.count = b[0].count;
    c.dt = b[0].dtype;
    c.root = peer;
    c.tag = tag;
    c.name = what;
    cpy_callsite(&c.file, &c.line);
    return run(self, &c, b, is_send ? NULL : buf, async);
}

#define WRAP(name)                                                                                 \
    static PyObject *g_##name(PyObject *s, PyObject *a, PyObject *k)                               \
    {                                                                                              \
        return name##_impl((GroupObject *)s, a, k, 0);                                             \
    }                                                                                              \
    static PyObject *g_##name##_async(PyObject *s, PyObject *a, PyObject *k)                       \
    {                                                                                              \
        return name##_impl((GroupObject *)s, a, k, 1);                                             \
    }
WRAP(all_reduce)
WRAP(broadcast)
WRAP(reduce)
WRAP(all_gather)
WRAP(gather)
WRAP(scatter)
WRAP(reduce_scatter)
WRAP(all_to_all)
WRAP(barrier)

static PyObject *g_send(PyObject *s, PyObject *a, PyObject *k)
{
    return p2p_impl((GroupObject *)s, a, k, 0, 1);
}
static PyObject *g_send_async(PyObject *s, PyObject *a, PyObject *k)
{
    return p2p_impl((GroupObject *)s, a, k, 1, 1);
}
static PyObject *g_recv(PyObject *s, PyObject *a, PyObject *k)
{
    return p2p_impl((GroupObject *)s, a, k, 0, 0);
}
static PyObject *g_recv_async(PyObject *s, PyObject *a, PyObject *k)
{
    return p2p_impl((GroupObject *)s, a, k, 1, 0);
}

/* ---- group management ---- */

static PyObject *g_abort(GroupObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"reason", NULL};
    const char *reason = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|z", kwl, &reason) || check_open(self, "abort") < 0)
        return NULL;
    char *copy = NULL;
    if (reason) {
        copy = PyMem_Malloc(strlen(reason) + 1);
        if (!copy)
            return PyErr_NoMemory();
        strcpy(copy, reason);
    }
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_abort(self->g, copy ? copy : "abort() called from Python");
    Py_END_ALLOW_THREADS
    self->inflight--;
    PyMem_Free(copy);
    if (st != COHORT_OK)
        return cpy_raise(st, cohort_last_error(self->g), self->g);
    Py_RETURN_NONE;
}

static int do_finalize(GroupObject *self, char *msg, size_t msglen, cohort_status *out);

static PyObject *g_finalize(GroupObject *self, PyObject *unused)
{
    if (!self->g)
        Py_RETURN_NONE;
    char msg[1024];
    cohort_status st;
    if (do_finalize(self, msg, sizeof msg, &st) < 0)
        return NULL;
    if (st != COHORT_OK)
        return cpy_raise(st, msg, NULL);
    Py_RETURN_NONE;
}

/* Finalizes live sub-groups, waits for pending Works, then the group.
 * Returns -1 with a Python error when it cannot start. */
static int do_finalize(GroupObject *self, char *msg, size_t msglen, cohort_status *out)
{
    *out = COHORT_OK;
    msg[0] = 0;
    if (self->inflight) {
        PyErr_SetString(cpy_error_class(COHORT_ERR_INVALID),
                        "finalize: another thread is inside a call on this group");
        return -1;
    }
    if (self->borrowers) {
        PyErr_SetString(cpy_error_class(COHORT_ERR_INVALID),
                        "finalize: a cohort.Checker uses this group: destroy() it first");
        return -1;
    }
    /* sub-groups first (the library requires it) */
    if (self->children) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(self->children); i++) {
            PyObject *ch = PyWeakref_GetObject(PyList_GET_ITEM(self->children, i));
            if (ch && ch != Py_None && ((GroupObject *)ch)->g) {
                Py_INCREF(ch);
                char m2[16];
                cohort_status s2;
                int r = do_finalize((GroupObject *)ch, m2, sizeof m2, &s2);
                Py_DECREF(ch);
                if (r < 0)
                    return -1;
            }
        }
        Py_CLEAR(self->children);
    }
    /* pending Works: wait, keep their outcome for a later wait() */
    while (self->pending) {
        WorkObject *w = self->pending;
        Py_INCREF(w);
        cohort_status st;
        Py_BEGIN_ALLOW_THREADS
        st = cohort_work_wait(w->w, -1);
        Py_END_ALLOW_THREADS
        work_complete(w, st);
        Py_DECREF(w);
    }
    reap_orphans(self, 1);
    cohort_group *g = self->g;
    self->g = NULL;
    cohort_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_finalize(g);
    if (st != COHORT_OK)
        snprintf(msg, msglen, "%s", cohort_last_error(NULL));
    Py_END_ALLOW_THREADS
    *out = st;
    return 0;
}

static PyObject *new_sub(GroupObject *self, cohort_group *sub)
{
    if (!sub)
        Py_RETURN_NONE;
    PyObject *o = cpy_group_new(sub, (PyObject *)self);
    if (!o)
        return NULL;
    if (!self->children && !(self->children = PyList_New(0)))
        goto fail;
    PyObject *ref = PyWeakref_NewRef(o, NULL);
    if (!ref || PyList_Append(self->children, ref) < 0) {
        Py_XDECREF(ref);
        goto fail;
    }
    Py_DECREF(ref);
    return o;
fail:
    Py_DECREF(o);
    return NULL;
}

static PyObject *g_split(GroupObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"color", "key", NULL};
    int color;
    PyObject *keyo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|O", kwl, &color, &keyo) ||
        begin_issue(self, "split") < 0)
        return NULL;
    int key = self->rank;
    if (keyo != Py_None && parse_root(keyo, "split", "key", &key) < 0)
        return NULL;
    cohort_group *sub = NULL;
    cohort_status st;
    self->issuing++;
    self->inflight++;
    int fired;
    Py_BEGIN_ALLOW_THREADS
    int tok = cpy_intr_enter(self->g);
    st = cohort_split(self->g, color, key, &sub);
    fired = cpy_intr_leave(tok);
    Py_END_ALLOW_THREADS
    self->inflight--;
    self->issuing--;
    if (st != COHORT_OK)
        return raise_call(self, st, fired);
    return new_sub(self, sub);
}

static PyObject *g_new_group(GroupObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"ranks", NULL};
    PyObject *ranks;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &ranks) ||
        begin_issue(self, "new_group") < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(ranks, "new_group: ranks must be a sequence of ints");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int *r = PyMem_Calloc((size_t)(n ? n : 1), sizeof *r);
    if (!r) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (parse_root(PySequence_Fast_GET_ITEM(seq, i), "new_group", "rank", &r[i]) < 0) {
            Py_DECREF(seq);
            PyMem_Free(r);
            return NULL;
        }
    }
    Py_DECREF(seq);
    if (n > INT32_MAX) {
        PyMem_Free(r);
        PyErr_SetString(PyExc_ValueError, "new_group: too many ranks");
        return NULL;
    }
    cohort_group *sub = NULL;
    cohort_status st;
    self->issuing++;
    self->inflight++;
    int fired;
    Py_BEGIN_ALLOW_THREADS
    int tok = cpy_intr_enter(self->g);
    st = cohort_new_group(self->g, r, (int)n, &sub);
    fired = cpy_intr_leave(tok);
    Py_END_ALLOW_THREADS
    self->inflight--;
    self->issuing--;
    PyMem_Free(r);
    if (st != COHORT_OK)
        return raise_call(self, st, fired);
    return new_sub(self, sub);
}

static PyObject *g_trace_dump(GroupObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"dir", NULL};
    const char *dir = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|z", kwl, &dir) ||
        check_open(self, "trace_dump") < 0)
        return NULL;
    cohort_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_trace_dump(self->g, dir);
    Py_END_ALLOW_THREADS
    if (st != COHORT_OK)
        return cpy_raise(st, cohort_last_error(self->g), self->g);
    Py_RETURN_NONE;
}

static PyObject *g_enter(GroupObject *self, PyObject *unused)
{
    if (check_open(self, "with") < 0)
        return NULL;
    return Py_NewRef(self);
}

/* Leaving a with-block on an exception aborts the group first, so that
 * the other ranks get AbortedError naming it instead of waiting for this
 * rank's next call. */
static PyObject *g_exit(GroupObject *self, PyObject *args)
{
    PyObject *et = Py_None, *ev = Py_None, *tb = Py_None;
    if (!PyArg_UnpackTuple(args, "__exit__", 0, 3, &et, &ev, &tb))
        return NULL;
    if (!self->g)
        Py_RETURN_FALSE;
    if (et != Py_None && self->g) {
        PyObject *s = ev != Py_None ? PyObject_Str(ev) : NULL;
        PyErr_Clear();
        const char *t = PyType_Check(et) ? ((PyTypeObject *)et)->tp_name : "exception";
        const char *m = s ? PyUnicode_AsUTF8(s) : NULL;
        if (!m)
            PyErr_Clear();
        char why[600];
        snprintf(why, sizeof why, "%s raised on rank %d: %.480s", t, self->rank, m ? m : "");
        Py_XDECREF(s);
        cohort_group *g = self->g;
        self->inflight++;
        Py_BEGIN_ALLOW_THREADS
        cohort_abort(g, why);
        Py_END_ALLOW_THREADS
        self->inflight--;
    }
    char msg[1024];
    cohort_status st;
    if (do_finalize(self, msg, sizeof msg, &st) < 0) {
        if (et != Py_None) {
            PyErr_Clear(); /* the block's own exception wins */
            Py_RETURN_FALSE;
        }
        return NULL;
    }
    if (st != COHORT_OK && et == Py_None)
        return cpy_raise(st, msg, NULL);
    Py_RETURN_FALSE;
}

static PyObject *g_get_rank(GroupObject *self, void *c)
{
    return PyLong_FromLong(self->rank);
}
static PyObject *g_get_size(GroupObject *self, void *c)
{
    return PyLong_FromLong(self->size);
}
static PyObject *g_get_generation(GroupObject *self, void *c)
{
    return PyLong_FromUnsignedLong(self->generation);
}
static PyObject *g_get_closed(GroupObject *self, void *c)
{
    return PyBool_FromLong(self->g == NULL);
}
static PyObject *g_get_last_error(GroupObject *self, void *c)
{
    return PyUnicode_DecodeUTF8(self->g ? cohort_last_error(self->g) : "",
                                self->g ? (Py_ssize_t)strlen(cohort_last_error(self->g)) : 0,
                                "replace");
}
static PyObject *g_get_parent(GroupObject *self, void *c)
{
    return Py_NewRef(self->parent ? self->parent : Py_None);
}

static PyObject *g_repr(GroupObject *self)
{
    return PyUnicode_FromFormat("<cohort.Group rank %d of %d, generation %lu%s>", self->rank,
                                self->size, self->generation, self->g ? "" : ", finalized");
}

static void g_dealloc(GroupObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->g) {
        /* Never finalized: do it now (a collective, bounded by the timeout). */
        char msg[1024];
        cohort_status st;
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        if (do_finalize(self, msg, sizeof msg, &st) < 0)
            PyErr_Clear();
        PyErr_Restore(t, v, tb);
    }
    Py_CLEAR(self->children);
    Py_CLEAR(self->parent);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int g_traverse(GroupObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->parent);
    Py_VISIT(self->children);
    return 0;
}

#define ASYNC_DOC "\nThe _async form returns a Work; its buffers belong to cohort until the Work completed."

static PyMethodDef g_methods[] = {
    {"all_reduce", (PyCFunction)(void (*)(void))g_all_reduce, METH_VARARGS | METH_KEYWORDS,
     "all_reduce(send, recv=None, op=SUM, *, dtype=None) -> recv (send when in place)\n"
     "recv None or recv is send: in place."},
    {"all_reduce_async", (PyCFunction)(void (*)(void))g_all_reduce_async,
     METH_VARARGS | METH_KEYWORDS, "all_reduce_async(...) -> Work" ASYNC_DOC},
    {"broadcast", (PyCFunction)(void (*)(void))g_broadcast, METH_VARARGS | METH_KEYWORDS,
     "broadcast(buf, root=0, *, dtype=None) -> buf"},
    {"broadcast_async", (PyCFunction)(void (*)(void))g_broadcast_async,
     METH_VARARGS | METH_KEYWORDS, "broadcast_async(...) -> Work" ASYNC_DOC},
    {"reduce", (PyCFunction)(void (*)(void))g_reduce, METH_VARARGS | METH_KEYWORDS,
     "reduce(send, recv=None, op=SUM, root=0, *, dtype=None) -> the result at the root, None "
     "elsewhere\nrecv None or recv is send: in place (at the root)."},
    {"reduce_async", (PyCFunction)(void (*)(void))g_reduce_async, METH_VARARGS | METH_KEYWORDS,
     "reduce_async(...) -> Work" ASYNC_DOC},
    {"all_gather", (PyCFunction)(void (*)(void))g_all_gather, METH_VARARGS | METH_KEYWORDS,
     "all_gather(send, recv, *, dtype=None) -> recv\nrecv has size x len(send) elements; send "
     "None or send is recv: in place (the input is this rank's slot of recv)."},
    {"all_gather_async", (PyCFunction)(void (*)(void))g_all_gather_async,
     METH_VARARGS | METH_KEYWORDS, "all_gather_async(...) -> Work" ASYNC_DOC},
    {"gather", (PyCFunction)(void (*)(void))g_gather, METH_VARARGS | METH_KEYWORDS,
     "gather(send, recv=None, root=0, *, dtype=None) -> recv at the root, None elsewhere"},
    {"gather_async", (PyCFunction)(void (*)(void))g_gather_async, METH_VARARGS | METH_KEYWORDS,
     "gather_async(...) -> Work" ASYNC_DOC},
    {"scatter", (PyCFunction)(void (*)(void))g_scatter, METH_VARARGS | METH_KEYWORDS,
     "scatter(send, recv=None, root=0, *, dtype=None) -> recv\nsend (size x len(recv)) is "
     "used at the root only; elsewhere pass recv (or scatter(None, recv))."},
    {"scatter_async", (PyCFunction)(void (*)(void))g_scatter_async,
     METH_VARARGS | METH_KEYWORDS, "scatter_async(...) -> Work" ASYNC_DOC},
    {"reduce_scatter", (PyCFunction)(void (*)(void))g_reduce_scatter,
     METH_VARARGS | METH_KEYWORDS,
     "reduce_scatter(send, recv=None, op=SUM, *, dtype=None) -> recv\nsend has size x "
     "len(recv) elements; in place: the result is the first 1/size of send."},
    {"reduce_scatter_async", (PyCFunction)(void (*)(void))g_reduce_scatter_async,
     METH_VARARGS | METH_KEYWORDS, "reduce_scatter_async(...) -> Work" ASYNC_DOC},
    {"all_to_all", (PyCFunction)(void (*)(void))g_all_to_all, METH_VARARGS | METH_KEYWORDS,
     "all_to_all(send, recv=None, *, dtype=None) -> recv\nblock j of send goes to rank j."},
    {"all_to_all_async", (PyCFunction)(void (*)(void))g_all_to_all_async,
     METH_VARARGS | METH_KEYWORDS, "all_to_all_async(...) -> Work" ASYNC_DOC},
    {"barrier", (PyCFunction)(void (*)(void))g_barrier, METH_VARARGS | METH_KEYWORDS,
     "barrier() -> None"},
    {"barrier_async", (PyCFunction)(void (*)(void))g_barrier_async,
     METH_VARARGS | METH_KEYWORDS, "barrier_async() -> Work"},
    {"send", (PyCFunction)(void (*)(void))g_send, METH_VARARGS | METH_KEYWORDS,
     "send(buf, peer, tag=0, *, dtype=None) -> None"},
    {"send_async", (PyCFunction)(void (*)(void))g_send_async, METH_VARARGS | METH_KEYWORDS,
     "send_async(...) -> Work" ASYNC_DOC},
    {"recv", (PyCFunction)(void (*)(void))g_recv, METH_VARARGS | METH_KEYWORDS,
     "recv(buf, peer, tag=0, *, dtype=None) -> buf"},
    {"recv_async", (PyCFunction)(void (*)(void))g_recv_async, METH_VARARGS | METH_KEYWORDS,
     "recv_async(...) -> Work" ASYNC_DOC},
    {"split", (PyCFunction)(void (*)(void))g_split, METH_VARARGS | METH_KEYWORDS,
     "split(color, key=None) -> Group or None\nCollective; like MPI_Comm_split. color < 0: "
     "this rank joins no group (None). key None: this rank."},
    {"new_group", (PyCFunction)(void (*)(void))g_new_group, METH_VARARGS | METH_KEYWORDS,
     "new_group(ranks) -> Group or None\nCollective; every rank passes the same list; "
     "non-members get None."},
    {"abort", (PyCFunction)(void (*)(void))g_abort, METH_VARARGS | METH_KEYWORDS,
     "abort(reason=None)\nPoisons the group on every rank: every blocked and later call "
     "raises AbortedError with the reason. Callable from any thread."},
    {"finalize", (PyCFunction)g_finalize, METH_NOARGS,
     "finalize()\nLeaves the group (collective on a healthy group; see cohort_finalize). "
     "Finalizes live sub-groups first and waits for pending Works. Idempotent."},
    {"trace_dump", (PyCFunction)(void (*)(void))g_trace_dump, METH_VARARGS | METH_KEYWORDS,
     "trace_dump(dir=None)\nWrites this rank's flight recorder (docs/trace.md)."},
    {"__enter__", (PyCFunction)g_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)g_exit, METH_VARARGS,
     "Finalizes; on an exception aborts the group first (the other ranks then raise "
     "AbortedError naming it)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef g_getset[] = {
    {"rank", (getter)g_get_rank, NULL, "this rank in the group", NULL},
    {"size", (getter)g_get_size, NULL, "number of ranks", NULL},
    {"generation", (getter)g_get_generation, NULL, "the job's generation", NULL},
    {"closed", (getter)g_get_closed, NULL, "True once finalized", NULL},
    {"last_error", (getter)g_get_last_error, NULL, "cohort_last_error() of the group", NULL},
    {"parent", (getter)g_get_parent, NULL, "the group this one was split from, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject CpyGroup_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cohort.Group",
    .tp_basicsize = sizeof(GroupObject),
    .tp_dealloc = (destructor)g_dealloc,
    .tp_repr = (reprfunc)g_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A process group (cohort.init(), Group.split(), Group.new_group()).\n"
              "Calls on a group come from one thread at a time; abort() from any thread.",
    .tp_traverse = (traverseproc)g_traverse,
    .tp_weaklistoffset = offsetof(GroupObject, weakreflist),
    .tp_methods = g_methods,
    .tp_getset = g_getset,
};

PyObject *cpy_group_new(cohort_group *g, PyObject *parent)
{
    GroupObject *o = PyObject_GC_New(GroupObject, &CpyGroup_Type);
    if (!o) {
        Py_BEGIN_ALLOW_THREADS
        cohort_finalize(g);
        Py_END_ALLOW_THREADS
        return NULL;
    }
    o->g = g;
    o->rank = cohort_rank(g);
    o->size = cohort_size(g);
    o->generation = cohort_generation(g);
    o->issuing = o->inflight = o->borrowers = 0;
    o->parent = Py_XNewRef(parent);
    o->children = NULL;
    o->orphans = NULL;
    o->pending = NULL;
    o->weakreflist = NULL;
    PyObject_GC_Track(o);
    return (PyObject *)o;
}

int cpy_group_add(PyObject *m)
{
    if (PyType_Ready(&CpyGroup_Type) < 0 || PyType_Ready(&CpyWork_Type) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Group", (PyObject *)&CpyGroup_Type) < 0 ||
        PyModule_AddObjectRef(m, "Work", (PyObject *)&CpyWork_Type) < 0)
        return -1;
    return 0;
}

cohort_group *cpy_group_get(PyObject *group)
{
    return ((GroupObject *)group)->g;
}

cohort_group *cpy_group_borrow(PyObject *group, const char *who)
{
    GroupObject *g = (GroupObject *)group;
    if (check_open(g, who) < 0)
        return NULL;
    g->borrowers++;
    return g->g;
}

void cpy_group_unborrow(PyObject *group)
{
    ((GroupObject *)group)->borrowers--;
}
