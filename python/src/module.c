/*
 * module.c - cohort._cohort: the module, cohort.init(), dtype and op
 * constants, and the Python call site that goes into every contract.
 */
#include "cohort_py.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Interned call-site file names: filename str -> bytes, never freed (the
 * library's flight recorder keeps the char pointer). */
static PyObject *site_files;
/* Frames whose file starts with this prefix belong to the cohort package
 * (wrappers such as a future cohort.torch): the call site is their caller. */
static char *pkg_prefix;
static size_t pkg_prefix_len;

/* The line of a frame: PyFrame_GetLineNumber walks the code object's line
 * table on every call (the larger the caller's function, the longer), and
 * a training loop asks from the same instruction each time. A small
 * direct-mapped cache by (code object, instruction offset); each entry
 * holds a reference to its code object, so an address is never reused
 * while cached. With the GIL held. */
#if PY_VERSION_HEX >= 0x030B0000
#define LINE_CACHE 64
static struct {
    PyCodeObject *code;
    int lasti, line;
} line_cache[LINE_CACHE];

static int frame_line(PyFrameObject *f, PyCodeObject *code)
{
    int lasti = PyFrame_GetLasti(f);
    if (lasti < 0)
        return PyFrame_GetLineNumber(f);
    size_t h = (((uintptr_t)code >> 4) ^ ((size_t)lasti * 2654435761u)) % LINE_CACHE;
    if (line_cache[h].code == code && line_cache[h].lasti == lasti)
        return line_cache[h].line;
    int line = PyFrame_GetLineNumber(f);
    PyCodeObject *old = line_cache[h].code;
    line_cache[h].code = (PyCodeObject *)Py_NewRef((PyObject *)code);
    line_cache[h].lasti = lasti;
    line_cache[h].line = line;
    Py_XDECREF(old);
    return line;
}
#else
static int frame_line(PyFrameObject *f, PyCodeObject *code)
{
    (void)code;
    return PyFrame_GetLineNumber(f);
}
#endif

void cpy_callsite(const char **file, int *line)
{
    *file = "<python>";
    *line = 0;
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    Py_XINCREF(f);
    while (f) {
        PyCodeObject *code = PyFrame_GetCode(f);
        PyObject *name = code->co_filename;
        const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (!s)
            PyErr_Clear();
        if (s && pkg_prefix && strncmp(s, pkg_prefix, pkg_prefix_len) == 0) {
            Py_DECREF(code);
            PyFrameObject *back = PyFrame_GetBack(f);
            Py_DECREF(f);
            f = back;
            continue;
        }
        if (s) {
            PyObject *b = PyDict_GetItemWithError(site_files, name);
            if (!b && !PyErr_Occurred()) {
                b = PyBytes_FromString(s);
                if (b && PyDict_SetItem(site_files, name, b) < 0)
                    Py_CLEAR(b);
                Py_XDECREF(b); /* the dict holds it */
            }
            if (b)
                *file = PyBytes_AS_STRING(b);
            else
                PyErr_Clear();
        }
        *line = frame_line(f, code);
        Py_DECREF(code);
        Py_DECREF(f);
        return;
    }
}

static const char *const dtype_names[COHORT_DTYPE_COUNT] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "float16", "bfloat16", "float32", "float64",
};

static int dtype_from_name(const char *s)
{
    if (strncmp(s, "torch.", 6) == 0) /* str(torch.float32) */
        s += 6;
    for (int i = 0; i < COHORT_DTYPE_COUNT; i++)
        if (strcmp(s, dtype_names[i]) == 0)
            return i;
    if (strcmp(s, "half") == 0)
        return COHORT_FLOAT16;
    if (strcmp(s, "float") == 0)
        return COHORT_FLOAT32;
    if (strcmp(s, "double") == 0)
        return COHORT_FLOAT64;
    return -1;
}

int cpy_parse_dtype(PyObject *o, int *dtype)
{
    *dtype = -1;
    if (!o || o == Py_None)
        return 0;
    if (PyLong_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v >= 0 && v < COHORT_DTYPE_COUNT) {
            *dtype = (int)v;
            return 0;
        }
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "dtype %R is not a cohort dtype (0..%d)", o,
                     COHORT_DTYPE_COUNT - 1);
        return -1;
    }
    /* a name; a numpy dtype (.name); a numpy scalar type (numpy.float32:
     * its type name); a torch dtype (str(): "torch.float32") */
    PyObject *s = NULL;
    if (PyUnicode_Check(o)) {
        s = Py_NewRef(o);
    } else if (PyType_Check(o)) {
        const char *tn = ((PyTypeObject *)o)->tp_name, *dot = strrchr(tn, '.');
        s = PyUnicode_FromString(dot ? dot + 1 : tn);
    } else {
        s = PyObject_GetAttrString(o, "name");
        if (!s || !PyUnicode_Check(s)) {
            Py_XDECREF(s);
            PyErr_Clear();
            s = PyObject_Str(o);
        }
    }
    if (!s)
        return -1;
    const char *c = PyUnicode_AsUTF8(s);
    int dt = c ? dtype_from_name(c) : -1;
    Py_DECREF(s);
    if (!c)
        return -1;
    if (dt < 0) {
        PyErr_Format(PyExc_TypeError,
                     "dtype %R is not supported (int8, uint8, int32, uint32, int64, uint64, "
                     "float16, bfloat16, float32, float64)",
                     o);
        return -1;
    }
    *dtype = dt;
    return 0;
}

