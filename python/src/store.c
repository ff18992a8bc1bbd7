/*
 * store.c - cohort.Store (a client of the rendezvous store) and
 * cohort.StoreServer (an in-process server, for tests and small jobs).
 *
 * Keys are str (UTF-8) or bytes; values are bytes-like in, bytes out.
 * Every call releases the GIL; a handle is thread-safe (calls serialise on
 * its one connection; open a second Store for a background waiter).
 */
#include "cohort_py.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    cohort_store *s;
    PyObject *parent; /* a prefixed view keeps its parent alive */
    int inflight;
} StoreObject;

static PyTypeObject Store_Type;

static int ms_arg(PyObject *o, int *ms, const char *what)
{
    *ms = -1;
    if (!o || o == Py_None)
        return 0;
    double s = PyFloat_AsDouble(o);
    if (s == -1.0 && PyErr_Occurred())
        return -1;
    if (s < 0 || s > 2e6) {
        PyErr_Format(PyExc_ValueError, "%s: timeout must be 0..2e6 seconds or None, got %g", what,
                     s);
        return -1;
    }
    *ms = (int)(s * 1000 + 0.5);
    return 0;
}

/* A key as bytes (new ref): str is UTF-8 encoded. */
static PyObject *key_bytes(PyObject *k, const char *what)
{
    if (PyUnicode_Check(k))
        return PyUnicode_AsUTF8String(k);
    if (PyBytes_Check(k))
        return Py_NewRef(k);
    PyErr_Format(PyExc_TypeError, "%s: a key is str or bytes, not %.100s", what,
                 Py_TYPE(k)->tp_name);
    return NULL;
}

static int open_check(StoreObject *self, const char *what)
{
    if (!self->s) {
        PyErr_Format(cpy_error_class(COHORT_ERR_INVALID), "Store.%s: the store is closed", what);
        return -1;
    }
    return 0;
}

static PyObject *store_err(StoreObject *self, cohort_status st)
{
    return cpy_raise(st, cohort_store_last_error(self->s), NULL);
}

static PyObject *st_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"url", "job_id", "token", "timeout", NULL};
    const char *url, *job, *token;
    PyObject *to = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sss|O", kwl, &url, &job, &token, &to))
        return NULL;
    int ms;
    if (ms_arg(to, &ms, "Store") < 0)
        return NULL;
    if (ms < 0)
        ms = 30000;
    cohort_store *s = NULL;
    cohort_status st;
    char msg[1024];
    Py_BEGIN_ALLOW_THREADS
    st = cohort_store_connect(&s, url, job, token, ms);
    if (st != COHORT_OK)
        snprintf(msg, sizeof msg, "%s", cohort_last_error(NULL));
    Py_END_ALLOW_THREADS
    if (st != COHORT_OK)
        return cpy_raise(st, msg, NULL);
    StoreObject *o = (StoreObject *)type->tp_alloc(type, 0);
    if (!o) {
        cohort_store_close(s);
        return NULL;
    }
    o->s = s;
    return (PyObject *)o;
}

static void st_close_impl(StoreObject *self)
{
    if (self->s) {
        cohort_store *s = self->s;
        self->s = NULL;
        Py_BEGIN_ALLOW_THREADS
        cohort_store_close(s);
        Py_END_ALLOW_THREADS
    }
}

static PyObject *st_close(StoreObject *self, PyObject *unused)
{
    if (self->inflight) {
        PyErr_SetString(cpy_error_class(COHORT_ERR_INVALID),
                        "Store.close: another thread is inside a call on this store");
        return NULL;
    }
    st_close_impl(self);
    Py_RETURN_NONE;
}

