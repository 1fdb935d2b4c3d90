/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the wire protocol: the framing scanner, msgpack
 * unpacking of what it frames, and the envelope decoder (see
 * proto_invariants.h for what is checked).  Built only with clang:
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGFXGRAPH_GPU=off
 *   cmake --build build-fuzz --target fuzz_proto
 *   build-fuzz/tests/fuzz_proto -max_len=4096 corpus/
 *
 * The first input byte picks how the rest is split when fed incrementally. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "proto_invariants.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char why[256];
    if (pi_check_bytes(data + 1, size - 1, data[0], why, sizeof why) < 0) {
        fprintf(stderr, "fuzz_proto: invariant broken: %s\n", why);
        abort();
    }
    return 0;
}
