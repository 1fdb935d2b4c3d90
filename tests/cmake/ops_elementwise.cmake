# SPDX-License-Identifier: MIT
# The elementwise and reduction families (ops_elementwise.c, ops_reduce.c):
# the CPU references against references computed in each test, and the
# rules' refusals.
foreach(_t test_ops_elementwise test_ops_reduce)
  add_executable(${_t} ${CMAKE_SOURCE_DIR}/tests/${_t}.c)
  target_link_libraries(${_t} PRIVATE gg_ops m)
  string(REPLACE "test_" "" _n ${_t})
  add_test(NAME ${_n} COMMAND ${_t})
  set_tests_properties(${_n} PROPERTIES LABELS "unit" TIMEOUT 120)
endforeach()

# The same ops in one program through the daemon (cpu backend): values, the
# graph captured and hit, a refused node.
gg_core_test(test_ops_ew_daemon test_ops_ew_daemon.c integration 300 gg_client_static)