static void st_dealloc(StoreObject *self)
{
    st_close_impl(self);
    Py_CLEAR(self->parent);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define BEGIN_CALL(what)                                                                           \
    if (open_check(self, what) < 0)                                                                \
        return NULL;                                                                               \
    self->inflight++;
#define END_CALL self->inflight--;

/* set(key, value) and append(key, value): the same call but for the
 * library function. */
static PyObject *st_put(StoreObject *self, PyObject *args, const char *what,
                        cohort_status (*fn)(cohort_store *, const void *, size_t, const void *,
                                            size_t))
{
    PyObject *k;
    Py_buffer v;
    if (!PyArg_ParseTuple(args, "Oy*", &k, &v))
        return NULL;
    PyObject *kb = key_bytes(k, what);
    if (!kb || open_check(self, what) < 0) {
        Py_XDECREF(kb);
        PyBuffer_Release(&v);
        return NULL;
    }
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = fn(self->s, PyBytes_AS_STRING(kb), (size_t)PyBytes_GET_SIZE(kb), v.buf, (size_t)v.len);
    Py_END_ALLOW_THREADS
    END_CALL
    Py_DECREF(kb);
    PyBuffer_Release(&v);
    if (st != COHORT_OK)
        return store_err(self, st);
    Py_RETURN_NONE;
}

static PyObject *st_set(StoreObject *self, PyObject *args)
{
    return st_put(self, args, "set", cohort_store_set);
}

static PyObject *st_get(StoreObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"key", "timeout", NULL};
    PyObject *k, *to = Py_None;
    int ms;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwl, &k, &to) || ms_arg(to, &ms, "get") < 0)
        return NULL;
    PyObject *kb = key_bytes(k, "get");
    if (!kb)
        return NULL;
    if (open_check(self, "get") < 0) {
        Py_DECREF(kb);
        return NULL;
    }
    void *val = NULL;
    size_t vlen = 0;
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_store_get(self->s, PyBytes_AS_STRING(kb), (size_t)PyBytes_GET_SIZE(kb), &val,
                          &vlen, ms);
    Py_END_ALLOW_THREADS
    END_CALL
    Py_DECREF(kb);
    if (st != COHORT_OK) {
        if (PyErr_CheckSignals() < 0)
            return NULL;
        return store_err(self, st);
    }
    PyObject *r = PyBytes_FromStringAndSize(val, (Py_ssize_t)vlen);
    free(val);
    return r;
}

static PyObject *st_add(StoreObject *self, PyObject *args)
{
    PyObject *k;
    long long delta;
    if (!PyArg_ParseTuple(args, "OL", &k, &delta))
        return NULL;
    PyObject *kb = key_bytes(k, "add");
    if (!kb)
        return NULL;
    if (open_check(self, "add") < 0) {
        Py_DECREF(kb);
        return NULL;
    }
    int64_t res = 0;
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_store_add(self->s, PyBytes_AS_STRING(kb), (size_t)PyBytes_GET_SIZE(kb),
                          (int64_t)delta, &res);
    Py_END_ALLOW_THREADS
    END_CALL
    Py_DECREF(kb);
    if (st != COHORT_OK)
        return store_err(self, st);
    return PyLong_FromLongLong((long long)res);
}

static PyObject *st_compare_set(StoreObject *self, PyObject *args)
{
    PyObject *k, *expo;
    Py_buffer d;
    if (!PyArg_ParseTuple(args, "OOy*", &k, &expo, &d))
        return NULL;
    Py_buffer e;
    int have_e = 0;
    if (expo != Py_None) {
        if (PyObject_GetBuffer(expo, &e, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&d);
            return NULL;
        }
        have_e = 1;
    }
    PyObject *kb = key_bytes(k, "compare_set");
    if (!kb || open_check(self, "compare_set") < 0) {
        Py_XDECREF(kb);
        PyBuffer_Release(&d);
        if (have_e)
            PyBuffer_Release(&e);
        return NULL;
    }
    void *cur = NULL;
    size_t curlen = 0;
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_store_compare_set(self->s, PyBytes_AS_STRING(kb), (size_t)PyBytes_GET_SIZE(kb),
                                  have_e ? e.buf : NULL, have_e ? (size_t)e.len : 0, d.buf,
                                  (size_t)d.len, &cur, &curlen);
    Py_END_ALLOW_THREADS
    END_CALL
    Py_DECREF(kb);
    PyBuffer_Release(&d);
    if (have_e)
        PyBuffer_Release(&e);
    if (st != COHORT_OK)
        return store_err(self, st);
    PyObject *r = cur ? PyBytes_FromStringAndSize(cur, (Py_ssize_t)curlen) : Py_NewRef(Py_None);
    free(cur);
    return r;
}

/* keys: one key or a list; fills arrays (caller frees with keys_free). */
typedef struct {
    PyObject *seq;
    PyObject **kb;
    const void **kp;
    size_t *kl;
    Py_ssize_t n;
} keyset;

static void keys_free(keyset *ks)
{
    for (Py_ssize_t i = 0; ks->kb && i < ks->n; i++)
        Py_XDECREF(ks->kb[i]);
    PyMem_Free(ks->kb);
    PyMem_Free(ks->kp);
    PyMem_Free(ks->kl);
    Py_XDECREF(ks->seq);
    memset(ks, 0, sizeof *ks);
}

