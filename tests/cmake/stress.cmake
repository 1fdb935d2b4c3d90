# SPDX-License-Identifier: MIT
# Holding under abuse: a large legal define checked while another client
# is answered, and the load-and-fault suite:
# many clients on both transports, clients and the daemon killed, a stop
# under load.
gg_core_test(test_define_scale test_define_scale.c integration 300 Threads::Threads)
# Load and faults: 32 client processes x 2,000 replays (half fast path, half socket),
# every result checked; clients SIGKILLed mid-replay; the daemon SIGKILLed
# and restarted on the same socket; SIGTERM under load; RSS flat.  About a
# minute on 2 cores (bench/soak.sh runs it larger).
gg_core_test(test_load_fault test_load_fault.c integration 300 gg_client_static Threads::Threads)
target_include_directories(test_load_fault PRIVATE ${CMAKE_SOURCE_DIR}/proto)
# Connections: backpressure (1 M pipelined requests never read: RSS under
# baseline + 64 MiB, back after), closing connections counted per uid and cut
# off, strict parameters, event handle, shm EMFILE, ESHUTDOWN at a stop.
gg_core_test(test_abuse_conn test_abuse_conn.c integration 300)
# Per-uid quotas (EDQUOT naming the setting; another uid unaffected;
# the cpu backend maps only the registered range).
gg_core_test(test_quota test_quota.c integration 300)
target_include_directories(test_quota PRIVATE ${CMAKE_SOURCE_DIR}/proto)
# The memory a call-expanding program holds, under a quota of its own
# (max-program-bytes-per-uid; auto: an eighth of RAM).
gg_core_test(test_quota_program test_quota_program.c integration 300)
target_include_directories(test_quota_program PRIVATE ${CMAKE_SOURCE_DIR}/proto)
# Stats scoped to the caller's uid (root, the daemon's uid and
# admin-group see all), the cache list capped with a total and a flag.
gg_core_test(test_stats_scope test_stats_scope.c integration 300)
target_include_directories(test_stats_scope PRIVATE ${CMAKE_SOURCE_DIR}/proto)
# Connections past RLIMIT_NOFILE are refused, logged with the
# numbers and the setting, and taken again once descriptors are free.
gg_core_test(test_accept_fds test_accept_fds.c integration 120)
# The operators' verbs, gfxgraphctl evict and kill-session
# (refused outside root, the daemon's uid and admin-group; evict by name and
# --all, re-captured after; a graph in use deferred; a killed client closed,
# others unaffected).
gg_core_test(test_admin test_admin.c integration 300 gg_client_static)
target_include_directories(test_admin PRIVATE ${CMAKE_SOURCE_DIR}/proto)
add_dependencies(test_admin gfxgraphctl)
