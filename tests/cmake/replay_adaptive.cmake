# SPDX-License-Identifier: MIT
# replay-mode adaptive: the choice's bookkeeping with made-up
# timings (unit), and the daemon's choices, stats and remembered decisions
# with adaptive-timing's fixed figures (integration).
add_executable(test_adapt ${GG_TESTS_DIR}/test_adapt.c)
target_link_libraries(test_adapt PRIVATE gg_test_harness gg_daemon)
add_test(NAME test_adapt COMMAND test_adapt)
set_tests_properties(test_adapt PROPERTIES LABELS "unit" TIMEOUT 60)
gg_core_test(test_adaptive test_adaptive.c integration 300 gg_client_static)
add_dependencies(test_adaptive gfxgraphctl)
