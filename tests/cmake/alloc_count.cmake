# Heap allocations of a cache-hit replay (test_alloc_count.c): the daemon and
# the test (the client) run under the LD_PRELOAD shim alloc_count.c, which
# counts malloc and friends into a file; a cache-hit replay must allocate
# nothing, on the fast path (the client's default) and on the socket path
# (GFXGRAPH_FASTPATH=0).  Not in sanitizer builds: ASan must be the first
# preloaded library and owns malloc itself.
#
# The socket path still allocates per replay (7 in the daemon at 61db1e4,
# none in the client): its variant runs with GG_ALLOC_KNOWN_FAIL=1, which
# turns that failure into a SKIP (exit 77) that prints the counts.  Remove
# the variable once the socket path is allocation-free.
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
  set_tests_properties(test_alloc_count_socket PROPERTIES
    ENVIRONMENT "GG_ALLOC_KNOWN_FAIL=1")
endif()
