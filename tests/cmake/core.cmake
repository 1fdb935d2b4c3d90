# SPDX-License-Identifier: MIT
# Core suite: protocol unit tests (framing; envelopes, getters and error
# codes), the daemon over raw sockets (hello/stats/health and bad input on
# one daemon; configured limits and queued work; client text, timeouts and
# per-uid limits on connections; PROTOCOL.md's worked example), daemon
# start-up and stop, the daemon's socket and log-level settings and their
# precedence, the client library against a real daemon (and the default
# socket it finds, as a user), gfxgraphctl (and its exit status 1 against a
# stand-in daemon that reports itself unhealthy), and the protocol fuzz
# target (clang only).
#
# Labels: "unit" runs in-process; "integration" starts the real gfxgraphd on
# a temporary socket (tests/harness.c).
set(GG_TESTS_DIR ${CMAKE_SOURCE_DIR}/tests)

add_library(gg_test_harness STATIC ${GG_TESTS_DIR}/harness.c)
target_include_directories(gg_test_harness PUBLIC ${GG_TESTS_DIR})
target_link_libraries(gg_test_harness PUBLIC gg_proto m)
target_compile_definitions(gg_test_harness PRIVATE
  GG_DAEMON_PATH="$<TARGET_FILE:gfxgraphd>")
add_dependencies(gg_test_harness gfxgraphd)

# test name, source, label, timeout, extra libraries...
function(gg_core_test name src label timeout)
  add_executable(${name} ${GG_TESTS_DIR}/${src})
  target_link_libraries(${name} PRIVATE gg_test_harness ${ARGN})
  target_compile_definitions(${name} PRIVATE
    GG_DAEMON_PATH="$<TARGET_FILE:gfxgraphd>"
    GG_CTL_PATH="$<TARGET_FILE:gfxgraphctl>")
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${label}" TIMEOUT ${timeout})
endfunction()

gg_core_test(test_proto_frame test_proto_frame.c unit 300)
gg_core_test(test_proto_message test_proto_message.c unit 300)
gg_core_test(test_proto_utf8 test_proto_utf8.c unit 300)
gg_core_test(test_daemon_proto_methods test_daemon_proto_methods.c integration 600)
gg_core_test(test_daemon_proto_limits test_daemon_proto_limits.c integration 600)
gg_core_test(test_daemon_conn test_daemon_conn.c integration 600 rt)
gg_core_test(test_daemon_doc test_daemon_doc.c integration 300)
target_compile_definitions(test_daemon_doc PRIVATE
  GG_PROTOCOL_MD="${CMAKE_SOURCE_DIR}/proto/PROTOCOL.md")
# cmake --build BUILD --target gen-hello-doc: section 14's hello response
# rewritten from this tree's daemon (what test_daemon_doc checks).
add_custom_target(gen-hello-doc
  COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/scripts/gen-hello-doc
          $<TARGET_FILE:gfxgraphd> ${CMAKE_SOURCE_DIR}/proto/PROTOCOL.md
  DEPENDS gfxgraphd VERBATIM)
gg_core_test(test_daemon_life test_daemon_life.c integration 600)
gg_core_test(test_daemon_stop test_daemon_stop.c integration 1200 gg_client_static Threads::Threads)
gg_core_test(test_daemon_settings test_daemon_settings.c integration 600)
gg_core_test(test_client_replay test_client_replay.c integration 600 gg_client_static)
gg_core_test(test_client_fallback test_client_fallback.c integration 600 gg_client_static)
gg_core_test(test_client_errors test_client_errors.c integration 600 gg_client_static)
gg_core_test(test_client_layout test_client_layout.c integration 300 gg_client_static)
gg_core_test(test_daemon_lost test_daemon_lost.c integration 120 gg_client_static)
gg_core_test(test_client_crash test_client_crash.c integration 600 gg_client_static)
gg_core_test(test_client_socket test_client_socket.c integration 300 gg_client_static)
add_dependencies(test_client_socket gfxgraphctl)
gg_core_test(test_ctl test_ctl.c integration 600 gg_client_static)
add_dependencies(test_ctl gfxgraphctl)
# gfxgraphctl against a stand-in daemon (a thread of the test) that says it
# is unhealthy
gg_core_test(test_ctl_health test_ctl_health.c integration 300 Threads::Threads)
add_dependencies(test_ctl_health gfxgraphctl)

# libFuzzer target for the protocol; libFuzzer comes with clang only, so with
# another compiler there is nothing to build.  The proto sources are compiled
# into the target itself so the fuzzer sees their coverage.
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_proto ${GG_TESTS_DIR}/fuzz/fuzz_proto.c
    ${CMAKE_SOURCE_DIR}/proto/frame.c ${CMAKE_SOURCE_DIR}/proto/message.c
    ${CMAKE_SOURCE_DIR}/proto/args.c ${CMAKE_SOURCE_DIR}/proto/errors.c
    ${CMAKE_SOURCE_DIR}/proto/utf8.c)
  target_include_directories(fuzz_proto PRIVATE ${GG_TESTS_DIR} ${CMAKE_SOURCE_DIR}/proto)
  target_compile_options(fuzz_proto PRIVATE -fsanitize=fuzzer)
  target_link_options(fuzz_proto PRIVATE -fsanitize=fuzzer)
  target_link_libraries(fuzz_proto PRIVATE PkgConfig::MSGPACK m)
  # a short deterministic run as a smoke test
  add_test(NAME fuzz_proto_smoke COMMAND fuzz_proto -runs=20000 -seed=1 -max_len=2048)
  set_tests_properties(fuzz_proto_smoke PROPERTIES LABELS "unit" TIMEOUT 300)
endif()
gg_core_test(test_decode_daemon test_decode_daemon.c integration 300 gg_client_static)
gg_core_test(test_proto_scan test_proto_scan.c unit 300)

# gfxgraphctl metrics: Prometheus text against a real daemon (socket and
# fast-path replays), checked by hand and by python3-prometheus-client
gg_core_test(test_metrics test_metrics.c integration 300 gg_client_static)
add_dependencies(test_metrics gfxgraphctl)
# GFXGRAPH=validate: +-inf and NaN agree where equal (f16 overflow too), a
# failure answers fallback true as PROTOCOL.md says, replay-mode standard
# and hot validate what they say.
gg_core_test(test_validate test_validate.c integration 300 gg_client_static)
# vram-cap held against the device's memory at capture time, with sizes
# injected into the cpu backend (GFXGRAPH_CPU_MEMORY).
gg_core_test(test_vram_cap test_vram_cap.c integration 300 gg_client_static)
# health's seed keys: summary (the one-line details) beside the details
# map, and enabled_at (in stats too; nil with graphs off).
gg_core_test(test_health_seed test_health_seed.c integration 120)
