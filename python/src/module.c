/*
 * module.c - cohort._cohort: the module, cohort.init(), dtype and op
 * constants, and the Python call site that goes into every contract.
 */
#include "cohort_py.h"

#include <string.h>

/* Interned call-site file names: filename str -> bytes, never freed (the
 * library's flight recorder keeps the char pointer). */
static PyObject *site_files;
/* Frames whose file starts with this prefix belong to the cohort package
 * (wrappers such as a future cohort.torch): the call site is their caller. */
static char *pkg_prefix;
static size_t pkg_prefix_len;

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
        *line = PyFrame_GetLineNumber(f);
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
    /* a name, or a numpy/torch dtype (str() names it) */
    PyObject *s = PyUnicode_Check(o) ? (Py_INCREF(o), o) : PyObject_Str(o);
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

/* ---- cohort.init ---- */

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
    cohort_group *g = NULL;
    cohort_status st;
    char msg[1024];
    Py_BEGIN_ALLOW_THREADS
    st = cohort_init_opts(&g, &o);
    /* thread-local: read it on this thread, before anything else runs here */
    if (st != COHORT_OK)
        snprintf(msg, sizeof msg, "%s", cohort_last_error(NULL));
    Py_END_ALLOW_THREADS
    if (st != COHORT_OK) {
        if (PyErr_CheckSignals() < 0)
            return NULL;
        return cpy_raise(st, msg, NULL);
    }
    return cpy_group_new(g, NULL);
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
