/* etcd_stub.c - built when COHORT_ETCD=OFF (CMake drops this file when it is
 * ON and the real backend in this folder is compiled instead): there is no
 * etcd backend, so cohort_store_connect("etcd://...") fails with
 * COHORT_ERR_UNSUPPORTED. */
#include "store/backend.h"

const coh_store_backend *coh_store_etcd_backend(void) { return NULL; }
