# make demo's script (tests/scripts/demo.sh) against this build: both runs
# match the reference and the daemon counts no errors (issue 13 item 6).
add_test(NAME demo_script
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/scripts/demo-check.sh ${CMAKE_BINARY_DIR})
set_tests_properties(demo_script PROPERTIES LABELS integration TIMEOUT 300)
