# SPDX-License-Identifier: MIT
# A tiny random Llama (2 layers, GQA, f32) decoded through the daemon as one
# program (cpu backend), token-identical to a double-precision reference in
# the test; cache row 3 (padding of bucket 4) never written.
gg_core_test(test_llama_decode test_llama_decode.c integration 120 gg_client_static)