static const char *const op_names[COHORT_OP_COUNT] = {
    "sum", "prod", "min", "max", "avg", "band", "bor", "bxor",
};

int cpy_parse_op(PyObject *o, int *op)
{
    if (!o || o == Py_None) {
        *op = COHORT_SUM;
        return 0;
    }
    if (PyLong_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v >= 0 && v < COHORT_OP_COUNT) {
            *op = (int)v;
            return 0;
        }
        PyErr_Clear();
    } else if (PyUnicode_Check(o)) {
        const char *c = PyUnicode_AsUTF8(o);
        if (!c)
            return -1;
        for (int i = 0; i < COHORT_OP_COUNT; i++)
            if (strcasecmp(c, op_names[i]) == 0) {
                *op = i;
                return 0;
            }
    }
    PyErr_Format(PyExc_TypeError,
                 "op %R is not a reduce op (cohort.SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR "
                 "or their lower-case names)",
                 o);
    return -1;
}

/* ---- cohort.init ----
 * The rendezvous can wait long (a rank that never starts: COHORT_TIMEOUT).
 * It runs on a thread of its own while the caller waits in 100 ms slices,
 * checking for signals, so Ctrl-C raises KeyboardInterrupt at once; the
 * abandoned init finishes on its thread and leaves the group it made. */

typedef struct init_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cohort_options o;
    char *strs[6]; /* copies of the option strings */
    cohort_group *g;
    cohort_status st;
    char msg[1024];
    int done, abandoned;
} init_job;

static void init_job_free(init_job *j)
{
    for (int i = 0; i < 6; i++) {
        if (j->strs[i] && i == 5) /* the token */
            memset(j->strs[i], 0, strlen(j->strs[i]));
        free(j->strs[i]);
    }
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static void *init_main(void *arg)
{
    init_job *j = arg;
    cohort_group *g = NULL;
    cohort_status st = cohort_init_opts(&g, &j->o);
    pthread_mutex_lock(&j->mu);
    j->g = g;
    j->st = st;
    if (st != COHORT_OK) /* thread-local: read it here */
        snprintf(j->msg, sizeof j->msg, "%s", cohort_last_error(NULL));
    j->done = 1;
    int abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned) {
        if (g) {
            cohort_abort(g, "cohort.init() interrupted (KeyboardInterrupt)");
            cohort_finalize(g);
        }
        init_job_free(j);
    }
    return NULL;
}

static PyObject *run_init(const cohort_options *o)
{
    init_job *j = calloc(1, sizeof *j);
    if (!j)
        return PyErr_NoMemory();
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->o = *o;
    const char **fields[6] = {&j->o.master_addr, &j->o.store_url, &j->o.job_id,
                              &j->o.transport, NULL, &j->o.token};
    for (int i = 0; i < 6; i++) {
        if (!fields[i] || !*fields[i])
            continue;
        if (!(j->strs[i] = strdup(*fields[i]))) {
            init_job_free(j);
            return PyErr_NoMemory();
        }
        *fields[i] = j->strs[i];
    }
    pthread_t t;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with the caller's threads */
    int rc = pthread_create(&t, NULL, init_main, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        init_job_free(j);
        PyErr_SetString(PyExc_RuntimeError, "cohort.init: cannot start the rendezvous thread");
        return NULL;
    }
    pthread_detach(t);
    for (;;) {
        int done;
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&j->mu);
        if (!j->done) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        }
        done = j->done;
        pthread_mutex_unlock(&j->mu);
        Py_END_ALLOW_THREADS
        if (done)
            break;
        if (PyErr_CheckSignals() < 0) {
            pthread_mutex_lock(&j->mu);
            int finished = j->done;
            j->abandoned = !finished;
            pthread_mutex_unlock(&j->mu);
            if (finished) { /* it completed meanwhile: leave what it made */
                if (j->g) {
                    Py_BEGIN_ALLOW_THREADS
                    cohort_abort(j->g, "cohort.init() interrupted (KeyboardInterrupt)");
                    cohort_finalize(j->g);
                    Py_END_ALLOW_THREADS
                }
                init_job_free(j);
            }
            return NULL;
        }
    }
    cohort_group *g = j->g;
    cohort_status st = j->st;
    PyObject *r = st == COHORT_OK ? cpy_group_new(g, NULL) : cpy_raise(st, j->msg, NULL);
    init_job_free(j);
    return r;
}

