# SPDX-License-Identifier: MIT
# The daemon's graph machinery on the GPU, each test with clients in their
# own processes; label gpu, SKIP (77) without a device.
#   gpu_update  program.rebind and adoption of parked graphs, both through
#               hipGraphExecUpdate, and exec-update-limit
#   gpu_async   replays pipelined with the client's own stream through IPC
#               events, async answers; completion by polling and by host
#               functions, and validation
if(NOT GFXGRAPH_GPU_KIND STREQUAL "off" AND TARGET gg_gpu AND TARGET gg_test_harness)
  foreach(_name gpu_update gpu_async)
    add_executable(test_${_name} ${CMAKE_CURRENT_LIST_DIR}/../gpu/test_${_name}.c)
    target_link_libraries(test_${_name} PRIVATE gg_test_harness gg_client_static gg_gpu m)
    add_dependencies(test_${_name} gfxgraphd)
    add_test(NAME ${_name} COMMAND test_${_name})
    set_tests_properties(${_name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
  endforeach()
endif()
