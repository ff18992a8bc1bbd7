/*
 * buffer.c - the memory behind a Python object, without a copy.
 *
 * Three ways in, tried in order: the buffer protocol (numpy arrays,
 * bytearray, memoryview, array.array), DLPack (torch tensors, which have no
 * buffer protocol; also how bfloat16 arrives, numpy having no bfloat16) and
 * __array_interface__ (ml_dtypes' bfloat16 arrays and other array-likes).
 * Whatever is refused is refused here, before a call moves any byte.
 */
#include "cohort_py.h"

#include <stdint.h>
#include <string.h>

/* DLPack's ABI (dlpack.h, v0.x: the version torch 1.13 and 2.x export
 * through __dlpack__ without arguments). */
typedef struct {
    int32_t device_type; /* 1: CPU */
    int32_t device_id;
} dl_device;
typedef struct {
    uint8_t code; /* 0 int, 1 uint, 2 float, 4 bfloat, 6 bool */
    uint8_t bits;
    uint16_t lanes;
} dl_dtype;
typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* elements; NULL: compact row-major */
    uint64_t byte_offset;
} dl_tensor;
typedef struct dl_managed {
    dl_tensor t;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *);
} dl_managed;

void cpy_buf_release(cpy_buf *b)
{
    if (b->has_view)
        PyBuffer_Release(&b->view);
    b->has_view = 0;
    Py_CLEAR(b->keep); /* an unconsumed DLPack capsule calls the deleter itself */
    Py_CLEAR(b->obj);
    b->ptr = NULL;
    b->nbytes = b->count = 0;
}

/* int8..float64 from a struct-module format and item size; -1 if none. */
static int dtype_from_format(const char *fmt, Py_ssize_t itemsize, char *why, size_t whylen)
{
    if (!fmt)
        fmt = "B";
    if (*fmt == '>' || *fmt == '!') {
        snprintf(why, whylen, "big-endian data (format '%s') is not supported", fmt);
        return -1;
    }
    if (*fmt == '@' || *fmt == '=' || *fmt == '<')
        fmt++;
    if (!fmt[0] || fmt[1]) {
        snprintf(why, whylen, "format '%s' is not a single scalar type", fmt);
        return -1;
    }
    switch (fmt[0]) {
    case 'b':
        return COHORT_INT8;
    case 'B':
    case 'c':
        return COHORT_UINT8;
    case 'e':
        return COHORT_FLOAT16;
    case 'f':
        return COHORT_FLOAT32;
    case 'd':
        return COHORT_FLOAT64;
    case 'i':
    case 'l':
    case 'q':
    case 'n':
        if (itemsize == 4)
            return COHORT_INT32;
        if (itemsize == 8)
            return COHORT_INT64;
        break;
    case 'I':
    case 'L':
    case 'Q':
    case 'N':
        if (itemsize == 4)
            return COHORT_UINT32;
        if (itemsize == 8)
            return COHORT_UINT64;
        break;
    default:
        break;
    }
    snprintf(why, whylen,
             "element type '%s' (%zd bytes) is not one of cohort's dtypes (int8, uint8, int32, "
             "uint32, int64, uint64, float16, bfloat16, float32, float64)",
             fmt, itemsize);
    return -1;
}

/* Applies an explicit dtype (reinterpreting the bytes) or checks the
 * buffer's own; fills count. */
