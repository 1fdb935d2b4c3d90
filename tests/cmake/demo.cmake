# SPDX-License-Identifier: MIT
# make demo's script (tests/scripts/demo.sh) against this build: both runs
# match the reference and the daemon counts no errors.
# Not under the sanitizers: the demo's d = 1024 MLP on unoptimised
# reference kernels takes minutes there, and every path it takes is
# covered by the client tests.
if(NOT GFXGRAPH_SANITIZE)
  add_test(NAME demo_script
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/scripts/demo-check.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(demo_script PROPERTIES LABELS integration TIMEOUT 300)
endif()
