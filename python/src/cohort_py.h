/*
 * cohort_py.h - shared declarations of the cohort._cohort extension.
 *
 * One file per area: module.c (module, init, constants, call sites),
 * errors.c (exception classes), buffer.c (buffers of numpy, torch, ...),
 * group.c (Group, Work, collectives), interrupt.c (Ctrl-C during a blocked
 * call), store.c (Store, StoreServer), check.c (Checker: cohort_check.h). A new binding adds a file and a
 * cpy_<area>_add(module) call in module.c.
 */
#ifndef COHORT_PY_H
#define COHORT_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cohort.h>
#include <cohort_store.h>

/* ---- module.c ---- */
/* The Python caller's file:line (the first frame outside the cohort
 * package). *file stays valid for the life of the process (the contract
 * and the flight recorder keep the pointer). */
void cpy_callsite(const char **file, int *line);
/* Parses a dtype (None, an int constant, a name such as "bfloat16", or an
 * object with a .name/str() naming one: numpy/torch dtypes). -1 for None.
 * Returns 0, or -1 with TypeError set. */
int cpy_parse_dtype(PyObject *o, int *dtype);
int cpy_parse_op(PyObject *o, int *op);

/* ---- errors.c ---- */
int cpy_errors_add(PyObject *m);
/* Raises the class of st with msg (the C library's text). g: the group the
 * error happened on (for structured fields), or NULL. Returns NULL. */
PyObject *cpy_raise(cohort_status st, const char *msg, cohort_group *g);
/* The class for a status (borrowed). */
PyObject *cpy_error_class(cohort_status st);

/* ---- buffer.c ---- */
typedef struct cpy_buf {
    PyObject *obj;     /* the caller's object (strong ref), NULL if unused */
    PyObject *keep;    /* what keeps the memory alive: a DLPack capsule, ... */
    Py_buffer view;    /* valid when has_view */
    int has_view;
    void *ptr;
    size_t nbytes;
    size_t count;      /* elements of dtype */
    int dtype;         /* cohort_dtype */
    int readonly;
    const char *arg;   /* its argument's name, for messages */
} cpy_buf;

#define CPY_IN 0  /* read by the call */
#define CPY_OUT 1 /* written by the call */
/* Takes the memory of obj without copying: the buffer protocol (numpy,
 * bytearray, memoryview, array.array), DLPack (torch CPU tensors) or
 * __array_interface__. dtype < 0: from the buffer. Non-contiguous memory,
 * a read-only buffer for CPY_OUT, an unsupported type: TypeError or
 * ValueError naming `what` (the call) and `arg` (the argument). Returns 0 or -1 (b released). */
int cpy_buf_get(PyObject *obj, const char *what, const char *arg, int mode, int dtype,
                cpy_buf *b);
void cpy_buf_release(cpy_buf *b);

/* ---- group.c ---- */
extern PyTypeObject CpyGroup_Type;
extern PyTypeObject CpyWork_Type;
int cpy_group_add(PyObject *m);
/* Wraps a fresh cohort_group (takes ownership); parent may be NULL. */
PyObject *cpy_group_new(cohort_group *g, PyObject *parent);
/* The cohort_group of a Group (NULL once finalized). */
cohort_group *cpy_group_get(PyObject *group);
/* Lends the cohort_group to another object (a Checker): the Group cannot be
 * finalized until it is given back. NULL with an error if finalized. */
cohort_group *cpy_group_borrow(PyObject *group, const char *who);
void cpy_group_unborrow(PyObject *group);

/* ---- check.c ---- */
int cpy_check_add(PyObject *m);

/* ---- interrupt.c ---- */
/* Around a blocking call on g (called without the GIL): a SIGINT that arrives in
 * between aborts g (from a helper thread), so every rank's call returns
 * within the abort's propagation time; the interrupted rank then raises
 * KeyboardInterrupt. Returns a token for cpy_intr_leave, -1 if the
 * registry is full (the call then runs unguarded). */
int cpy_intr_enter(cohort_group *g);
/* Returns 1 if a SIGINT arrived while the token was registered. */
int cpy_intr_leave(int token);

/* ---- store.c ---- */
int cpy_store_add(PyObject *m);

#endif
