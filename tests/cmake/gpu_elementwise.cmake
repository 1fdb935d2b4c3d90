# SPDX-License-Identifier: MIT
# The elementwise and reduction kernels against the CPU references (label
# gpu).
if(NOT GFXGRAPH_GPU_KIND STREQUAL "off" AND TARGET gg_gpu)
  add_executable(test_gpu_elementwise ${CMAKE_CURRENT_LIST_DIR}/../gpu/test_gpu_elementwise.c)
  target_link_libraries(test_gpu_elementwise PRIVATE gg_gpu gg_ops m)
  add_test(NAME gpu_elementwise COMMAND test_gpu_elementwise)
  set_tests_properties(gpu_elementwise PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