static PyObject *py_init(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"rank", "world_size", "master_addr", "master_port", "store",
                             "job_id", "token", "generation", "timeout", "transport", NULL};
    int rank = -1, world = -1, port = 0;
    const char *maddr = NULL, *store = NULL, *job = NULL, *token = NULL, *transport = NULL;
    unsigned int gen = 0;
    double timeout = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$iizizzzIdz", kwlist, &rank, &world, &maddr,
                                     &port, &store, &job, &token, &gen, &timeout, &transport))
        return NULL;
    if (timeout < 0 || timeout > 2e6) {
        PyErr_Format(PyExc_ValueError, "timeout must be 0 (default) .. 2e6 seconds, got %g",
                     timeout);
        return NULL;
    }
    cohort_options o;
    cohort_options_init(&o);
    o.rank = rank;
    o.world_size = world;
    o.master_addr = maddr;
    o.master_port = port;
    o.store_url = store;
    o.job_id = job;
    o.token = token;
    o.generation = gen;
    o.timeout_ms = timeout > 0 ? (int)(timeout * 1000 + 0.5) : 0;
    if (timeout > 0 && o.timeout_ms == 0)
        o.timeout_ms = 1;
    o.transport = transport;
    return run_init(&o);
}

static PyObject *py_dtype_size(PyObject *self, PyObject *arg)
{
    int dt;
    if (cpy_parse_dtype(arg, &dt) < 0)
        return NULL;
    if (dt < 0) {
        PyErr_SetString(PyExc_TypeError, "dtype_size: dtype is None");
        return NULL;
    }
    return PyLong_FromSize_t(cohort_dtype_size((cohort_dtype)dt));
}

static PyObject *py_dtype_name(PyObject *self, PyObject *arg)
{
    int dt;
    if (cpy_parse_dtype(arg, &dt) < 0)
        return NULL;
    if (dt < 0) {
        PyErr_SetString(PyExc_TypeError, "dtype_name: dtype is None");
        return NULL;
    }
    return PyUnicode_FromString(cohort_dtype_name((cohort_dtype)dt));
}

static PyObject *py_set_package_dir(PyObject *self, PyObject *arg)
{
    const char *s = PyUnicode_AsUTF8(arg);
    if (!s)
        return NULL;
    char *c = PyMem_RawMalloc(strlen(s) + 1);
    if (!c)
        return PyErr_NoMemory();
    strcpy(c, s);
    PyMem_RawFree(pkg_prefix);
    pkg_prefix = c;
    pkg_prefix_len = strlen(c);
    Py_RETURN_NONE;
}

static PyObject *py_callsite(PyObject *self, PyObject *unused)
{
    const char *file;
    int line;
    cpy_callsite(&file, &line);
    return Py_BuildValue("(si)", file, line);
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))py_init, METH_VARARGS | METH_KEYWORDS,
     "init(*, rank=None, world_size=None, master_addr=None, master_port=None, store=None,\n"
     "     job_id=None, token=None, generation=None, timeout=None, transport=None) -> Group\n\n"
     "Joins the world group described by the environment (torchrun's names, cohort's,\n"
     "Slurm, Open MPI), like cohort_init(); keyword arguments override it. timeout is in\n"
     "seconds. Blocks (GIL released) until every rank arrived."},
    {"dtype_size", py_dtype_size, METH_O, "dtype_size(dtype) -> bytes per element"},
    {"dtype_name", py_dtype_name, METH_O, "dtype_name(dtype) -> 'float32' ..."},
    {"_set_package_dir", py_set_package_dir, METH_O,
     "internal: frames under this directory are skipped when taking the call site"},
    {"_callsite", py_callsite, METH_NOARGS, "internal: the (file, line) a call would record"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "cohort._cohort",
    "cohort's C extension: process groups and collectives that never hang silently.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__cohort(void)
{
    PyObject *m = PyModule_Create(&moddef);
    if (!m)
        return NULL;
    site_files = PyDict_New();
    if (!site_files)
        goto fail;
    for (int i = 0; i < COHORT_DTYPE_COUNT; i++) {
        char up[32];
        size_t k = 0;
        for (const char *p = dtype_names[i]; *p && k + 1 < sizeof up; p++)
            up[k++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        up[k] = 0;
        if (PyModule_AddIntConstant(m, up, i) < 0)
            goto fail;
    }
    for (int i = 0; i < COHORT_OP_COUNT; i++) {
        char up[16];
        size_t k = 0;
        for (const char *p = op_names[i]; *p && k + 1 < sizeof up; p++)
            up[k++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        up[k] = 0;
        if (PyModule_AddIntConstant(m, up, i) < 0)
            goto fail;
    }
    if (PyModule_AddIntConstant(m, "UNDEFINED", COHORT_UNDEFINED) < 0 ||
        PyModule_AddStringConstant(m, "C_VERSION", "0.1.0") < 0)
        goto fail;
    if (cpy_errors_add(m) < 0 || cpy_group_add(m) < 0 || cpy_store_add(m) < 0 ||
        cpy_check_add(m) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
