# Issue 10 (hold under abuse): a large legal define checked while another
# client is answered (item 5), and the load-and-fault suite (item 9):
# many clients on both transports, clients and the daemon killed, a stop
# under load.
gg_core_test(test_define_scale test_define_scale.c integration 300 Threads::Threads)
# Item 9: 32 client processes x 2,000 replays (half fast path, half socket),
# every result checked; clients SIGKILLed mid-replay; the daemon SIGKILLed
# and restarted on the same socket; SIGTERM under load; RSS flat.  About a
# minute on 2 cores (bench/soak.sh runs it larger).
gg_core_test(test_load_fault test_load_fault.c integration 300 gg_client_static Threads::Threads)
target_include_directories(test_load_fault PRIVATE ${CMAKE_SOURCE_DIR}/proto)