static int keys_get(PyObject *o, keyset *ks, const char *what)
{
    memset(ks, 0, sizeof *ks);
    if (PyUnicode_Check(o) || PyBytes_Check(o))
        ks->seq = PyTuple_Pack(1, o);
    else
        ks->seq = PySequence_Fast(o, "keys must be a str, bytes, or a sequence of them");
    if (!ks->seq)
        return -1;
    ks->n = PySequence_Fast_GET_SIZE(ks->seq);
    if (ks->n < 1 || ks->n > 65536) {
        PyErr_Format(PyExc_ValueError, "%s: 1..65536 keys, got %zd", what, ks->n);
        keys_free(ks);
        return -1;
    }
    ks->kb = PyMem_Calloc((size_t)ks->n, sizeof *ks->kb);
    ks->kp = PyMem_Calloc((size_t)ks->n, sizeof *ks->kp);
    ks->kl = PyMem_Calloc((size_t)ks->n, sizeof *ks->kl);
    if (!ks->kb || !ks->kp || !ks->kl) {
        keys_free(ks);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < ks->n; i++) {
        ks->kb[i] = key_bytes(PySequence_Fast_GET_ITEM(ks->seq, i), what);
        if (!ks->kb[i]) {
            keys_free(ks);
            return -1;
        }
        ks->kp[i] = PyBytes_AS_STRING(ks->kb[i]);
        ks->kl[i] = (size_t)PyBytes_GET_SIZE(ks->kb[i]);
    }
    return 0;
}

static PyObject *st_wait(StoreObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"keys", "timeout", NULL};
    PyObject *ko, *to = Py_None;
    int ms;
    keyset ks;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwl, &ko, &to) ||
        ms_arg(to, &ms, "wait") < 0 || keys_get(ko, &ks, "wait") < 0)
        return NULL;
    if (open_check(self, "wait") < 0) {
        keys_free(&ks);
        return NULL;
    }
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_store_wait(self->s, ks.kp, ks.kl, (int)ks.n, ms);
    Py_END_ALLOW_THREADS
    END_CALL
    keys_free(&ks);
    if (st != COHORT_OK) {
        if (PyErr_CheckSignals() < 0)
            return NULL;
        return store_err(self, st);
    }
    Py_RETURN_NONE;
}

static PyObject *st_check(StoreObject *self, PyObject *args)
{
    PyObject *ko;
    keyset ks;
    if (!PyArg_ParseTuple(args, "O", &ko) || keys_get(ko, &ks, "check") < 0)
        return NULL;
    if (open_check(self, "check") < 0) {
        keys_free(&ks);
        return NULL;
    }
    int all = 0;
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_store_check(self->s, ks.kp, ks.kl, (int)ks.n, &all);
    Py_END_ALLOW_THREADS
    END_CALL
    keys_free(&ks);
    if (st != COHORT_OK)
        return store_err(self, st);
    return PyBool_FromLong(all);
}

static PyObject *st_delete(StoreObject *self, PyObject *args)
{
    PyObject *k;
    if (!PyArg_ParseTuple(args, "O", &k))
        return NULL;
    PyObject *kb = key_bytes(k, "delete");
    if (!kb)
        return NULL;
    if (open_check(self, "delete") < 0) {
        Py_DECREF(kb);
        return NULL;
    }
    int deleted = 0;
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_store_delete(self->s, PyBytes_AS_STRING(kb), (size_t)PyBytes_GET_SIZE(kb),
                             &deleted);
    Py_END_ALLOW_THREADS
    END_CALL
    Py_DECREF(kb);
    if (st != COHORT_OK)
        return store_err(self, st);
    return PyBool_FromLong(deleted);
}

static PyObject *st_list(StoreObject *self, PyObject *args)
{
    const char *sub = "";
    if (!PyArg_ParseTuple(args, "|s", &sub) || open_check(self, "list") < 0)
        return NULL;
    char **keys = NULL;
    size_t *kl = NULL;
    int n = 0;
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_store_list(self->s, sub, &keys, &kl, &n);
    Py_END_ALLOW_THREADS
    END_CALL
    if (st != COHORT_OK)
        return store_err(self, st);
    PyObject *r = PyList_New(0);
    for (int i = 0; i < n; i++) {
        if (r) {
            PyObject *s = PyUnicode_DecodeUTF8(keys[i], (Py_ssize_t)kl[i], "surrogateescape");
            if (!s || PyList_Append(r, s) < 0)
                Py_CLEAR(r);
            Py_XDECREF(s);
        }
        free(keys[i]);
    }
    free(keys);
    free(kl);
    if (r && PyList_Sort(r) < 0)
        Py_CLEAR(r);
    return r;
}