static int finish(cpy_buf *b, const char *what, int mode, int own_dtype, size_t itemsize,
                  int dtype, const char *why)
{
    if (mode == CPY_OUT && b->readonly) {
        PyErr_Format(PyExc_TypeError,
                     "%s: %s is read-only (%.100s); pass a writable one "
                     "(bytearray, a writable numpy array)",
                     what, b->arg, Py_TYPE(b->obj)->tp_name);
        return -1;
    }
    if (dtype >= 0) {
        size_t esz = cohort_dtype_size((cohort_dtype)dtype);
        /* reinterpretation is allowed from raw bytes or an equal-sized type
         * (uint16 -> bfloat16), not between sizes */
        if (own_dtype != COHORT_UINT8 && own_dtype != COHORT_INT8 && itemsize != esz) {
            PyErr_Format(PyExc_TypeError,
                         "%s: dtype=%s (%zu bytes) does not fit %s's %zu-byte "
                         "elements",
                         what, cohort_dtype_name((cohort_dtype)dtype), esz, b->arg,
                         itemsize);
            return -1;
        }
        if (b->nbytes % esz) {
            PyErr_Format(PyExc_ValueError, "%s: %s's %zu bytes are not a whole number "
                         "of %s elements", what, b->arg, b->nbytes,
                         cohort_dtype_name((cohort_dtype)dtype));
            return -1;
        }
        b->dtype = dtype;
    } else {
        if (own_dtype < 0) {
            PyErr_Format(PyExc_TypeError, "%s: %s's %s", what, b->arg, why);
            return -1;
        }
        b->dtype = own_dtype;
    }
    b->count = b->nbytes / cohort_dtype_size((cohort_dtype)b->dtype);
    return 0;
}

static int from_buffer(PyObject *obj, const char *what, int mode, int dtype, cpy_buf *b)
{
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_RECORDS_RO) < 0) {
        /* e.g. numpy refusing to export a custom dtype: try the others */
        return 1;
    }
    b->has_view = 1;
    if (!PyBuffer_IsContiguous(&b->view, 'C')) {
        PyErr_Format(PyExc_ValueError,
                     "%s: %s is not contiguous (C order); pass a contiguous copy "
                     "(numpy.ascontiguousarray(x), t.contiguous())",
                     what, b->arg);
        return -1;
    }
    b->ptr = b->view.buf;
    b->nbytes = (size_t)b->view.len;
    b->readonly = b->view.readonly;
    char why[256] = "";
    int own = dtype_from_format(b->view.format, b->view.itemsize, why, sizeof why);
    return finish(b, what, mode, own, (size_t)b->view.itemsize, dtype, why) < 0 ? -1 : 0;
}

static int dl_to_dtype(dl_dtype t, char *why, size_t whylen)
{
    if (t.lanes == 1) {
        switch (t.code) {
        case 0:
            if (t.bits == 8)
                return COHORT_INT8;
            if (t.bits == 32)
                return COHORT_INT32;
            if (t.bits == 64)
                return COHORT_INT64;
            break;
        case 1:
            if (t.bits == 8)
                return COHORT_UINT8;
            if (t.bits == 32)
                return COHORT_UINT32;
            if (t.bits == 64)
                return COHORT_UINT64;
            break;
        case 2:
            if (t.bits == 16)
                return COHORT_FLOAT16;
            if (t.bits == 32)
                return COHORT_FLOAT32;
            if (t.bits == 64)
                return COHORT_FLOAT64;
            break;
        case 4:
            if (t.bits == 16)
                return COHORT_BFLOAT16;
            break;
        default:
            break;
        }
    }
    static const char *const codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex",
                                        "bool"};
    snprintf(why, whylen, "element type %s%u%s is not one of cohort's dtypes",
             t.code < 7 ? codes[t.code] : "?", t.bits, t.lanes != 1 ? " (vector lanes)" : "");
    return -1;
}

