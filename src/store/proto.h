/*
 * proto.h - the cohort store wire protocol: frame header, payload encoding,
 * request validation. Pure functions over byte buffers: no I/O, no globals,
 * so the fuzz target (tests/fuzz/fuzz_store_proto.c) can reach all of it.
 * docs/store-protocol.md is the normative description; keep them in step.
 *
 * Frame = 12-byte header + payload. Header (all integers little-endian):
 *   0  u8  magic 'C' (0x43)
 *   1  u8  magic 'S' (0x53)
 *   2  u8  protocol version (COH_PROTO_VERSION)
 *   3  u8  op
 *   4  u32 request id (0: unsolicited / handshake)
 *   8  u32 payload length
 * The header layout never changes between versions, so any two versions can
 * still exchange an ERROR frame saying which versions they speak.
 *
 * Payload primitives: u8, u32, i64 (LE), bytes = u32 length + data.
 * Replies use op | 0x80 and start with u8 status (a cohort_status); a
 * non-zero status is followed by bytes message and nothing else.
 */
#ifndef COH_STORE_PROTO_H
#define COH_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "cohort_status.h"
#include "util/bytes.h"

#define COH_PROTO_MAGIC0 0x43 /* 'C' */
#define COH_PROTO_MAGIC1 0x53 /* 'S' */
#define COH_PROTO_VERSION 1
#define COH_PROTO_HDR 12
#define COH_PROTO_NONCE 32 /* HELLO nonce bytes */
#define COH_PROTO_MAC 32   /* HMAC-SHA256 */
#define COH_PROTO_MAX_JOB 255
/* Frames a peer may send before it authenticated are tiny; anything larger
 * is refused before a byte of it is buffered. */
#define COH_PROTO_MAX_PREAUTH 512
#define COH_PROTO_REPLY 0x80

/* Ops. Append-only: they go on the wire. */
enum coh_proto_op {
    COH_OP_HELLO = 0x01,     /* server -> client: nonce[32] */
    COH_OP_AUTH = 0x02,      /* client -> server: u32 gen, bytes job, mac[32] */
    COH_OP_SET = 0x10,       /* key, value */
    COH_OP_GET = 0x11,       /* u8 flags, key -> value (waits) */
    COH_OP_ADD = 0x12,       /* key, i64 delta -> i64 */
    COH_OP_CAS = 0x13,       /* key, expected, desired -> u8 exists, value */
    COH_OP_CHECK = 0x14,     /* u32 n, keys -> u8 all exist */
    COH_OP_WAIT = 0x15,      /* u8 flags, u32 n, keys -> u32 which */
    COH_OP_DELETE = 0x16,    /* key -> u8 deleted */
    COH_OP_NUM_KEYS = 0x17,  /* prefix -> i64 */
    COH_OP_LIST = 0x18,      /* prefix -> u32 n, keys */
    COH_OP_MULTI_GET = 0x19, /* u8 flags, u32 n, keys -> n values (waits) */
    COH_OP_MULTI_SET = 0x1A, /* u32 n, (key, value) * n */
    COH_OP_APPEND = 0x1B,    /* key, value */
    COH_OP_BARRIER = 0x1C,   /* name, u32 n */
    COH_OP_CANCEL = 0x1D,    /* u32 request id to abandon; no reply */
    COH_OP_PING = 0x1E,      /* empty -> empty */
    COH_OP_STATS = 0x1F,     /* empty -> i64 conns, job_conns, waiters, keys, mem_used,
                                max_memory; u32 generation */
    COH_OP_SET_NOREPLY = 0x20, /* key, value; replied to only when it fails (pipelined set) */
    COH_OP_SET_GEN = 0x21,   /* u32 generation -> u32 previous; operator (generation 0) only */
    COH_OP_ERROR = 0x7F,     /* server -> client, id 0: u8 status, bytes msg; then close */
};

/* Flags of waiting requests (GET, WAIT, MULTI_GET). */
#define COH_WAITF_ANY 0x01    /* WAIT: any key instead of all */
#define COH_WAITF_NOWAIT 0x02 /* reply at once (NOT_FOUND / TIMEOUT) if not ready */

typedef struct coh_frame_hdr {
    uint8_t version;
    uint8_t op;
    uint32_t id;
    uint32_t len;
} coh_frame_hdr;

/* Result of coh_proto_parse_hdr. */
enum { COH_HDR_NEED = 0, COH_HDR_OK = 1, COH_HDR_BAD_MAGIC = -1, COH_HDR_BAD_VERSION = -2 };

/* Parses a header from the first n bytes of p. COH_HDR_NEED if n < 12;
 * BAD_MAGIC / BAD_VERSION leave the decoded fields in *h (version too). */
int coh_proto_parse_hdr(const uint8_t *p, size_t n, coh_frame_hdr *h);
void coh_proto_put_hdr(uint8_t *p, uint8_t op, uint32_t id, uint32_t len);
/* Same with an explicit version (tests of version mismatch). */
void coh_proto_put_hdr_v(uint8_t *p, uint8_t version, uint8_t op, uint32_t id, uint32_t len);
const char *coh_proto_op_name(uint8_t op); /* "GET", "GET reply", "op 0x42" (static buf: tests) */

