# Graph update on the GPU: program.rebind and adoption of parked graphs,
# both through hipGraphExecUpdate.  Label gpu; SKIP (77) without a device.
if(NOT GFXGRAPH_GPU_KIND STREQUAL "off" AND TARGET gg_gpu AND TARGET gg_test_harness)
  add_executable(test_gpu_update ${CMAKE_CURRENT_LIST_DIR}/../gpu/test_gpu_update.c)
  target_link_libraries(test_gpu_update PRIVATE gg_test_harness gg_client_static gg_gpu m)
  add_dependencies(test_gpu_update gfxgraphd)
  add_test(NAME gpu_update COMMAND test_gpu_update)
  set_tests_properties(gpu_update PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# Replays pipelined with the client's own stream through IPC events, async
# answers; completion by polling and by host functions, and validation.
if(NOT GFXGRAPH_GPU_KIND STREQUAL "off" AND TARGET gg_gpu AND TARGET gg_test_harness)
  add_executable(test_gpu_async ${CMAKE_CURRENT_LIST_DIR}/../gpu/test_gpu_async.c)
  target_link_libraries(test_gpu_async PRIVATE gg_test_harness gg_client_static gg_gpu m)
  add_dependencies(test_gpu_async gfxgraphd)
  add_test(NAME gpu_async COMMAND test_gpu_async)
  set_tests_properties(gpu_async PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
