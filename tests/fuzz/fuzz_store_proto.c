/*
 * fuzz_store_proto.c - libFuzzer target for the store frame parser
 * (src/store/proto.c): the input is a byte stream cut into frames the way
 * the server and client cut theirs; every complete frame goes through the
 * request decoder (with small limits, so the limit paths run too), the
 * item iterator, the reply decoder and the counter parser.
 *
 * Built as a libFuzzer binary with -DCOHORT_FUZZ=ON (clang), and linked
 * into test_fuzz_store_replay, which replays the checked-in corpus plus
 * seeded mutations of it in every ctest run.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "store/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    coh_proto_limits lim = {64, 1024};
    while (size >= COH_PROTO_HDR) {
        coh_frame_hdr h;
        int r = coh_proto_parse_hdr(data, size, &h);
        if (r == COH_HDR_BAD_MAGIC)
            return 0; /* the server closes such a connection */
        data += COH_PROTO_HDR;
        size -= COH_PROTO_HDR;
        /* Like the server: a length over the input is "wait for more". */
        size_t take = h.len <= size ? h.len : size;
        const uint8_t *payload = data;
        coh_req q;
        char err[256];
        if (h.len <= size &&
            coh_proto_decode_req(&h, payload, &lim, &q, err, sizeof err) == COHORT_OK) {
            if (q.op == COH_OP_CHECK || q.op == COH_OP_WAIT || q.op == COH_OP_MULTI_GET ||
                q.op == COH_OP_MULTI_SET) {
                /* Validated items must iterate within the payload. */
                for (uint32_t i = 0; i < q.n; i++) {
                    coh_slice k, v;
                    coh_req_next(&q, &k, &v);
                    if (k.n && (k.p < payload || k.p + k.n > payload + h.len))
                        __builtin_trap();
                }
                if (q.items.err)
                    __builtin_trap();
            }
            int64_t x;
            coh_proto_parse_i64(q.key.p ? q.key.p : payload, q.key.n, &x);
        }
        if (h.len <= size) {
            coh_reply rep;
            if (coh_proto_decode_reply(&h, payload, &rep, err, sizeof err) == COHORT_OK &&
                rep.status != COHORT_OK && rep.msg.n > h.len)
                __builtin_trap();
        }
        data += take;
        size -= take;
    }
    return 0;
}
