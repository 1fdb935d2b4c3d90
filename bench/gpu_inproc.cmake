# SPDX-License-Identifier: MIT
# In-process GPU benchmark (bench_chain_inproc.c): built only when the build
# has a GPU backend (kernels/gpu.cmake defines gg_gpu).  Included from
# bench/CMakeLists.txt.  Run: bench_chain_inproc [--iters N] [out.json]
if(TARGET gg_gpu)
  add_executable(bench_chain_inproc ${CMAKE_CURRENT_LIST_DIR}/bench_chain_inproc.c)
  target_link_libraries(bench_chain_inproc PRIVATE gg_gpu gg_ops m)
endif()

# Per-op device time and GB/s against the copy ceiling (bench_kernels.c;
# bench_kernels.py runs it beside PyTorch's kernels).
if(TARGET gg_gpu)
  add_executable(bench_kernels ${CMAKE_CURRENT_LIST_DIR}/bench_kernels.c)
  target_link_libraries(bench_kernels PRIVATE gg_gpu gg_ops m)
endif()
