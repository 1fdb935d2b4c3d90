# SPDX-License-Identifier: MIT
# The handler-level fuzz target: the real server on the
# cpu backend in-process, every method through the dispatch table, replays
# executed (tests/fuzz/fuzz_handlers.c).  libFuzzer comes with clang only.
# `make fuzz` / `make test` build it (and fuzz_proto) in build-fuzz with
# clang, ASan+UBSan and -fsanitize=fuzzer-no-link on every library, so the
# daemon's own code is what the fuzzer's coverage sees.
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_handlers ${GG_TESTS_DIR}/fuzz/fuzz_handlers.c)
  target_compile_options(fuzz_handlers PRIVATE -fsanitize=fuzzer)
  target_link_options(fuzz_handlers PRIVATE -fsanitize=fuzzer)
  target_link_libraries(fuzz_handlers PRIVATE gg_daemon PkgConfig::MSGPACK m)
  add_test(NAME fuzz_handlers_smoke COMMAND fuzz_handlers -runs=300 -seed=1 -max_len=8192)
  set_tests_properties(fuzz_handlers_smoke PROPERTIES LABELS "unit" TIMEOUT 300)
endif()
