/*
 * errors.c - one exception class per cohort_status, all under cohort.Error.
 *
 * An instance carries .status (int), .status_name ("COHORT_ERR_CONTRACT"),
 * .message (the C library's text, also str(e)) and the structured fields
 * of the failure when the library knows them (see fill_detail).
 */
#include "cohort_py.h"

#include <string.h>

static PyObject *base_error;
static PyObject *classes[COHORT_ERR_UNSUPPORTED + 1];

static const struct {
    cohort_status st;
    const char *name;
    const char *doc;
} table[] = {
    {COHORT_ERR_INVALID, "InvalidArgumentError", "A bad argument or configuration."},
    {COHORT_ERR_CONTRACT, "ContractError",
     "Ranks disagree on a call (op, count, dtype, reduce op, root/peer, tag, or one rank made "
     "an extra call / skipped one). Raised on every rank with the same message."},
    {COHORT_ERR_PEER_LOST, "PeerLostError", "A rank died or its connection closed."},
    {COHORT_ERR_TIMEOUT, "CohortTimeoutError", "A deadline passed (carries the stall report)."},
    {COHORT_ERR_ABORTED, "AbortedError",
     "The group was poisoned by an earlier error or by abort() (carries the cause)."},
    {COHORT_ERR_AUTH, "AuthError", "Job, token or generation refused."},
    {COHORT_ERR_STORE, "StoreError", "The store is unreachable or failed."},
    {COHORT_ERR_SYSTEM, "SysCallError", "An OS call failed (names the call and errno)."},
    {COHORT_ERR_NOMEM, "OutOfMemoryError", "An allocation failed."},
    {COHORT_ERR_PROTOCOL, "ProtocolError", "A malformed frame, bad magic or version."},
    {COHORT_ERR_NOT_FOUND, "NotFoundError", "A key is absent (non-waiting store calls)."},
    {COHORT_ERR_TOO_LARGE, "TooLargeError", "Over a configured limit."},
    {COHORT_ERR_UNSUPPORTED, "UnsupportedError", "A feature not built in, or not applicable."},
};

PyObject *cpy_error_class(cohort_status st)
{
    if ((int)st > 0 && (int)st <= COHORT_ERR_UNSUPPORTED && classes[st])
        return classes[st];
    return base_error;
}

static int set_str(PyObject *o, const char *attr, const char *v)
{
    PyObject *s = v ? PyUnicode_DecodeUTF8(v, (Py_ssize_t)strlen(v), "replace")
                    : (Py_INCREF(Py_None), Py_None);
    if (!s)
        return -1;
    int r = PyObject_SetAttrString(o, attr, s);
    Py_DECREF(s);
    return r;
}

static int set_obj(PyObject *o, const char *attr, PyObject *v)
{
    if (!v)
        return -1;
    int r = PyObject_SetAttrString(o, attr, v);
    Py_DECREF(v);
    return r;
}

/* Structured fields: defaults (None / empty) that fill_detail overwrites. */
static int set_defaults(PyObject *e)
{
    static const char *const none_attrs[] = {"call", "seq", "field", "kind", "file", "line"};
    for (size_t i = 0; i < sizeof none_attrs / sizeof *none_attrs; i++)
        if (PyObject_SetAttrString(e, none_attrs[i], Py_None) < 0)
            return -1;
    if (set_obj(e, "values", PyDict_New()) < 0 || set_obj(e, "culprits", PyList_New(0)) < 0 ||
        set_obj(e, "sites", PyDict_New()) < 0)
        return -1;
    return 0;
}

static PyObject *str_or_none(const char *v)
{
    if (!v || !*v)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(v, (Py_ssize_t)strlen(v), "replace");
}

/* The structured fields, from cohort_error_info_get (the failure that
 * poisoned g): call, seq, field, kind, values {rank: value}, culprits
 * [ranks], sites {rank: (file, line)}, and file/line of the first culprit
 * (else of this rank) for convenience. */
