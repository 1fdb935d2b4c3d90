/* SPDX-License-Identifier: MIT */
/* Unit tests for the op library: table, dtype conversions, check rules and
 * the CPU references (against refs_double.c, computed from the quantized
 * inputs).  This file: main and the shared state; the tests are in
 * test_ops_rules.c (table, conversions, check rules) and
 * test_ops_accuracy.c (references, row independence).
 *
 * Environment: GG_TEST_SEED=<n> picks the base seed (printed at start; every
 * case derives its own seed from it and prints that seed if it fails),
 * GG_TEST_VERBOSE=1 prints every case and every check message. */
#include "test_ops_util.h"

#include <inttypes.h>

int g_pass, g_fail, g_verbose, g_case;
uint64_t g_seed = 0x67667261706800ull;

/* ---- main --------------------------------------------------------------- */

int main(void)
{
    const char *s = getenv("GG_TEST_SEED");
    if (s && *s)
        g_seed = strtoull(s, NULL, 0);
    s = getenv("GG_TEST_VERBOSE");
    g_verbose = s && *s && strcmp(s, "0") != 0;
    printf("test_ops: seed 0x%" PRIx64 " (set GG_TEST_SEED to repeat)\n", g_seed);

    test_ops_table();
    test_ops_conversions();
    test_ops_checks();
    test_ops_accuracy();
    test_ops_independence();

    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
