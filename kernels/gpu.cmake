# GPU kernels: the static library `gg_gpu`.  Included by kernels/CMakeLists.txt
# when GFXGRAPH_GPU_KIND (cmake/gpu.cmake) is hip or cuda.  docs/gpu-build.md
# explains the builds.
#
# gg_gpu exports (PUBLIC): the include dir kernels/ (gg_hip.h, gpu_ops.h,
# ops.h), GFXGRAPH_HAVE_GPU=1 plus GFXGRAPH_HIP_AMD and __HIP_PLATFORM_AMD__
# (AMD) or GFXGRAPH_HIP_CUDA (NVIDIA), and the runtime to link: libamdhip64
# (+ rocBLAS when found), or CUDA::cudart + cuBLAS/cuBLASLt.  A C target that
# links gg_gpu can include gg_hip.h and call the HIP API by its HIP names.
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
# dispatch; gpu_linear.hip: linear (own kernels, vendor BLAS, mode choice);
# gpu_attention.hip: attention_decode split along S (flash-decoding);
# gpu_fused.hip: the daemon planner's fused ops (ops.h);
# gpu_internal.h: what they share (private: not an exported header).
set(_gg_gpu_sources ${_gg_gpu_dir}/gpu_ops.hip ${_gg_gpu_dir}/gpu_linear.hip
  ${_gg_gpu_dir}/gpu_attention.hip ${_gg_gpu_dir}/gpu_fused.hip)
set(_gg_gpu_headers ${_gg_gpu_dir}/gg_hip.h ${_gg_gpu_dir}/gpu_ops.h ${_gg_gpu_dir}/ops.h
  ${_gg_gpu_dir}/gpu_internal.h)

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
  message(STATUS "gfxgraph: hipcc ${GFXGRAPH_HIPCC}, archs ${GFXGRAPH_HIP_ARCHS}, rocBLAS ${_gg_rocblas}")

  # Warnings as errors like the rest of the project; -fno-exceptions keeps the
  # objects free of C++ runtime references, so C programs link them with cc.
  set(_gg_hip_flags -std=c++17 -fPIC -fno-exceptions -fno-rtti -Wall -Wextra -Werror
    $<$<CONFIG:Debug>:-O0> $<$<NOT:$<CONFIG:Debug>>:-O3>
    $<$<CONFIG:Debug,RelWithDebInfo>:-g>)

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
                 "archs ${CMAKE_CUDA_ARCHITECTURES}")

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
  target_compile_definitions(gg_gpu_objs PRIVATE GFXGRAPH_HAVE_GPU=1 GFXGRAPH_HIP_CUDA=1)
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
