/*
 * tcp_conn.h - the tcp store backend's connection (tcp_conn.c), as the
 * operations (tcp_ops.c) use it: connect with retry and the handshake, one
 * pipelined request/reply path, one send without reply, the limits the
 * server announced. Private to src/store.
 */
#ifndef COH_STORE_TCP_CONN_H
#define COH_STORE_TCP_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "cohort_store.h"
#include "store/proto.h"

/* The backend's connect and close (coh_store_backend). */
cohort_status coh_tconn_connect(cohort_store *s, const char *addr, const char *job,
                                const char *token, uint32_t gen, int timeout_ms);
void coh_tconn_close(cohort_store *s);

/* Sends the frame in w (header written with id 0; the id is patched in)
 * and waits for its reply until deadline. On COHORT_OK *rep is the decoded
 * reply (status OK) and *payload, which rep points into, must be freed by
 * the caller (coh_free); on failure the handle's error says why, prefixed
 * by what. */
cohort_status coh_tconn_call(cohort_store *s, coh_wr *w, uint64_t deadline, const char *what,
                             coh_reply *rep, uint8_t **payload);
/* Sends the frame in w without waiting: for requests answered only when
 * they fail (SET_NOREPLY); that answer is reported by the next call or by
 * coh_tconn_take_failure. */
cohort_status coh_tconn_send(cohort_store *s, coh_wr *w, uint64_t deadline, const char *what);
/* The connection's failure, or a no-reply request's failure not yet
 * reported (then reported once, here). */
cohort_status coh_tconn_take_failure(cohort_store *s, const char *what);

/* Key and value lengths against the server's limits (from the AUTH reply). */
cohort_status coh_tconn_check_key(cohort_store *s, const char *what, size_t kl);
cohort_status coh_tconn_check_val(cohort_store *s, const char *what, size_t vl);

#endif
