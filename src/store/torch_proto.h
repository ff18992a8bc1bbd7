/*
 * torch_proto.h - PyTorch's TCPStore wire protocol, as cohort-store speaks it
 * on its opt-in torch listener (docs/torch-store.md). Two dialects:
 *
 *   torch 1.x (1.13): u8 op (SET 0, COMPARE_SET 1, GET 2, ADD 3, CHECK 4,
 *       WAIT 5, GETNUMKEYS 6, WATCH_KEY 7, DELETE_KEY 8), then the op's fields.
 *   torch 2.x: the client's first request is VALIDATE (op 0) + u32 magic
 *       0x3C85F7CE; ops are then VALIDATE 0, SET 1, COMPARE_SET 2, GET 3,
 *       ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7, DELETE_KEY 8, APPEND 9,
 *       MULTI_GET 10, MULTI_SET 11, CANCEL_WAIT 12, PING 13, QUEUE_PUSH 14,
 *       QUEUE_POP 15, QUEUE_LEN 16, LIST_KEYS 17, BARRIER 18.
 *
 * Fields are little-endian: a string is u64 length + bytes, counts are u64,
 * ADD's delta and BARRIER's world size i64, PING's nonce u32. Requests carry
 * no length and no id, so the parser here decides from the bytes alone
 * whether a whole request has arrived, and refuses lengths over the limits
 * before anything is buffered for them. Pure functions: no I/O, no globals
 * (tests/fuzz/fuzz_torch_proto.c drives them with arbitrary bytes).
 */
#ifndef COH_STORE_TORCH_PROTO_H
#define COH_STORE_TORCH_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "store/proto.h"

#define COH_TORCH_MAGIC 0x3C85F7CEu

/* Dialect of a connection: decided from its first bytes. */
enum { COH_TORCH_UNKNOWN = 0, COH_TORCH_V1 = 1, COH_TORCH_V2 = 2 };

/* Ops, numbered as torch 2.x numbers them; torch 1.x ops are mapped here. */
enum coh_torch_op {
    TQ_VALIDATE = 0,
    TQ_SET = 1,
    TQ_CAS = 2,
    TQ_GET = 3,
    TQ_ADD = 4,
    TQ_CHECK = 5,
    TQ_WAIT = 6,
    TQ_NUM_KEYS = 7,
    TQ_DELETE = 8,
    TQ_APPEND = 9,
    TQ_MULTI_GET = 10,
    TQ_MULTI_SET = 11,
    TQ_CANCEL_WAIT = 12,
    TQ_PING = 13,
    TQ_QUEUE_PUSH = 14,
    TQ_QUEUE_POP = 15,
    TQ_QUEUE_LEN = 16,
    TQ_LIST_KEYS = 17,
    TQ_BARRIER = 18,
    TQ_WATCH_KEY = 19, /* torch 1.x only (op 7 there); refused */
    TQ_NOPS
};

typedef struct coh_torch_limits {
    uint64_t max_key;
    uint64_t max_value;
    uint64_t max_items;   /* keys in one CHECK / WAIT / MULTI_GET / MULTI_SET */
    uint64_t max_request; /* bytes of one whole request */
} coh_torch_limits;

typedef struct coh_torch_req {
    uint8_t op;          /* TQ_* */
    coh_slice key;       /* SET CAS GET ADD DELETE APPEND QUEUE_* BARRIER WATCH_KEY */
    coh_slice val;       /* SET APPEND QUEUE_PUSH: value; CAS: desired */
    coh_slice exp;       /* CAS: expected */
    int64_t num;         /* ADD: delta; BARRIER: world size */
    uint32_t u32;        /* VALIDATE: magic; PING: nonce */
    uint64_t n;          /* CHECK WAIT MULTI_GET MULTI_SET: item count */
    const uint8_t *items; /* the n items as on the wire (u64 len + key [+ u64 len + value]) */
    size_t items_len;
} coh_torch_req;

/* Result of coh_torch_parse. */
enum { COH_TORCH_NEED = 0, COH_TORCH_BAD = -1 };

/* Parses one request from p[0..n). *version is the connection's dialect:
 * COH_TORCH_UNKNOWN on the first request, which decides it (torch 2.x opens
 * with VALIDATE + magic; anything else is torch 1.x) and sets *version.
 * Returns the bytes the request took (> 0) with *out filled in (its slices
 * point into p); COH_TORCH_NEED when the request is incomplete, with *need
 * set to a byte count the buffer must reach before parsing again is worth it
 * (always > n, never over max_request); COH_TORCH_BAD for a malformed or
 * over-limit request, with a message in err. */
long coh_torch_parse(const uint8_t *p, size_t n, int *version, const coh_torch_limits *lim,
                     coh_torch_req *out, size_t *need, char *err, size_t errlen);

/* Iterates the items of a parsed CHECK / WAIT / MULTI_GET (keys) or
 * MULTI_SET (key, value); *off starts at 0. Only valid on a parsed request. */
void coh_torch_next(const coh_torch_req *r, size_t *off, coh_slice *key, coh_slice *val);

const char *coh_torch_op_name(uint8_t op);

#endif
