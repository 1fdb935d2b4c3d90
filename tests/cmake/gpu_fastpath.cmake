# SPDX-License-Identifier: MIT
# The fast path on the GPU (tests/gpu/test_gpu_fastpath.c), label gpu, SKIP
# (77) without a device: fast-path replays across buckets against the CPU
# reference, completions written by the device (device_us 0 untimed, > 0
# timed; the records' GPU flag through a raw region client), 1000 back to
# back and 32 outstanding.  Built only with a GPU backend.
if(NOT GFXGRAPH_GPU_KIND STREQUAL "off" AND TARGET gg_gpu AND TARGET gg_test_harness)
  add_executable(test_gpu_fastpath ${CMAKE_CURRENT_LIST_DIR}/../gpu/test_gpu_fastpath.c)
  target_include_directories(test_gpu_fastpath PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..
    ${CMAKE_SOURCE_DIR}/proto)
  target_link_libraries(test_gpu_fastpath PRIVATE gg_test_harness gg_client_static gg_gpu m)
  add_dependencies(test_gpu_fastpath gfxgraphd)
  add_test(NAME gpu_fastpath COMMAND test_gpu_fastpath)
  set_tests_properties(gpu_fastpath PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
