/*
 * store_util.h - helpers for the store tests: embedded and standalone
 * servers, raw protocol sockets (for bad-input tests), assertions that print
 * the handle's error detail, bounded condition waits.
 */
#ifndef COHORT_TEST_STORE_UTIL_H
#define COHORT_TEST_STORE_UTIL_H

#include <stdint.h>
#include <sys/types.h>

#include "support/support.h"
#include "cohort.h"
#include "store/backend.h"
#include "store/proto.h"
#include "cohort_store.h"
#include "util/util.h"

#define JOB_A "jobA"
#define TOK_A "token-A-0123456789"
#define JOB_B "jobB"
#define TOK_B "token-B-9876543210"

/* Status assert on a store handle (NULL: the thread-local detail). */
#define ST_EXPECT(expr, want, s)                                                                   \
    do {                                                                                           \
        cohort_status st_ = (expr);                                                                \
        ck_assert_msg(st_ == (want), "%s returned %s, wanted %s; detail: %s", #expr,               \
                      cohort_status_name(st_), cohort_status_name(want),                           \
                      (s) ? cohort_store_last_error(s) : coh_tls_err()->msg);                      \
    } while (0)
#define ST_OK(expr, s) ST_EXPECT(expr, COHORT_OK, s)

/* In a forked client: exit(1) with a message on failure. */
#define CHILD_OK(expr, s)                                                                          \
    do {                                                                                           \
        cohort_status st_ = (expr);                                                                \
        RANK_CHECK(st_ == COHORT_OK, "%s: %s", cohort_status_name(st_),                            \
                   (s) ? cohort_store_last_error(s) : coh_tls_err()->msg);                         \
    } while (0)

/* Embedded server for jobs A and B on 127.0.0.1:0; o may be NULL (defaults).
 * Writes "127.0.0.1:port" to addr. */
cohort_store_server *su_server(const cohort_store_server_opts *o, char *addr, size_t alen);

cohort_store *su_connect(const char *addr, const char *job, const char *tok);
cohort_store *su_connect_gen(const char *addr, const char *job, const char *tok, uint32_t gen);

/* Polls stats until pred(stats, arg) holds or timeout_ms passes; returns 1 if
 * it held. The 1 ms pause bounds CPU use; it is not synchronisation. */
int su_until(cohort_store *s, int (*pred)(const cohort_store_stats *, void *), void *arg,
             int timeout_ms);
int su_waiters_eq(const cohort_store_stats *st, void *n); /* arg: (intptr_t) */
int su_conns_eq(const cohort_store_stats *st, void *n);

/* Standalone cohort-store: fork/exec with args (NULL-terminated, after
 * argv[0]); reads "listening on H:P" from its stdout; writes "127.0.0.1:P".
 * Its stderr goes to errpath if not NULL. Returns the pid (-1 on failure). */
pid_t su_spawn_store(const char *const *args, char *addr, size_t alen, const char *errpath);
/* Writes a token file for jobs A and B; returns its path (static). */
const char *su_token_file(void);

/* ---- raw protocol client ---- */
int su_raw_connect(int port);                 /* blocking TCP socket, or -1 */
int su_port_of(const char *addr);
/* Reads one frame (header + payload into buf, up to cap) within timeout.
 * Returns payload length, -1 on EOF/error, -2 on timeout, -3 too large. */
int su_raw_read(int fd, coh_frame_hdr *h, uint8_t *buf, size_t cap, int timeout_ms);
/* Reads until EOF within timeout: 1 if the peer closed, 0 if not. */
int su_raw_eof(int fd, int timeout_ms);
int su_raw_write(int fd, const void *p, size_t n);
/* Full handshake on fd (reads HELLO, sends AUTH); returns the reply status. */
cohort_status su_raw_auth(int fd, const char *job, const char *tok, uint32_t gen);
/* Sends frame (op, id, payload) and reads the reply with that id; returns
 * its status and copies the message or body to out (NUL-terminated). */
cohort_status su_raw_call(int fd, uint8_t op, uint32_t id, const void *payload, size_t n,
                          char *out, size_t outlen);

double su_now_ms(void);

#endif
