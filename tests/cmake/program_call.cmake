# SPDX-License-Identifier: MIT
# Programs calling programs ({op: "call"}, expanded at define).
gg_core_test(test_program_call test_program_call.c integration 300 gg_client_static)