static PyObject *st_num_keys(StoreObject *self, PyObject *unused)
{
    if (open_check(self, "num_keys") < 0)
        return NULL;
    int64_t n = 0;
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_store_num_keys(self->s, &n);
    Py_END_ALLOW_THREADS
    END_CALL
    if (st != COHORT_OK)
        return store_err(self, st);
    return PyLong_FromLongLong((long long)n);
}

static PyObject *st_append(StoreObject *self, PyObject *args)
{
    return st_put(self, args, "append", cohort_store_append);
}

static PyObject *st_barrier(StoreObject *self, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"name", "n", "timeout", NULL};
    const char *name;
    int n, ms;
    PyObject *to = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "si|O", kwl, &name, &n, &to) ||
        ms_arg(to, &ms, "barrier") < 0 || open_check(self, "barrier") < 0)
        return NULL;
    if (ms < 0)
        ms = 30000;
    cohort_status st;
    self->inflight++;
    Py_BEGIN_ALLOW_THREADS
    st = cohort_store_barrier(self->s, name, n, ms);
    Py_END_ALLOW_THREADS
    END_CALL
    if (st != COHORT_OK) {
        if (PyErr_CheckSignals() < 0)
            return NULL;
        return store_err(self, st);
    }
    Py_RETURN_NONE;
}

static PyObject *st_prefixed(StoreObject *self, PyObject *args)
{
    const char *prefix;
    if (!PyArg_ParseTuple(args, "s", &prefix) || open_check(self, "prefixed") < 0)
        return NULL;
    cohort_store *sub = NULL;
    cohort_status st = cohort_store_prefixed(self->s, prefix, &sub);
    if (st != COHORT_OK)
        return store_err(self, st);
    StoreObject *o = (StoreObject *)Store_Type.tp_alloc(&Store_Type, 0);
    if (!o) {
        cohort_store_close(sub);
        return NULL;
    }
    o->s = sub;
    o->parent = Py_NewRef(self);
    return (PyObject *)o;
}

static PyObject *st_set_timeout(StoreObject *self, PyObject *arg)
{
    int ms;
    if (ms_arg(arg, &ms, "set_timeout") < 0 || open_check(self, "set_timeout") < 0)
        return NULL;
    cohort_store_set_timeout(self->s, ms < 0 ? 30000 : ms);
    Py_RETURN_NONE;
}

static PyObject *st_enter(StoreObject *self, PyObject *unused)
{
    return Py_NewRef(self);
}

static PyObject *st_exit(StoreObject *self, PyObject *args)
{
    st_close_impl(self);
    Py_RETURN_FALSE;
}

static PyMethodDef st_methods[] = {
    {"set", (PyCFunction)st_set, METH_VARARGS, "set(key, value): returns once the server applied it"},
    {"get", (PyCFunction)(void (*)(void))st_get, METH_VARARGS | METH_KEYWORDS,
     "get(key, timeout=None) -> bytes: waits until the key exists (CohortTimeoutError)"},
    {"add", (PyCFunction)st_add, METH_VARARGS,
     "add(key, delta) -> int: atomic add on a 64-bit counter (a missing key counts as 0)"},
    {"compare_set", (PyCFunction)st_compare_set, METH_VARARGS,
     "compare_set(key, expected, desired) -> bytes or None: sets desired if the value equals "
     "expected (None: the key must be missing); returns the value after the call"},
    {"wait", (PyCFunction)(void (*)(void))st_wait, METH_VARARGS | METH_KEYWORDS,
     "wait(keys, timeout=None): until every key exists"},
    {"check", (PyCFunction)st_check, METH_VARARGS, "check(keys) -> bool: all exist (no wait)"},
    {"delete", (PyCFunction)st_delete, METH_VARARGS, "delete(key) -> bool: whether it existed"},
    {"list", (PyCFunction)st_list, METH_VARARGS, "list(prefix='') -> sorted list of key names"},
    {"num_keys", (PyCFunction)st_num_keys, METH_NOARGS, "num_keys() -> int"},
    {"append", (PyCFunction)st_append, METH_VARARGS, "append(key, value): creates the key"},
    {"barrier", (PyCFunction)(void (*)(void))st_barrier, METH_VARARGS | METH_KEYWORDS,
     "barrier(name, n, timeout=None): returns once n clients entered barrier name (single use)"},
    {"prefixed", (PyCFunction)st_prefixed, METH_VARARGS,
     "prefixed(prefix) -> Store: a view whose keys all live under prefix"},
    {"set_timeout", (PyCFunction)st_set_timeout, METH_O,
     "set_timeout(seconds): default for calls that take none"},
    {"close", (PyCFunction)st_close, METH_NOARGS, "close()"},
    {"__enter__", (PyCFunction)st_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)st_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Store_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cohort.Store",
    .tp_basicsize = sizeof(StoreObject),
    .tp_dealloc = (destructor)st_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Store(url, job_id, token, timeout=None): a client of cohort's rendezvous store\n"
              "(url 'host:port', 'tcp://host:port' or 'etcd://...'). Retries the connection\n"
              "until timeout (seconds, default 30).",
    .tp_methods = st_methods,
    .tp_new = st_new,
};

