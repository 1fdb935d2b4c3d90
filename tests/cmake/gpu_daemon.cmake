# SPDX-License-Identifier: MIT
# The real gfxgraphd on the GPU (only when the build has a GPU backend).
#
#   gpu_daemon        label gpu: gfxgraphd --backend hip on a temporary
#                     socket, driven by separate client processes (buffers
#                     shared by IPC handle): hello and health, programs in
#                     f32/f16/bf16 across buckets and branches against the
#                     CPU reference, killed clients (test_gpu_daemon.c).
#   gpu_daemon_modes  label gpu: the daemon started in other modes: host
#                     function completion, GFXGRAPH_FAULT fallbacks
#                     (test_gpu_daemon_modes.c).
#
# Both SKIP (77) without a device.  Shared: the harness (daemon, client
# processes, checks, stats and health) in tests/gpu/gpu_daemon_util.c and
# the programs with their replay checks in tests/gpu/gpu_daemon_prog.c.
if(NOT GFXGRAPH_GPU_KIND STREQUAL "off" AND TARGET gg_gpu)
  set(_gg_gd_dir ${CMAKE_CURRENT_LIST_DIR}/../gpu)
  # gg_client_static: the client library with internal.h (raw calls for
  # stats and health); gg_gpu: the vendor header and runtime (hipMalloc in
  # the client processes); gg_ops: the CPU references.
  add_library(gg_gpu_daemon_harness STATIC ${_gg_gd_dir}/gpu_daemon_util.c
    ${_gg_gd_dir}/gpu_daemon_prog.c)
  target_include_directories(gg_gpu_daemon_harness PUBLIC ${_gg_gd_dir})
  target_link_libraries(gg_gpu_daemon_harness PUBLIC gg_client_static gg_gpu gg_ops m)
  target_compile_definitions(gg_gpu_daemon_harness PRIVATE
    "GG_DAEMON_PATH=\"$<TARGET_FILE:gfxgraphd>\"")
  add_dependencies(gg_gpu_daemon_harness gfxgraphd)
  foreach(_t gpu_daemon:test_gpu_daemon gpu_daemon_modes:test_gpu_daemon_modes)
    string(REPLACE ":" ";" _t "${_t}")
    list(GET _t 0 _name)
    list(GET _t 1 _exe)
    add_executable(${_exe} ${_gg_gd_dir}/${_exe}.c)
    target_link_libraries(${_exe} PRIVATE gg_gpu_daemon_harness)
    add_test(NAME ${_name} COMMAND ${_exe})
    set_tests_properties(${_name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
  endforeach()
endif()