/* LE primitives: util/bytes.h (coh_put_u32, coh_get_u64, ...). */

/* ---- reading a payload: a cursor that fails safe (sticky error) ---- */
typedef struct coh_rd {
    const uint8_t *p;
    size_t n;   /* bytes left */
    int err;    /* set once a read ran past the end */
} coh_rd;

static inline void coh_rd_init(coh_rd *r, const void *p, size_t n)
{
    r->p = p;
    r->n = n;
    r->err = 0;
}
uint8_t coh_rd_u8(coh_rd *r);
uint32_t coh_rd_u32(coh_rd *r);
int64_t coh_rd_i64(coh_rd *r);
/* bytes: u32 length + data; *out points into the payload. */
const uint8_t *coh_rd_bytes(coh_rd *r, uint32_t *len);
const uint8_t *coh_rd_raw(coh_rd *r, size_t len);

/* ---- writing: a growable buffer (coh_malloc) with a sticky OOM flag ---- */
typedef struct coh_wr {
    uint8_t *p;
    size_t len, cap;
    int oom;
} coh_wr;

void coh_wr_init(coh_wr *w);
void coh_wr_free(coh_wr *w);
int coh_wr_reserve(coh_wr *w, size_t more); /* 0 ok, -1 OOM */
void coh_wr_u8(coh_wr *w, uint8_t v);
void coh_wr_u32(coh_wr *w, uint32_t v);
void coh_wr_i64(coh_wr *w, int64_t v);
void coh_wr_bytes(coh_wr *w, const void *p, size_t n); /* u32 length + data */
void coh_wr_raw(coh_wr *w, const void *p, size_t n);
/* Starts a frame: reserves the header; coh_wr_end_frame fills it in with the
 * payload length. Returns the frame's start offset. */
size_t coh_wr_begin_frame(coh_wr *w);
void coh_wr_end_frame(coh_wr *w, size_t start, uint8_t op, uint32_t id);

/* ---- requests: validated views into one frame's payload ---- */

/* Limits the server enforces while decoding (bytes). */
typedef struct coh_proto_limits {
    uint32_t max_key;
    uint32_t max_value;
} coh_proto_limits;

typedef struct coh_slice {
    const uint8_t *p;
    uint32_t n;
} coh_slice;

typedef struct coh_req {
    uint8_t op;
    uint32_t id;
    uint8_t flags;     /* GET / WAIT / MULTI_GET */
    coh_slice key;     /* SET GET ADD CAS DELETE APPEND; prefix (NUM_KEYS LIST); name (BARRIER) */
    coh_slice val;     /* SET APPEND; desired (CAS) */
    coh_slice exp;     /* CAS expected */
    int64_t delta;     /* ADD */
    uint32_t n;        /* CHECK WAIT MULTI_GET MULTI_SET: item count; BARRIER: participants */
    uint32_t target;   /* CANCEL */
    /* CHECK WAIT MULTI_GET: n keys; MULTI_SET: n (key, value) pairs; iterate
     * with coh_req_next. */
    coh_rd items;
    /* AUTH */
    uint32_t generation;
    coh_slice job;
    const uint8_t *mac;
} coh_req;

/* Decodes and validates a request payload completely (every length checked
 * against the payload and the limits, every count against the bytes that
 * could hold it). COHORT_OK, or COHORT_ERR_PROTOCOL (malformed) /
 * COHORT_ERR_TOO_LARGE (over a limit) with a message in err. */
cohort_status coh_proto_decode_req(const coh_frame_hdr *h, const uint8_t *payload,
                                   const coh_proto_limits *lim, coh_req *out, char *err,
                                   size_t errlen);
/* Next item of a validated multi-key request: key (and value for MULTI_SET). */
void coh_req_next(coh_req *r, coh_slice *key, coh_slice *val);

/* ---- replies ---- */
typedef struct coh_reply {
    uint8_t op;        /* request op (without the 0x80 bit) */
    uint32_t id;
    cohort_status status;
    coh_slice msg;     /* status != OK */
    coh_rd body;       /* status == OK: the op-specific rest */
} coh_reply;

/* Splits a reply frame into status / message / body. COHORT_OK or
 * COHORT_ERR_PROTOCOL (message in err). */
cohort_status coh_proto_decode_reply(const coh_frame_hdr *h, const uint8_t *payload,
                                     coh_reply *out, char *err, size_t errlen);

/* HMAC-SHA256(key=token, msg = nonce || job_id || u32le generation). */
void coh_proto_auth_mac(uint8_t mac[COH_PROTO_MAC], const char *token,
                        const uint8_t nonce[COH_PROTO_NONCE], const uint8_t *job, size_t joblen,
                        uint32_t generation);

/* Parses the integer form of a counter value ("-12"); 0 ok, -1 not an int64. */
int coh_proto_parse_i64(const uint8_t *p, size_t n, int64_t *out);

#endif
