# SPDX-License-Identifier: MIT
# Op library: table, dtype conversions, check rules, CPU references.  One
# executable (main in test_ops.c), so the per-case seeds follow one sequence:
# test_ops_rules.c (table, conversions, check rules), test_ops_accuracy.c
# (the references against refs_double.c, row independence).
add_executable(test_ops
  ${CMAKE_SOURCE_DIR}/tests/test_ops.c
  ${CMAKE_SOURCE_DIR}/tests/test_ops_rules.c
  ${CMAKE_SOURCE_DIR}/tests/test_ops_accuracy.c
  ${CMAKE_SOURCE_DIR}/tests/refs_double.c)
target_link_libraries(test_ops PRIVATE gg_ops m)
add_test(NAME ops COMMAND test_ops)
set_tests_properties(ops PROPERTIES LABELS "unit" TIMEOUT 600)

# The decode-step ops (embedding, rope, cache_write, attention_decode,
# argmax, cast) against double references (decode_refs.h).
add_executable(test_ops_decode ${CMAKE_SOURCE_DIR}/tests/test_ops_decode.c)
target_include_directories(test_ops_decode PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_link_libraries(test_ops_decode PRIVATE gg_ops m)
add_test(NAME ops_decode COMMAND test_ops_decode)
set_tests_properties(ops_decode PROPERTIES LABELS "unit" TIMEOUT 120)
