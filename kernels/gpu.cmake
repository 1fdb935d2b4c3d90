# SPDX-License-Identifier: MIT
# GPU kernels: the static library `gg_gpu`.  Included by kernels/CMakeLists.txt
# when GFXGRAPH_GPU_KIND (cmake/gpu.cmake) is hip or cuda.  docs/gpu-build.md
# explains the builds.
#
# gg_gpu exports (PUBLIC): the include dir kernels/ (gg_hip.h, gpu_ops.h,
# ops.h), GFXGRAPH_HAVE_GPU=1 plus GFXGRAPH_HIP_AMD and __HIP_PLATFORM_AMD__
# (AMD) or GFXGRAPH_HIP_CUDA (NVIDIA), and the runtime to link: libamdhip64
# (+ rocBLAS, + hipBLASLt and libstdc++, when found), or CUDA::cudart +
# cuBLAS/cuBLASLt.  A C target that links gg_gpu can include gg_hip.h and
# call the HIP API by its HIP names.
#
#   hip   hipcc (Debian's 5.2.3 or a ROCm install) compiles each .hip file to
#         an object through a custom command, one --offload-arch per entry of
#         GFXGRAPH_HIP_ARCHS.  CMake's HIP language is not used: CMake 3.25
#         looks for hip-lang-config.cmake under <ROCm root>/lib/cmake, where
#         Debian does not install it (it is under lib/x86_64-linux-gnu/cmake).
#   cuda  enable_language(CUDA) with nvcc (/usr/local/cuda/bin/nvcc unless
#         CMAKE_CUDA_COMPILER is set); the same .hip files compiled as CUDA
#         (LANGUAGE CUDA, -x cu) for CMAKE_CUDA_ARCHITECTURES (default 90).

set(_gg_gpu_dir ${CMAKE_CURRENT_LIST_DIR})
# gpu_ops.hip: errors, the context, elementwise and row kernels, the op
# dispatch; gpu_decode.hip: the decode-step ops (embedding, rope,
# cache_write, attention_decode's one-block kernel, argmax, cast);
# gpu_linear.hip: linear (own kernels, vendor BLAS, mode choice);
# gpu_attention.hip: attention_decode split along S (flash-decoding), its
# CUDA-core kernel and the chunk pick; gpu_attention_mma.hip: its
# tensor-core kernel;
# gpu_fused.hip: the daemon planner's fused ops (ops.h); gpu_probe.hip: the
# read ceiling the kernel bench sets beside attention_decode;
# gpu_internal.h: what they share (private: not an exported header).
# Every gpu_*.hip here (a new family's file joins without an edit here).
file(GLOB _gg_gpu_sources CONFIGURE_DEPENDS ${_gg_gpu_dir}/gpu_*.hip)
set(_gg_gpu_headers ${_gg_gpu_dir}/gg_hip.h ${_gg_gpu_dir}/gpu_ops.h ${_gg_gpu_dir}/ops.h
  ${_gg_gpu_dir}/ops_list.h ${_gg_gpu_dir}/gpu_internal.h)

