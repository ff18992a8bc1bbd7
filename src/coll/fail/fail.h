/*
 * fail.h - turning a transport's failure into the group's (fail.c).
 */
#ifndef COH_COLL_FAIL_H
#define COH_COLL_FAIL_H

#include "core/group.h"

/* A transport call on g returned st (not COHORT_OK): turns the failure the
 * transport recorded (transport/transport.h, coh_tp_fail) into g's failure
 * - coh_group_fail, coh_group_peer_lost, coh_group_remote_abort or
 * coh_contract_mismatch, as the record says - and returns the status to go
 * on with. With no record, st is already the group's (a wait that found g
 * poisoned or past its deadline) and is returned as it is. Every caller of
 * a transport (src/coll, coll/shm, group init and finalize, tests) calls it
 * on the failure path at once, before anything could wait on the group. */
cohort_status coh_coll_transport_failed(cohort_group *g, cohort_status st);

#endif
