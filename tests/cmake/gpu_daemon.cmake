# The real gfxgraphd on the GPU (only when the build has a GPU backend).
#
#   gpu_daemon   label gpu: gfxgraphd --backend hip on a temporary socket,
#                driven by separate client processes (buffers shared by IPC
#                handle): programs in f32/f16/bf16 across buckets and
#                branches against the CPU reference, a killed client, host
#                function completion, GFXGRAPH_FAULT fallbacks, health.
#                SKIP (77) without a device.
if(NOT GFXGRAPH_GPU_KIND STREQUAL "off" AND TARGET gg_gpu)
  add_executable(test_gpu_daemon ${CMAKE_CURRENT_LIST_DIR}/../gpu/test_gpu_daemon.c)
  # gg_client_static: the client library with internal.h (raw calls for
  # stats and health); gg_gpu: the vendor header and runtime (hipMalloc in
  # the client processes); gg_ops: the CPU references.
  target_link_libraries(test_gpu_daemon PRIVATE gg_client_static gg_gpu gg_ops m)
  target_compile_definitions(test_gpu_daemon PRIVATE
    "GG_DAEMON_PATH=\"$<TARGET_FILE:gfxgraphd>\"")
  add_dependencies(test_gpu_daemon gfxgraphd)
  add_test(NAME gpu_daemon COMMAND test_gpu_daemon)
  set_tests_properties(gpu_daemon PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
