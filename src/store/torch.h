/*
 * torch.h - the store server's PyTorch TCPStore listener (torch_server.c;
 * protocol in torch_proto.h, user documentation in docs/torch-store.md).
 */
#ifndef COH_STORE_TORCH_H
#define COH_STORE_TORCH_H

#include "cohort_store.h"

/* The listener itself is public: cohort_store_server_torch_listen
 * (cohort_store.h). */

/* Runs a server made by cohort_store_server_create on its own thread, as
 * cohort_store_server_start does (after listeners were added). On failure
 * the server is freed. */
cohort_status coh_store_server_spawn(cohort_store_server *s);

/* For server.c (conn is server_int.h's). */
struct conn;
int coh_torch_conn_init(struct conn *c);
void coh_torch_conn_close(struct conn *c);
/* Handles the requests in p[0..n) (at most max_reqs / max_bytes of them, and
 * none while c is backlogged) and returns the bytes used; the caller keeps
 * the rest for later. An unfinished request at the end is kept by c. */
size_t coh_torch_feed(struct conn *c, const uint8_t *p, size_t n, unsigned max_reqs,
                      size_t max_bytes);
int coh_torch_out(struct conn *c, const void *p, size_t n);
int coh_torch_partial(const struct conn *c);
void coh_torch_srv_free(cohort_store_server *s);

#endif