static int fill_detail(PyObject *e, cohort_group *g, cohort_status st)
{
    if (!g || st == COHORT_ERR_INVALID)
        return 0; /* argument errors are local: the group's failure is not theirs */
    cohort_error_info *info = cohort_error_info_get(g);
    if (!info)
        return 0;
    int rc = -1;
    PyObject *values = PyDict_New(), *sites = PyDict_New(), *culprits = PyList_New(0);
    if (!values || !sites || !culprits)
        goto out;
    for (int r = 0; r < info->nranks; r++) {
        if (info->values && info->values[r]) {
            PyObject *v = str_or_none(info->values[r]);
            PyObject *k = PyLong_FromLong(r);
            int bad = !v || !k || PyDict_SetItem(values, k, v) < 0;
            Py_XDECREF(v), Py_XDECREF(k);
            if (bad)
                goto out;
        }
        if (info->files && info->files[r]) {
            PyObject *v = Py_BuildValue("(si)", info->files[r], info->lines ? info->lines[r] : 0);
            PyObject *k = PyLong_FromLong(r);
            int bad = !v || !k || PyDict_SetItem(sites, k, v) < 0;
            Py_XDECREF(v), Py_XDECREF(k);
            if (bad)
                goto out;
        }
    }
    for (int i = 0; i < info->nculprits; i++) {
        PyObject *k = PyLong_FromLong(info->culprits[i]);
        if (!k || PyList_Append(culprits, k) < 0) {
            Py_XDECREF(k);
            goto out;
        }
        Py_DECREF(k);
    }
    if (set_obj(e, "call", str_or_none(info->call)) < 0 ||
        set_obj(e, "seq", info->seq ? PyLong_FromUnsignedLongLong(info->seq)
                                    : (Py_INCREF(Py_None), Py_None)) < 0 ||
        set_obj(e, "field", str_or_none(info->field)) < 0 ||
        set_obj(e, "kind", str_or_none(info->kind)) < 0 ||
        PyObject_SetAttrString(e, "values", values) < 0 ||
        PyObject_SetAttrString(e, "sites", sites) < 0 ||
        PyObject_SetAttrString(e, "culprits", culprits) < 0)
        goto out;
    int who = info->nculprits ? info->culprits[0] : cohort_rank(g);
    if (info->files && who >= 0 && who < info->nranks && info->files[who]) {
        if (set_obj(e, "file", str_or_none(info->files[who])) < 0 ||
            set_obj(e, "line", PyLong_FromLong(info->lines[who])) < 0)
            goto out;
    }
    rc = 0;
out:
    Py_XDECREF(values), Py_XDECREF(sites), Py_XDECREF(culprits);
    cohort_error_info_free(info);
    return rc;
}

PyObject *cpy_raise(cohort_status st, const char *msg, cohort_group *g)
{
    PyObject *cls = cpy_error_class(st);
    if (!msg || !*msg)
        msg = cohort_strerror(st);
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    if (!text)
        return NULL;
    PyObject *e = PyObject_CallOneArg(cls, text);
    if (!e) {
        Py_DECREF(text);
        return NULL;
    }
    if (set_obj(e, "status", PyLong_FromLong((long)st)) < 0 ||
        set_str(e, "status_name", cohort_status_name(st)) < 0 ||
        PyObject_SetAttrString(e, "message", text) < 0 || set_defaults(e) < 0 ||
        fill_detail(e, g, st) < 0) {
        Py_DECREF(text);
        Py_DECREF(e);
        return NULL;
    }
    Py_DECREF(text);
    PyErr_SetObject(cls, e);
    Py_DECREF(e);
    return NULL;
}

int cpy_errors_add(PyObject *m)
{
    base_error = PyErr_NewExceptionWithDoc(
        "cohort.Error",
        "Base class of cohort's errors: .status, .status_name, .message (the C library's "
        "text), and the structured fields call, seq, field, kind, values, culprits, sites, "
        "file, line where the failure has them.",
        NULL, NULL);
    if (!base_error || PyModule_AddObjectRef(m, "Error", base_error) < 0)
        return -1;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        char qual[64];
        snprintf(qual, sizeof qual, "cohort.%s", table[i].name);
        PyObject *bases;
        /* Also the builtin family a Python user would catch. */
        if (table[i].st == COHORT_ERR_TIMEOUT)
            bases = PyTuple_Pack(2, base_error, PyExc_TimeoutError);
        else if (table[i].st == COHORT_ERR_NOMEM)
            bases = PyTuple_Pack(2, base_error, PyExc_MemoryError);
        else
            bases = PyTuple_Pack(1, base_error);
        if (!bases)
            return -1;
        PyObject *c = PyErr_NewExceptionWithDoc(qual, table[i].doc, bases, NULL);
        Py_DECREF(bases);
        if (!c)
            return -1;
        classes[table[i].st] = c;
        if (PyModule_AddObjectRef(m, table[i].name, c) < 0)
            return -1;
    }
    return 0;
}
