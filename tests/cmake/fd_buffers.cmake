# SPDX-License-Identifier: MIT
# Buffers by file descriptor (buffer.register fd: true):
# memfd and shm descriptors registered and written by replays, every refusal,
# descriptors no request takes closed (the daemon's count back at its
# baseline), a shrink gives EFAULT; and, as root, a daemon running as nobody
# serving a client of another uid by fd where its shm name is refused.
gg_core_test(test_buffer_fd test_buffer_fd.c integration 300 gg_client_static)
add_test(NAME test_buffer_fd_other_uid COMMAND test_buffer_fd --other-uid)
set_tests_properties(test_buffer_fd_other_uid PROPERTIES LABELS integration TIMEOUT 300
  SKIP_RETURN_CODE 77)