static int from_dlpack(PyObject *obj, const char *what, int mode, int dtype, cpy_buf *b)
{
    PyObject *cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
    if (!cap && mode == CPY_IN) {
        /* torch refuses to export a tensor that requires grad; reading it
         * through a detached view is what the user means for an input */
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyObject *rg = PyObject_GetAttrString(obj, "requires_grad");
        int req = rg && PyObject_IsTrue(rg) == 1;
        Py_XDECREF(rg);
        PyErr_Clear();
        PyObject *d = req ? PyObject_CallMethod(obj, "detach", NULL) : NULL;
        if (d) {
            Py_XDECREF(t), Py_XDECREF(v), Py_XDECREF(tb);
            cap = PyObject_CallMethod(d, "__dlpack__", NULL);
            Py_DECREF(d);
        } else {
            PyErr_Clear();
            PyErr_Restore(t, v, tb); /* __dlpack__'s own failure */
        }
    }
    if (!cap) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_Format(PyExc_TypeError, "%s: %s (%.100s) could not be exported: %S",
                     what, b->arg, Py_TYPE(obj)->tp_name, v ? v : Py_None);
        Py_XDECREF(t), Py_XDECREF(v), Py_XDECREF(tb);
        return -1;
    }
    b->keep = cap;
    dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
    if (!m) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %s's __dlpack__ returned no 'dltensor' "
                     "capsule", what, b->arg);
        return -1;
    }
    dl_tensor *t = &m->t;
    if (t->device.device_type != 1) {
        PyErr_Format(PyExc_TypeError,
                     "%s: %s is not in host memory (DLPack device type %d); cohort "
                     "moves CPU memory: pass t.cpu()",
                     what, b->arg, (int)t->device.device_type);
        return -1;
    }
    char why[256] = "";
    int own = dl_to_dtype(t->dtype, why, sizeof why);
    size_t isz = (size_t)t->dtype.bits / 8 * t->dtype.lanes;
    if (isz == 0) {
        PyErr_Format(PyExc_TypeError, "%s: %s has sub-byte elements", what,
                     b->arg);
        return -1;
    }
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: %s has a negative dimension", what,
                         b->arg);
            return -1;
        }
        n *= (size_t)t->shape[i];
    }
    if (t->strides && n > 1) {
        /* row-major compact; dimensions of size 1 may have any stride */
        int64_t want = 1;
        for (int i = t->ndim - 1; i >= 0; i--) {
            if (t->shape[i] != 1 && t->strides[i] != want) {
                PyErr_Format(PyExc_ValueError,
                             "%s: %s is not contiguous; pass t.contiguous()", what,
                             b->arg);
                return -1;
            }
            want *= t->shape[i];
        }
    }
    b->ptr = (char *)t->data + t->byte_offset;
    b->nbytes = n * isz;
    b->readonly = 0;
    return finish(b, what, mode, own, isz, dtype, why);
}

/* typestr of __array_interface__ ("<f4", "|u1", "<V2"...) */
static int dtype_from_typestr(const char *ts, PyObject *obj, size_t *isz, char *why, size_t wl)
{
    char kind = ts[0] ? ts[1] : 0;
    long sz = ts[0] && ts[1] ? strtol(ts + 2, NULL, 10) : 0;
    *isz = sz > 0 ? (size_t)sz : 0;
    if (ts[0] == '>') {
        snprintf(why, wl, "big-endian data ('%s') is not supported", ts);
        return -1;
    }
    switch (kind) {
    case 'i':
        return sz == 1 ? COHORT_INT8 : sz == 4 ? COHORT_INT32 : sz == 8 ? COHORT_INT64 : -2;
    case 'u':
        return sz == 1 ? COHORT_UINT8 : sz == 4 ? COHORT_UINT32 : sz == 8 ? COHORT_UINT64 : -2;
    case 'f':
        return sz == 2 ? COHORT_FLOAT16 : sz == 4 ? COHORT_FLOAT32 : sz == 8 ? COHORT_FLOAT64 : -2;
    case 'V': {
        /* ml_dtypes.bfloat16 arrays say "<V2"; their dtype names itself */
        PyObject *d = PyObject_GetAttrString(obj, "dtype");
        PyObject *nm = d ? PyObject_GetAttrString(d, "name") : NULL;
        const char *s = nm && PyUnicode_Check(nm) ? PyUnicode_AsUTF8(nm) : NULL;
        int r = s && sz == 2 && strcmp(s, "bfloat16") == 0 ? COHORT_BFLOAT16 : -2;
        Py_XDECREF(nm);
        Py_XDECREF(d);
        PyErr_Clear();
        if (r >= 0)
            return r;
        break;
    }
    default:
        break;
    }
    snprintf(why, wl, "element type '%s' is not one of cohort's dtypes", ts);
    return -1;
}

