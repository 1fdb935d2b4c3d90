# SPDX-License-Identifier: MIT
# Issue 24's separable defects: the config reader under hostile files
# (long comments, /dev/zero, a directory, a FIFO, NUL bytes, unknown
# admin-group); a daemon whose log nobody reads, client log floods, a
# descriptor table filled (EMFILE reported as such), descriptors parked
# per uid, the scratch quota sized from the machine.
gg_core_test(test_attack_config test_attack_config.c unit 240)
gg_core_test(test_attack_daemon test_attack_daemon.c integration 300)
target_include_directories(test_attack_daemon PRIVATE ${CMAKE_SOURCE_DIR}/proto)
# admin-group through a supplementary group from the group database, not
# the client process (root: a group and users made and deleted; else
# skipped, exit 77).
gg_core_test(test_attack_admin_group test_attack_admin_group.c integration 240)
target_include_directories(test_attack_admin_group PRIVATE ${CMAKE_SOURCE_DIR}/proto)
set_tests_properties(test_attack_admin_group PROPERTIES SKIP_RETURN_CODE 77)
# Issue 24's shared-executor defects: a departed session's queued replay
# dropped, uids served in turn (another uid's backlog of sessions does not
# hold root's replay up; root: the attacker runs as nobody), max-jobs-per-uid,
# small call-expanding defines off the loop.
gg_core_test(test_attack_fair test_attack_fair.c integration 600 gg_client_static Threads::Threads)
target_include_directories(test_attack_fair PRIVATE ${CMAKE_SOURCE_DIR}/proto)
