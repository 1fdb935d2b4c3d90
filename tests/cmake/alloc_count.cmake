# SPDX-License-Identifier: MIT
# Heap allocations of a cache-hit replay (test_alloc_count.c): the daemon and
# the test (the client) run under the LD_PRELOAD shim alloc_count.c, which
# counts malloc and friends into a file; a cache-hit replay must allocate
# nothing, on the fast path (the client's default) and on the socket path
# (GFXGRAPH_FASTPATH=0).  Not in sanitizer builds: ASan must be the first
# preloaded library and owns malloc itself.
if(NOT GFXGRAPH_SANITIZE)
  add_library(gg_alloc_count MODULE ${CMAKE_CURRENT_SOURCE_DIR}/alloc_count.c)
  set_target_properties(gg_alloc_count PROPERTIES PREFIX "lib" C_VISIBILITY_PRESET default)
  target_link_libraries(gg_alloc_count PRIVATE ${CMAKE_DL_LIBS})

  add_executable(test_alloc_count ${CMAKE_CURRENT_SOURCE_DIR}/test_alloc_count.c)
  target_link_libraries(test_alloc_count PRIVATE gg_test_harness gg_client_static)
  target_compile_definitions(test_alloc_count PRIVATE
    GG_DAEMON_PATH="$<TARGET_FILE:gfxgraphd>"
    GG_ALLOC_SHIM="$<TARGET_FILE:gg_alloc_count>")
  add_dependencies(test_alloc_count gg_alloc_count)
  add_test(NAME test_alloc_count_fast COMMAND test_alloc_count fast)
  add_test(NAME test_alloc_count_socket COMMAND test_alloc_count socket)
  set_tests_properties(test_alloc_count_fast test_alloc_count_socket PROPERTIES
    LABELS "integration" TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
