# SPDX-License-Identifier: MIT
# What a reader of the docs copies, run as shown (label integration):
#
#   doc_examples   the README's C example and docs/python.md's numpy example,
#                  taken from the docs at run time, against a daemon of the
#                  same uid and one of another uid (gfxgraph or nobody; root
#                  only, else 77 once the same-uid part passed), and one
#                  whose quota refuses them: output, exit status, the
#                  daemon's counters and log for the run's session, nothing
#                  left in /dev/shm (tests/scripts/doc-examples.py)
#   man_examples   every command in the EXAMPLES of docs/man/*, run against
#                  a cpu daemon holding a client's session: exit status and
#                  output against what the page shows; servers' options
#                  parsed, gfxgraphd.conf(5)'s file through --check-config
#                  (tests/scripts/doc-examples-man.py)
#
# After python.cmake in the sorted list of fragments: GG_TEST_PYTHON (the
# python3 with numpy) comes from there.
set(_gg_doc_py ${GG_TEST_PYTHON})
if(NOT _gg_doc_py)
  set(_gg_doc_py python3)
endif()
set(_gg_doc_run "command -v \"$0\" >/dev/null 2>&1 || { echo 'SKIP: python3 is not available'; exit 77; }; exec \"$0\" \"$@\"")
set(_gg_doc_cflags "")
set(_gg_doc_preload "")
if(GFXGRAPH_SANITIZE)
  # the example links the instrumented library; python loads it with ctypes,
  # so the runtime must come first (as for the Python tests)
  set(_gg_doc_cflags "-fsanitize=address,undefined")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE _gg_doc_preload OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
add_test(NAME doc_examples
  COMMAND sh -c "${_gg_doc_run}" ${_gg_doc_py}
    ${CMAKE_SOURCE_DIR}/tests/scripts/doc-examples.py
    --source ${CMAKE_SOURCE_DIR} --daemon $<TARGET_FILE:gfxgraphd>
    --ctl $<TARGET_FILE:gfxgraphctl> --lib $<TARGET_FILE:gfxgraph-client>
    --cc ${CMAKE_C_COMPILER} "--cflags=${_gg_doc_cflags}" --python ${_gg_doc_py}
    "--preload=${_gg_doc_preload}")
set_tests_properties(doc_examples PROPERTIES
  LABELS integration TIMEOUT 600 SKIP_RETURN_CODE 77
  ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
add_test(NAME man_examples
  COMMAND sh -c "${_gg_doc_run}" ${_gg_doc_py}
    ${CMAKE_SOURCE_DIR}/tests/scripts/doc-examples-man.py
    --source ${CMAKE_SOURCE_DIR} --daemon $<TARGET_FILE:gfxgraphd>
    --ctl $<TARGET_FILE:gfxgraphctl> --exporter $<TARGET_FILE:gfxgraph-exporter>
    --lib $<TARGET_FILE:gfxgraph-client> "--preload=${_gg_doc_preload}")
set_tests_properties(man_examples PROPERTIES
  LABELS integration TIMEOUT 300 SKIP_RETURN_CODE 77
  ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
