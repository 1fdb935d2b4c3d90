# SPDX-License-Identifier: MIT
# Resolves GFXGRAPH_GPU into GFXGRAPH_GPU_KIND (hip|cuda|off) and enables the
# matching language.  auto prefers hipcc, then nvcc, else off.
set(GFXGRAPH_GPU_KIND off)
if(GFXGRAPH_GPU STREQUAL "auto")
  find_program(_gg_hipcc hipcc)
  find_program(_gg_nvcc nvcc PATHS /usr/local/cuda/bin)
  if(_gg_hipcc)
    set(GFXGRAPH_GPU_KIND hip)
  elseif(_gg_nvcc)
    set(GFXGRAPH_GPU_KIND cuda)
  endif()
elseif(GFXGRAPH_GPU MATCHES "^(hip|cuda|off)$")
  set(GFXGRAPH_GPU_KIND ${GFXGRAPH_GPU})
else()
  message(FATAL_ERROR "GFXGRAPH_GPU must be auto, hip, cuda or off (got '${GFXGRAPH_GPU}')")
endif()
set(GFXGRAPH_GPU_KIND_RESOLVED ${GFXGRAPH_GPU_KIND} CACHE INTERNAL "resolved GPU backend")
message(STATUS "gfxgraph GPU backend: ${GFXGRAPH_GPU_KIND}")