if(GFXGRAPH_GPU_KIND STREQUAL "hip")
  # ---- AMD: hipcc -------------------------------------------------------------
  find_program(GFXGRAPH_HIPCC NAMES hipcc
    HINTS ENV HIP_PATH ENV ROCM_PATH PATHS /opt/rocm PATH_SUFFIXES bin REQUIRED)
  find_library(GFXGRAPH_AMDHIP64 NAMES amdhip64
    HINTS ENV HIP_PATH ENV ROCM_PATH PATHS /opt/rocm PATH_SUFFIXES lib lib64 REQUIRED)
  find_path(GFXGRAPH_HIP_INCLUDE_DIR hip/hip_runtime_api.h
    HINTS ENV HIP_PATH ENV ROCM_PATH PATHS /opt/rocm PATH_SUFFIXES include REQUIRED)
  if(NOT GFXGRAPH_HIP_ARCHS)
    message(FATAL_ERROR "GFXGRAPH_HIP_ARCHS is empty: name the AMD targets (gfx1030;gfx1031)")
  endif()
  set(_gg_arch_flags)
  foreach(_arch IN LISTS GFXGRAPH_HIP_ARCHS)
    list(APPEND _gg_arch_flags --offload-arch=${_arch})
  endforeach()

  set(_gg_hip_defs -DGFXGRAPH_HIP_AMD=1 -DGFXGRAPH_HAVE_GPU=1)
  set(_gg_hip_incs -I${_gg_gpu_dir})
  set(_gg_hip_libs ${GFXGRAPH_AMDHIP64})

  # rocBLAS for linear's larger batches: optional (Debian 12 has no package).
  # auto: used when found and a probe that makes the calls gpu_linear.hip makes
  # compiles; on: required; off: the project's own GEMM.
  set(GFXGRAPH_ROCBLAS "auto" CACHE STRING "rocBLAS for linear on AMD: auto|on|off")
  set_property(CACHE GFXGRAPH_ROCBLAS PROPERTY STRINGS auto on off)
  set(_gg_rocblas OFF)
  if(NOT GFXGRAPH_ROCBLAS STREQUAL "off")
    find_path(GFXGRAPH_ROCBLAS_INCLUDE_DIR rocblas/rocblas.h
      HINTS ENV ROCM_PATH PATHS /opt/rocm PATH_SUFFIXES include)
    find_library(GFXGRAPH_ROCBLAS_LIBRARY NAMES rocblas
      HINTS ENV ROCM_PATH PATHS /opt/rocm PATH_SUFFIXES lib lib64)
    if(GFXGRAPH_ROCBLAS_INCLUDE_DIR AND GFXGRAPH_ROCBLAS_LIBRARY)
      set(_probe ${CMAKE_CURRENT_BINARY_DIR}/gg_rocblas_probe.hip)
      file(WRITE ${_probe} [=[
#include <hip/hip_runtime.h>
#include <rocblas/rocblas.h>
int probe(hipStream_t s, void *ws, const void *a, void *c)
{
    rocblas_handle h;
    float one = 1.0f;
    if (rocblas_create_handle(&h) != rocblas_status_success) return 1;
    rocblas_set_stream(h, s);
    rocblas_set_workspace(h, ws, 1 << 20);
    rocblas_status st = rocblas_gemm_ex(h, rocblas_operation_transpose, rocblas_operation_none,
        4, 4, 4, &one, a, rocblas_datatype_bf16_r, 4, a, rocblas_datatype_f16_r, 4, &one, c,
        rocblas_datatype_f32_r, 4, c, rocblas_datatype_f32_r, 4, rocblas_datatype_f32_r,
        rocblas_gemm_algo_standard, 0, 0);
    rocblas_destroy_handle(h);
    return st != rocblas_status_success;
}
]=])
      list(GET GFXGRAPH_HIP_ARCHS 0 _arch0)
      execute_process(
        COMMAND ${GFXGRAPH_HIPCC} -std=c++17 --offload-arch=${_arch0}
                -I${GFXGRAPH_ROCBLAS_INCLUDE_DIR} -c ${_probe} -o ${_probe}.o
        RESULT_VARIABLE _probe_rc OUTPUT_QUIET ERROR_VARIABLE _probe_err)
      if(_probe_rc EQUAL 0)
        set(_gg_rocblas ON)
      else()
        message(STATUS "gfxgraph: rocBLAS found but the probe did not compile; not used:\n${_probe_err}")
      endif()
    endif()
    if(GFXGRAPH_ROCBLAS STREQUAL "on" AND NOT _gg_rocblas)
      message(FATAL_ERROR "GFXGRAPH_ROCBLAS=on but no usable rocBLAS was found")
    endif()
  endif()
  if(_gg_rocblas)
    list(APPEND _gg_hip_defs -DGFXGRAPH_HAVE_ROCBLAS=1)
    list(APPEND _gg_hip_incs -I${GFXGRAPH_ROCBLAS_INCLUDE_DIR})
    list(APPEND _gg_hip_libs ${GFXGRAPH_ROCBLAS_LIBRARY})
  endif()

  # Warnings as errors like the rest of the project; -fno-exceptions keeps the
  # objects free of C++ runtime references, so C programs link them with cc.
  set(_gg_hip_flags -std=c++17 -fPIC -fno-exceptions -fno-rtti -Wall -Wextra -Werror
    $<$<CONFIG:Debug>:-O0> $<$<NOT:$<CONFIG:Debug>>:-O3>
    $<$<CONFIG:Debug,RelWithDebInfo>:-g>)

  # hipBLASLt for the fused linear's bias/GELU epilogues (gpu_fused.hip):
  # optional (Debian 12 has no package; ROCm 6.0+ ships it).  auto: used when
  # its header and library are found (under HIPBLASLT_ROOT, ROCM_PATH or
  # /opt/rocm; a hipblaslt CMake package found there points at them too) and
  # a probe making gpu_fused.hip's calls through gg_hip.h compiles with the
  # kernels' own flags; on: required; off: not used.  Without it the fused
  # linear runs as the linear alone runs (rocBLAS or the project's kernels)
  # plus one epilogue kernel.
  set(GFXGRAPH_HIPBLASLT "auto" CACHE STRING "hipBLASLt epilogues for the fused linear on AMD: auto|on|off")
  set_property(CACHE GFXGRAPH_HIPBLASLT PROPERTY STRINGS auto on off)
  set(_gg_blaslt OFF)
  set(_gg_blaslt_why "GFXGRAPH_HIPBLASLT=off")
  if(NOT GFXGRAPH_HIPBLASLT STREQUAL "off")
    # Located by file, not by hipblaslt's CMake package: loading that package
    # pulls in hip's and its dependencies' packages, which can fail the
    # configure of this C project outright on some ROCm releases.
    set(_hints)
    if(hipblaslt_DIR)
      # <prefix>/lib/cmake/hipblaslt (or lib64, or lib/<multiarch>/cmake/hipblaslt)
      get_filename_component(_p ${hipblaslt_DIR} DIRECTORY)
      get_filename_component(_p ${_p} DIRECTORY)
      get_filename_component(_p ${_p} DIRECTORY)
      list(APPEND _hints ${_p} ${_p}/..)
    endif()
    find_path(GFXGRAPH_HIPBLASLT_INCLUDE_DIR hipblaslt/hipblaslt.h
      HINTS ${_hints} ENV HIPBLASLT_ROOT ENV ROCM_PATH PATHS /opt/rocm PATH_SUFFIXES include)
    find_library(GFXGRAPH_HIPBLASLT_LIBRARY NAMES hipblaslt
      HINTS ${_hints} ENV HIPBLASLT_ROOT ENV ROCM_PATH PATHS /opt/rocm PATH_SUFFIXES lib lib64)
    if(NOT GFXGRAPH_HIPBLASLT_INCLUDE_DIR OR NOT GFXGRAPH_HIPBLASLT_LIBRARY)
      set(_gg_blaslt_why "hipblaslt/hipblaslt.h or libhipblaslt not found")
    else()
      # The probe is the Lt section of gpu_fused.hip in miniature: the names
      # it uses are ROCm 6.x's (hipDataType, hipblasComputeType_t), which an
      # older hipBLASLt lacks; -Werror as the kernels have it.
      set(_probe ${CMAKE_CURRENT_BINARY_DIR}/gg_hipblaslt_probe.hip)
      file(WRITE ${_probe} [=[
#include "gg_hip.h"
int probe(hipStream_t s, void *ws, const void *a, const void *b, void *c)
{
    hipblasLtHandle_t h;
    hipblasLtMatmulDesc_t op;
    hipblasLtMatrixLayout_t l;
    hipblasLtMatmulPreference_t pref;
    hipblasLtMatmulHeuristicResult_t heur;
    const hipblasOperation_t t = HIPBLAS_OP_T;
    const hipDataType ty = HIP_R_16BF;
    const hipblasLtEpilogue_t e = HIPBLASLT_EPILOGUE_GELU_BIAS;
    const uint64_t n = 1 << 20;
    const float one = 1.0f;
    int found = 0, r = 0;
    if (hipblasLtCreate(&h) != HIPBLAS_STATUS_SUCCESS)
        return 1;
    r |= (int)hipblasLtMatmulDescCreate(&op, HIPBLAS_COMPUTE_32F, HIP_R_32F);
    r |= (int)hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    r |= (int)hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    r |= (int)hipblasLtMatmulDescSetAttribute(op, HIPBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b);
    r |= (int)hipblasLtMatrixLayoutCreate(&l, ty, 4, 4, 4);
    r |= (int)hipblasLtMatmulPreferenceCreate(&pref);
    r |= (int)hipblasLtMatmulPreferenceSetAttribute(pref, HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &n, sizeof n);
    r |= (int)hipblasLtMatmulAlgoGetHeuristic(h, op, l, l, l, l, pref, 1, &heur, &found);
    r |= (int)hipblasLtMatmul(h, op, &one, a, l, a, l, &one, c, l, c, l, &heur.algo, ws, n, s);
    r |= (int)hipblasLtMatmulPreferenceDestroy(pref);
    r |= (int)hipblasLtMatrixLayoutDestroy(l);
    r |= (int)hipblasLtMatmulDescDestroy(op);
    r |= (int)hipblasLtDestroy(h);
    return r != 0 || found < 1;
}
]=])
      # -isystem /usr/include would break libstdc++'s #include_next
      set(_gg_blaslt_incs)
      if(NOT GFXGRAPH_HIPBLASLT_INCLUDE_DIR STREQUAL "/usr/include")
        set(_gg_blaslt_incs -isystem ${GFXGRAPH_HIPBLASLT_INCLUDE_DIR})
      endif()
      list(GET GFXGRAPH_HIP_ARCHS 0 _arch0)
      set(_probe_flags -std=c++17 -fPIC -fno-exceptions -fno-rtti -Wall -Wextra -Werror)
      execute_process(
        COMMAND ${GFXGRAPH_HIPCC} ${_probe_flags} --offload-arch=${_arch0}
                -DGFXGRAPH_HIP_AMD=1 -DGFXGRAPH_HAVE_BLASLT=1 -I${_gg_gpu_dir}
                ${_gg_blaslt_incs} -c ${_probe} -o ${_probe}.o
        RESULT_VARIABLE _probe_rc OUTPUT_QUIET ERROR_VARIABLE _probe_err)
      if(_probe_rc EQUAL 0)
        set(_gg_blaslt ON)
      else()
        set(_gg_blaslt_why "found but the probe did not compile")
        message(STATUS "gfxgraph: hipBLASLt found but the probe did not compile; not used:\n${_probe_err}")
      endif()
    endif()
    if(GFXGRAPH_HIPBLASLT STREQUAL "on" AND NOT _gg_blaslt)
      message(FATAL_ERROR "GFXGRAPH_HIPBLASLT=on but no usable hipBLASLt: ${_gg_blaslt_why}")
    endif()
  endif()
  if(_gg_blaslt)
    list(APPEND _gg_hip_defs -DGFXGRAPH_HAVE_BLASLT=1)
    list(APPEND _gg_hip_incs ${_gg_blaslt_incs})
    # hipblaslt.h pulls in the C++ standard library; the C programs linking
    # gg_gpu get libstdc++ as the NVIDIA build gives it them.
    list(APPEND _gg_hip_libs ${GFXGRAPH_HIPBLASLT_LIBRARY} stdc++)
    set(_gg_blaslt_msg "hipBLASLt ${GFXGRAPH_HIPBLASLT_LIBRARY} (fused linear: BIAS/GELU_BIAS epilogues)")
  else()
    set(_gg_blaslt_msg "hipBLASLt OFF (${_gg_blaslt_why}; fused linear: the linear's own path + an epilogue kernel)")
  endif()
  message(STATUS "gfxgraph: hipcc ${GFXGRAPH_HIPCC}, archs ${GFXGRAPH_HIP_ARCHS}, rocBLAS ${_gg_rocblas}, ${_gg_blaslt_msg}")

  set(_gg_objs)
  foreach(_src IN LISTS _gg_gpu_sources)
    get_filename_component(_name ${_src} NAME_WE)
    set(_obj ${CMAKE_CURRENT_BINARY_DIR}/gg_gpu/${_name}.o)
    add_custom_command(
      OUTPUT ${_obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/gg_gpu
      COMMAND ${GFXGRAPH_HIPCC} ${_gg_hip_flags} ${_gg_arch_flags} ${_gg_hip_defs}
              ${_gg_hip_incs} -MD -MF ${_obj}.d -c ${_src} -o ${_obj}
      DEPENDS ${_src} ${_gg_gpu_headers}
      DEPFILE ${_obj}.d
      COMMENT "hipcc ${_name}.hip (${GFXGRAPH_HIP_ARCHS})"
      COMMAND_EXPAND_LISTS
      VERBATIM)
    list(APPEND _gg_objs ${_obj})
  endforeach()
  set_source_files_properties(${_gg_objs} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)

  add_library(gg_gpu STATIC ${_gg_objs})
  set_target_properties(gg_gpu PROPERTIES LINKER_LANGUAGE C)
  target_include_directories(gg_gpu PUBLIC ${_gg_gpu_dir})
  if(NOT GFXGRAPH_HIP_INCLUDE_DIR STREQUAL "/usr/include")
    target_include_directories(gg_gpu SYSTEM PUBLIC ${GFXGRAPH_HIP_INCLUDE_DIR})
  endif()
  target_compile_definitions(gg_gpu PUBLIC GFXGRAPH_HAVE_GPU=1 GFXGRAPH_HIP_AMD=1
    __HIP_PLATFORM_AMD__=1)
  target_link_libraries(gg_gpu PUBLIC gg_ops ${_gg_hip_libs})

elseif(GFXGRAPH_GPU_KIND STREQUAL "cuda")
  # ---- NVIDIA: nvcc through gg_hip.h -------------------------------------------
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(GFXGRAPH_NVCC NAMES nvcc
      HINTS ENV CUDA_PATH ENV CUDA_HOME PATHS /usr/local/cuda PATH_SUFFIXES bin REQUIRED)
    set(CMAKE_CUDA_COMPILER ${GFXGRAPH_NVCC} CACHE FILEPATH "CUDA compiler")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures (gfxgraph default: 90)")
  endif()
  # One CUDA runtime per process: gg_gpu links the shared cudart, so any
  # target CMake links through nvcc must not add the static one.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared CACHE STRING "CUDA runtime for CUDA-linked targets")
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "gfxgraph: nvcc ${CMAKE_CUDA_COMPILER} (CUDA ${CUDAToolkit_VERSION}), "
                 "archs ${CMAKE_CUDA_ARCHITECTURES}, cuBLAS + cuBLASLt (fused linear epilogues)")

  set_source_files_properties(${_gg_gpu_sources} PROPERTIES LANGUAGE CUDA)
  # The objects are built in an OBJECT library and archived by a plain-C
  # static library, so targets linking gg_gpu in other directories (where the
  # CUDA language is unknown) are linked by the C compiler.
  add_library(gg_gpu_objs OBJECT ${_gg_gpu_sources})
  set_target_properties(gg_gpu_objs PROPERTIES
    CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF
    POSITION_INDEPENDENT_CODE ON CUDA_RUNTIME_LIBRARY Shared)
  # The project's add_compile_options (-Wall -Wextra -Werror, sanitizers) are
  # host-compiler flags nvcc rejects: pass each through -Xcompiler, and make
  # nvcc's own warnings errors as well.
  get_target_property(_opts gg_gpu_objs COMPILE_OPTIONS)
  set(_cuda_opts)
  if(_opts)
    foreach(_o IN LISTS _opts)
      list(APPEND _cuda_opts "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_o}>")
      if(_o STREQUAL "-Werror")
        list(APPEND _cuda_opts "$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>")
      endif()
    endforeach()
  endif()
  set_property(TARGET gg_gpu_objs PROPERTY COMPILE_OPTIONS ${_cuda_opts})
  target_include_directories(gg_gpu_objs PRIVATE ${_gg_gpu_dir})
  # cuBLASLt comes with every CUDA toolkit: the fused linear's epilogues
  # (gpu_fused.hip, written in hipBLASLt's names; gg_hip.h maps them) are
  # always built here.  Private: C code never includes the Lt header.
  target_compile_definitions(gg_gpu_objs PRIVATE GFXGRAPH_HAVE_GPU=1 GFXGRAPH_HIP_CUDA=1
    GFXGRAPH_HAVE_BLASLT=1)
  target_link_libraries(gg_gpu_objs PRIVATE CUDA::cudart CUDA::cublas CUDA::cublasLt)

  add_library(gg_gpu STATIC $<TARGET_OBJECTS:gg_gpu_objs>)
  set_target_properties(gg_gpu PROPERTIES LINKER_LANGUAGE C)
  target_include_directories(gg_gpu PUBLIC ${_gg_gpu_dir})
  target_compile_definitions(gg_gpu PUBLIC GFXGRAPH_HAVE_GPU=1 GFXGRAPH_HIP_CUDA=1)
  # nvcc's host stubs reference the C++ runtime (static-init guards,
  # personality routine): C programs linking gg_gpu need libstdc++.
  target_link_libraries(gg_gpu PUBLIC gg_ops CUDA::cudart CUDA::cublas CUDA::cublasLt stdc++)

else()
  message(FATAL_ERROR "kernels/gpu.cmake: GFXGRAPH_GPU_KIND is '${GFXGRAPH_GPU_KIND}'")
endif()
