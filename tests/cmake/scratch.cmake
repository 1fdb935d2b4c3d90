# SPDX-License-Identifier: MIT
# One scratch arena per program: shared by every branch and
# bucket, kept with parked graphs and adopted with them, counted once.
gg_core_test(test_arena test_arena.c integration 300 gg_client_static)
