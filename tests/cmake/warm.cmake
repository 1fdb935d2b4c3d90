# SPDX-License-Identifier: MIT
# Graphs kept warm across a client restart (parked, adopted, updated in place).
gg_core_test(test_client_warm test_client_warm.c integration 300 gg_client_static)