/* ---- StoreServer ---- */

typedef struct {
    PyObject_HEAD
    cohort_store_server *srv;
} ServerObject;

static PyObject *sv_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"job_id", "token", "bind", "port", NULL};
    const char *job, *token, *bind = "127.0.0.1";
    int port = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|si", kwl, &job, &token, &bind, &port))
        return NULL;
    cohort_store_server_opts o;
    memset(&o, 0, sizeof o);
    o.bind_addr = bind;
    o.port = port;
    o.job_ids = &job;
    o.tokens = &token;
    o.n_jobs = 1;
    cohort_store_server *srv = NULL;
    cohort_status st;
    char msg[1024];
    Py_BEGIN_ALLOW_THREADS
    st = cohort_store_server_start(&srv, &o);
    if (st != COHORT_OK)
        snprintf(msg, sizeof msg, "%s", cohort_last_error(NULL));
    Py_END_ALLOW_THREADS
    if (st != COHORT_OK)
        return cpy_raise(st, msg, NULL);
    ServerObject *s = (ServerObject *)type->tp_alloc(type, 0);
    if (!s) {
        cohort_store_server_stop(srv);
        return NULL;
    }
    s->srv = srv;
    return (PyObject *)s;
}

static void sv_stop_impl(ServerObject *self)
{
    if (self->srv) {
        cohort_store_server *s = self->srv;
        self->srv = NULL;
        Py_BEGIN_ALLOW_THREADS
        cohort_store_server_stop(s);
        Py_END_ALLOW_THREADS
    }
}

static PyObject *sv_stop(ServerObject *self, PyObject *unused)
{
    sv_stop_impl(self);
    Py_RETURN_NONE;
}

static PyObject *sv_port(ServerObject *self, void *c)
{
    if (!self->srv)
        Py_RETURN_NONE;
    return PyLong_FromLong(cohort_store_server_port(self->srv));
}

static void sv_dealloc(ServerObject *self)
{
    sv_stop_impl(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *sv_enter(ServerObject *self, PyObject *unused)
{
    return Py_NewRef(self);
}

static PyObject *sv_exit(ServerObject *self, PyObject *args)
{
    sv_stop_impl(self);
    Py_RETURN_FALSE;
}

static PyMethodDef sv_methods[] = {
    {"stop", (PyCFunction)sv_stop, METH_NOARGS, "stop(): closes every client and the listener"},
    {"__enter__", (PyCFunction)sv_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)sv_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef sv_getset[] = {
    {"port", (getter)sv_port, NULL, "the port it listens on", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Server_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cohort.StoreServer",
    .tp_basicsize = sizeof(ServerObject),
    .tp_dealloc = (destructor)sv_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StoreServer(job_id, token, bind='127.0.0.1', port=0): a store server on a thread\n"
              "of this process, serving one job. .port, .stop().",
    .tp_methods = sv_methods,
    .tp_getset = sv_getset,
    .tp_new = sv_new,
};

int cpy_store_add(PyObject *m)
{
    if (PyType_Ready(&Store_Type) < 0 || PyType_Ready(&Server_Type) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Store", (PyObject *)&Store_Type) < 0 ||
        PyModule_AddObjectRef(m, "StoreServer", (PyObject *)&Server_Type) < 0)
        return -1;
    return 0;
}
