# SPDX-License-Identifier: MIT
# The data-movement, matmul and attention kernels (and embedding with i64
# ids) against the CPU references (label gpu).
if(NOT GFXGRAPH_GPU_KIND STREQUAL "off" AND TARGET gg_gpu)
  add_executable(test_gpu_movement ${CMAKE_CURRENT_LIST_DIR}/../gpu/test_gpu_movement.c)
  target_link_libraries(test_gpu_movement PRIVATE gg_gpu gg_ops m)
  add_test(NAME gpu_movement COMMAND test_gpu_movement)
  set_tests_properties(gpu_movement PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
