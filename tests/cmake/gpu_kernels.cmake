# SPDX-License-Identifier: MIT
# GPU kernel tests (only when the build has a GPU backend).
#
#   gpu_kernels                  label gpu:   every op x dtype against the CPU
#                                             reference, eager and captured;
#                                             SKIP (77) without a device.
#   gpu_kernels_code_objects     label build: (hip) the test binary carries a
#                                             code object for gfx1030 AND
#                                             gfx1031 (and every GFXGRAPH_HIP_ARCHS
#                                             entry).
#   gpu_kernels_cubin_archs      label build: (cuda) building test_gpu_kernels
#                                             is the link check; its fat binary
#                                             holds an ELF (cubin) for every
#                                             real arch of CMAKE_CUDA_ARCHITECTURES
#                                             (sm_90 by default).
#
# This file is also the checker: the build tests run it with cmake -P
# (GG_CHECK=hip|cuda), so it lives in one fragment.

if(CMAKE_SCRIPT_MODE_FILE)
  # ---- script mode: cmake -DGG_CHECK=... -DBINARY=... -P gpu_kernels.cmake ----
  cmake_policy(VERSION 3.20)
  if(NOT EXISTS "${BINARY}")
    message(FATAL_ERROR "no such binary: ${BINARY}")
  endif()
  string(REPLACE "," ";" REQUIRED "${REQUIRED}")

  if(GG_CHECK STREQUAL "hip")
    # Which code objects does the fat binary carry?  roc-obj-ls (hipcc
    # package) lists the offload bundle entries; without it (or if it fails),
    # read the bundle entry IDs straight out of the binary.
    set(_found)
    set(_how "")
    if(ROC_OBJ_LS)
      execute_process(COMMAND ${ROC_OBJ_LS} ${BINARY} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out
                      ERROR_VARIABLE _err)
      if(_rc EQUAL 0)
        string(REGEX MATCHALL "amdgcn-amd-amdhsa--gfx[0-9a-f]+" _ids "${_out}")
        set(_how "roc-obj-ls")
      else()
        message(STATUS "roc-obj-ls failed (${_rc}): ${_err}")
      endif()
    endif()
    if(NOT _how)
      file(STRINGS ${BINARY} _ids REGEX "amdgcn-amd-amdhsa--gfx[0-9a-f]+")
      string(REGEX MATCHALL "amdgcn-amd-amdhsa--gfx[0-9a-f]+" _ids "${_ids}")
      set(_how "bundle IDs in the binary")
    endif()
    foreach(_id IN LISTS _ids)
      string(REGEX REPLACE ".*--" "" _a "${_id}")
      list(APPEND _found ${_a})
    endforeach()
    list(REMOVE_DUPLICATES _found)
    message(STATUS "code objects (${_how}): ${_found}")
    set(_missing)
    foreach(_a IN LISTS REQUIRED)
      if(NOT _a IN_LIST _found)
        list(APPEND _missing ${_a})
      endif()
    endforeach()
    if(_missing)
      message(FATAL_ERROR "${BINARY} has no code object for: ${_missing} (found: '${_found}')")
    endif()
    message(STATUS "ok: ${REQUIRED}")

  elseif(GG_CHECK STREQUAL "cuda")
    # Which cubins does the fat binary carry?  cuobjdump --list-elf where the
    # toolkit has it; otherwise parse the fat binary headers of .nv_fatbin
    # (magic 0xBA55ED50, 16-byte header; per entry: u16 kind (2 = ELF) at +0,
    # u32 header size at +4, u64 payload size at +8, u32 sm arch at +28).
    set(_found)
    if(CUOBJDUMP)
      execute_process(COMMAND ${CUOBJDUMP} --list-elf ${BINARY} RESULT_VARIABLE _rc
                      OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
      if(NOT _rc EQUAL 0)
        message(FATAL_ERROR "cuobjdump --list-elf failed (${_rc}): ${_err}")
      endif()
      string(REGEX MATCHALL "sm_[0-9]+[a-z]?" _found "${_out}")
      set(_how "cuobjdump --list-elf")
    else()
      if(NOT OBJCOPY)
        message(FATAL_ERROR "neither cuobjdump nor objcopy is available")
      endif()
      set(_sec ${BINARY}.nv_fatbin)
      execute_process(COMMAND ${OBJCOPY} -O binary --only-section=.nv_fatbin ${BINARY} ${_sec}
                      RESULT_VARIABLE _rc ERROR_VARIABLE _err)
      if(NOT _rc EQUAL 0 OR NOT EXISTS ${_sec})
        message(FATAL_ERROR "objcopy could not extract .nv_fatbin (${_rc}): ${_err}")
      endif()
      file(READ ${_sec} _hex HEX)
      file(REMOVE ${_sec})
      string(LENGTH "${_hex}" _len)
      math(EXPR _bytes "${_len} / 2")
      # little-endian unsigned integer of _n bytes at byte offset _at
      macro(_gg_le _out _at _n)
        set(${_out} 0)
        math(EXPR _p "(${_at}) * 2")
        foreach(_i RANGE 1 ${_n})
          math(EXPR _q "${_p} + (${_n} - ${_i}) * 2")
          string(SUBSTRING "${_hex}" ${_q} 2 _byte)
          math(EXPR ${_out} "(${${_out}} << 8) | 0x${_byte}")
        endforeach()
      endmacro()
      set(_pos 0)
      while(TRUE)
        # next magic (bytes 50 ed 55 ba) at an even hex offset from _pos on
        math(EXPR _c "${_pos} * 2")
        string(SUBSTRING "${_hex}" ${_c} -1 _tail)
        string(FIND "${_tail}" "50ed55ba" _f)
        if(_f LESS 0)
          break()
        endif()
        math(EXPR _odd "${_f} % 2")
        if(_odd)
          math(EXPR _pos "${_pos} + (${_f} + 1) / 2")
          continue()
        endif()
        math(EXPR _pos "${_pos} + ${_f} / 2")
        math(EXPR _a "${_pos} + 6")
        _gg_le(_hsize ${_a} 2)
        math(EXPR _a "${_pos} + 8")
        _gg_le(_fsize ${_a} 8)
        math(EXPR _e "${_pos} + ${_hsize}")
        math(EXPR _stop "${_e} + ${_fsize}")
        if(_stop GREATER _bytes OR _hsize LESS 16)
          math(EXPR _pos "${_pos} + 4") # not a fat binary header after all
          continue()
        endif()
        while(_e LESS _stop)
          _gg_le(_kind ${_e} 2)
          math(EXPR _a "${_e} + 4")
          _gg_le(_eh ${_a} 4)
          math(EXPR _a "${_e} + 8")
          _gg_le(_ep ${_a} 8)
          math(EXPR _a "${_e} + 28")
          _gg_le(_arch ${_a} 4)
          if(_kind EQUAL 2)
            list(APPEND _found sm_${_arch})
          endif()
          if(_eh EQUAL 0)
            break()
          endif()
          math(EXPR _e "${_e} + ${_eh} + ${_ep}")
        endwhile()
        set(_pos ${_stop})
      endwhile()
      set(_how "fat binary headers of .nv_fatbin")
      # the header's arch number has no arch-specific suffix (90a reads 90)
      list(TRANSFORM REQUIRED REPLACE "^(sm_[0-9]+)[a-z]$" "\\1")
    endif()
    list(REMOVE_DUPLICATES _found)
    message(STATUS "cubins (${_how}): ${_found}")
    set(_missing)
    foreach(_a IN LISTS REQUIRED)
      if(NOT _a IN_LIST _found)
        list(APPEND _missing ${_a})
      endif()
    endforeach()
    if(NOT _found OR _missing)
      message(FATAL_ERROR "${BINARY} has no cubin for: ${_missing} (found: '${_found}')")
    endif()
    message(STATUS "ok: ${REQUIRED}")
  else()
    message(FATAL_ERROR "GG_CHECK must be hip or cuda")
  endif()
  return()
endif()

# ---- configure mode: included by tests/CMakeLists.txt --------------------------
if(NOT GFXGRAPH_GPU_KIND STREQUAL "off" AND TARGET gg_gpu)
  add_executable(test_gpu_kernels ${CMAKE_CURRENT_LIST_DIR}/../gpu/test_gpu_kernels.c)
  target_link_libraries(test_gpu_kernels PRIVATE gg_gpu gg_ops m)
  add_test(NAME gpu_kernels COMMAND test_gpu_kernels)
  set_tests_properties(gpu_kernels PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)

  if(GFXGRAPH_GPU_KIND STREQUAL "hip")
    find_program(GFXGRAPH_ROC_OBJ_LS roc-obj-ls HINTS ENV ROCM_PATH PATHS /opt/rocm
                 PATH_SUFFIXES bin)
    set(_gg_required gfx1030 gfx1031 ${GFXGRAPH_HIP_ARCHS})
    list(REMOVE_DUPLICATES _gg_required)
    string(REPLACE ";" "," _gg_required "${_gg_required}")
    add_test(NAME gpu_kernels_code_objects
      COMMAND ${CMAKE_COMMAND} -DGG_CHECK=hip -DBINARY=$<TARGET_FILE:test_gpu_kernels>
              "-DREQUIRED=${_gg_required}" -DROC_OBJ_LS=${GFXGRAPH_ROC_OBJ_LS}
              -P ${CMAKE_CURRENT_LIST_FILE})
    set_tests_properties(gpu_kernels_code_objects PROPERTIES LABELS build)
  elseif(GFXGRAPH_GPU_KIND STREQUAL "cuda")
    find_program(GFXGRAPH_CUOBJDUMP cuobjdump HINTS ${CUDAToolkit_BIN_DIR} ENV CUDA_PATH
                 PATHS /usr/local/cuda/bin)
    # real archs of CMAKE_CUDA_ARCHITECTURES: 90 / 90-real / 90a -> sm_90(a);
    # NN-virtual (PTX only), all and native name no fixed cubin
    set(_gg_required)
    foreach(_a IN LISTS CMAKE_CUDA_ARCHITECTURES)
      if(_a MATCHES "^([0-9]+[a-z]?)(-real)?$")
        list(APPEND _gg_required sm_${CMAKE_MATCH_1})
      endif()
    endforeach()
    string(REPLACE ";" "," _gg_required "${_gg_required}")
    if(NOT GFXGRAPH_CUOBJDUMP)
      set(GFXGRAPH_CUOBJDUMP "")
    endif()
    add_test(NAME gpu_kernels_cubin_archs
      COMMAND ${CMAKE_COMMAND} -DGG_CHECK=cuda -DBINARY=$<TARGET_FILE:test_gpu_kernels>
              "-DREQUIRED=${_gg_required}" -DCUOBJDUMP=${GFXGRAPH_CUOBJDUMP}
              -DOBJCOPY=${CMAKE_OBJCOPY} -P ${CMAKE_CURRENT_LIST_FILE})
    set_tests_properties(gpu_kernels_cubin_archs PROPERTIES LABELS build)
  endif()
endif()

# The decode-step kernels against the CPU references (label gpu).
if(NOT GFXGRAPH_GPU_KIND STREQUAL "off" AND TARGET gg_gpu)
  add_executable(test_gpu_decode ${CMAKE_CURRENT_LIST_DIR}/../gpu/test_gpu_decode.c)
  target_include_directories(test_gpu_decode PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
  target_link_libraries(test_gpu_decode PRIVATE gg_gpu gg_ops m)
  add_test(NAME gpu_decode COMMAND test_gpu_decode)
  set_tests_properties(gpu_decode PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
