# SPDX-License-Identifier: MIT
# The fast path (PROTOCOL.md section 15) on the cpu backend, label
# integration (each test starts its own gfxgraphd on a temporary socket):
#
#   fastpath_results  fast-path replays against the socket path and a CPU
#                     reference: buckets, branches, eager fallback
#                     (GFXGRAPH_FAULT), batches above the largest bucket,
#                     errors, stats; submit/wait/poll; ordering with socket
#                     replays of the same session; program.rebind
#   fastpath_ring     descriptors the library never sends (a raw region
#                     client): each error's completion record; a broken
#                     ring; a client scribbling over its whole region while
#                     another replays
#   fastpath_life     a client SIGKILLed while it waits (no session, region,
#                     descriptor or mapping left behind); 16 sessions with
#                     regions at once; SIGTERM with regions idle and with a
#                     fast-path replay in flight
#   fastpath_spec     tests/scripts/fastpath_spec_client.py, a client written
#                     from PROTOCOL.md alone with Python's standard library;
#                     SKIP (77) without python3
#
# No timing assertions: counts and values only.
set(_gg_fp_dir ${CMAKE_CURRENT_LIST_DIR}/..)
foreach(_name fastpath_results fastpath_ring fastpath_life fastpath_spec)
  add_executable(test_${_name} ${_gg_fp_dir}/test_${_name}.c)
  target_include_directories(test_${_name} PRIVATE ${CMAKE_SOURCE_DIR}/proto)
  target_link_libraries(test_${_name} PRIVATE gg_test_harness gg_client_static Threads::Threads)
  target_compile_definitions(test_${_name} PRIVATE
    GG_DAEMON_PATH="$<TARGET_FILE:gfxgraphd>"
    GG_FP_SPEC_CLIENT="${CMAKE_SOURCE_DIR}/tests/scripts/fastpath_spec_client.py")
  add_test(NAME ${_name} COMMAND test_${_name})
  set_tests_properties(${_name} PROPERTIES LABELS integration TIMEOUT 600
    SKIP_RETURN_CODE 77)
endforeach()

# The same on the cpu backend with fastpath-completion = device: cache hits
# then take the path a GPU's do (the record's seq written by the "device",
# here a store right after the work; slots freed by the ring thread).
foreach(_name fastpath_results fastpath_life)
  add_test(NAME ${_name}_device COMMAND test_${_name})
  set_tests_properties(${_name}_device PROPERTIES LABELS integration TIMEOUT 600
    SKIP_RETURN_CODE 77 ENVIRONMENT "GG_TEST_DAEMON_ENV=GFXGRAPH_FASTPATH_COMPLETION=device")
endforeach()
