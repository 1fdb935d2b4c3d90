# SPDX-License-Identifier: MIT
# Program-level fusion (daemon/core/fuse.c): a fused and an unfused daemon
# (GFXGRAPH_FUSE=0) against each other and against the op table's CPU
# references, per pattern and dtype, and the cases that must not fuse.
# test_gpu_fused (label gpu, GPU builds): the fused ops' kernels against
# their CPU references.
gg_core_test(test_fuse test_fuse.c integration 300 gg_client_static gg_ops)
if(NOT GFXGRAPH_GPU_KIND STREQUAL "off" AND TARGET gg_gpu)
  add_executable(test_gpu_fused ${CMAKE_SOURCE_DIR}/tests/gpu/test_gpu_fused.c)
  target_link_libraries(test_gpu_fused PRIVATE gg_gpu gg_ops m)
  add_test(NAME gpu_fused COMMAND test_gpu_fused)
  set_tests_properties(gpu_fused PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