static int from_array_interface(PyObject *obj, PyObject *ai, const char *what, int mode,
                                int dtype, cpy_buf *b)
{
    b->keep = ai;
    PyObject *data = PyDict_Check(ai) ? PyDict_GetItemString(ai, "data") : NULL;
    PyObject *ts = PyDict_Check(ai) ? PyDict_GetItemString(ai, "typestr") : NULL;
    PyObject *shape = PyDict_Check(ai) ? PyDict_GetItemString(ai, "shape") : NULL;
    PyObject *strides = PyDict_Check(ai) ? PyDict_GetItemString(ai, "strides") : NULL;
    if (!data || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2 || !ts ||
        !PyUnicode_Check(ts) || !shape || !PyTuple_Check(shape)) {
        PyErr_Format(PyExc_TypeError, "%s: %s's __array_interface__ is not usable "
                     "(needs data as (pointer, read-only), typestr, shape)", what,
                     b->arg);
        return -1;
    }
    void *ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    if (!ptr && PyErr_Occurred())
        return -1;
    int ro = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
    if (ro < 0)
        return -1;
    const char *tss = PyUnicode_AsUTF8(ts);
    if (!tss)
        return -1;
    char why[256] = "";
    size_t isz = 0;
    int own = dtype_from_typestr(tss, obj, &isz, why, sizeof why);
    if (isz == 0) {
        PyErr_Format(PyExc_TypeError, "%s: %s's typestr '%s' has no item size", what,
                     b->arg, tss);
        return -1;
    }
    size_t n = 1;
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    for (Py_ssize_t i = 0; i < nd; i++) {
        long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        if (d < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s: negative dimension", what);
            return -1;
        }
        n *= (size_t)d;
    }
    if (strides && strides != Py_None && n > 1) {
        if (!PyTuple_Check(strides) || PyTuple_GET_SIZE(strides) != nd) {
            PyErr_Format(PyExc_TypeError, "%s: malformed strides in __array_interface__", what);
            return -1;
        }
        long long want = (long long)isz;
        for (Py_ssize_t i = nd - 1; i >= 0; i--) {
            long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
            long long s = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
            if (PyErr_Occurred())
                return -1;
            if (d != 1 && s != want) {
                PyErr_Format(PyExc_ValueError,
                             "%s: %s is not contiguous (C order); pass a contiguous "
                             "copy", what, b->arg);
                return -1;
            }
            want *= d;
        }
    }
    b->ptr = ptr;
    b->nbytes = n * isz;
    b->readonly = ro;
    return finish(b, what, mode, own < 0 ? -1 : own, isz, dtype, why);
}

int cpy_buf_get(PyObject *obj, const char *what, const char *arg, int mode, int dtype, cpy_buf *b)
{
    memset(b, 0, sizeof *b);
    b->arg = arg;
    if (!obj || obj == Py_None) {
        PyErr_Format(PyExc_TypeError, "%s: %s is None", what, b->arg);
        return -1;
    }
    Py_INCREF(obj);
    b->obj = obj;
    int r = 1;
    if (PyObject_CheckBuffer(obj)) {
        r = from_buffer(obj, what, mode, dtype, b);
        if (r == 1) {
            /* keep the buffer protocol's own complaint unless another way works */
            PyObject *t, *v, *tb;
            PyErr_Fetch(&t, &v, &tb);
            int has_other = PyObject_HasAttrString(obj, "__dlpack__") ||
                            PyObject_HasAttrString(obj, "__array_interface__");
            if (!has_other) {
                PyErr_Format(PyExc_TypeError, "%s: %s (%.100s) cannot be exported: %S",
                             what, b->arg, Py_TYPE(obj)->tp_name, v ? v : Py_None);
                Py_XDECREF(t), Py_XDECREF(v), Py_XDECREF(tb);
                r = -1;
            } else {
                Py_XDECREF(t), Py_XDECREF(v), Py_XDECREF(tb);
            }
        }
    }
    if (r == 1) {
        PyObject *ai = PyObject_GetAttrString(obj, "__array_interface__");
        if (ai) {
            r = from_array_interface(obj, ai, what, mode, dtype, b);
        } else {
            PyErr_Clear();
            if (PyObject_HasAttrString(obj, "__dlpack__"))
                r = from_dlpack(obj, what, mode, dtype, b);
        }
    }
    if (r == 1) {
        PyErr_Format(PyExc_TypeError,
                     "%s: %s must be a contiguous array (buffer protocol: numpy, "
                     "bytearray, memoryview, array.array; or a CPU torch tensor), not %.100s",
                     what, b->arg, Py_TYPE(obj)->tp_name);
        r = -1;
    }
    if (r < 0) {
        cpy_buf_release(b);
        return -1;
    }
    return 0;
}
