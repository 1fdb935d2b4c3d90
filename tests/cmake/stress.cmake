# Issue 10 (hold under abuse): a large legal define checked while another
# client is answered (item 5), and the load-and-fault suite (item 9):
# many clients on both transports, clients and the daemon killed, a stop
# under load.
gg_core_test(test_define_scale test_define_scale.c integration 300 Threads::Threads)
