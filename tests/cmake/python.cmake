# SPDX-License-Identifier: MIT
# The Python package (python/gfxgraph) against a cpu-backend daemon, label
# integration:
#
#   python_package  tests/python/test_package.py starts its own gfxgraphd on
#                   a temporary socket and imports the package from the
#                   source tree with GFXGRAPH_LIB naming this build's
#                   libgfxgraph-client: define, replays across buckets and
#                   branches against references, the socket path, errors
#                   and their codes, submit/poll/wait, prepare, rebind,
#                   stats/health keys, release and close; numpy checks when
#                   numpy is installed (Debian: python3-numpy), else
#                   reported as skipped.  SKIP (77) without python3.
#   python_torch_cpu  tests/python/test_torch_cpu.py: the torch parts that
#                     need no GPU (the torch.compile backend's partitions run
#                     on the cpu backend, enable()'s aten -> op translation,
#                     the class patching).  SKIP (77) without torch (CI has
#                     none; Debian's python3-torch is enough).
#   python_frontend_traces  tests/python/test_frontend_traces.py: the
#                     PyTorch frontend on the recorded decode steps of
#                     tests/traces and synthetic ones, each lowered, defined
#                     on its own cpu-backend daemon, replayed once and
#                     compared with the recorded results (one replay, no
#                     fallback asserted).  SKIP (77) without numpy.
#   python_frontend_fusion  tests/python/test_frontend_fusion.py: the
#                     launches per replay of the frontend's programs for the
#                     decode chain, an MLP and HF's RMSNorm + SiLU MLP block
#                     on a cpu-backend daemon (the planner fuses them as it
#                     does hand-written programs), values against numpy.
#                     SKIP (77) without numpy.
#   python_frontend   tests/python/test_frontend.py: the frontend's passes
#                     (each spelling of RMSNorm/GELU/silu*b, strided,
#                     broadcast and mixed-dtype operands, Unsupported's
#                     message), run in test_frontend_npexec.py's numpy model
#                     of the daemon's ops; no daemon.  SKIP (77) without numpy.
#   python_frontend_npexec  every trace through the frontend and that numpy
#                     model against the recorded results (the lowering apart
#                     from the kernels).  SKIP (77) without numpy.
#   python_compile_partition  tests/python/test_compile_partition.py: the
#                     torch.compile backend's partitioning (node coverage,
#                     fewest daemon/Inductor partitions, more than N -> Inductor
#                     whole) on plain graphs and the traces; no torch, no daemon.
#
# The interpreter: the first python3 on PATH that imports numpy, else
# Debian's /usr/bin/python3 when it does (make deps installs python3-numpy
# there, while a PATH python3 may be another installation without it), else
# python3 on PATH; the numpy tests skip only where no interpreter has numpy.
set(GG_TEST_PYTHON "" CACHE STRING "python3 for the Python tests (empty: choose one with numpy)")
if(NOT GG_TEST_PYTHON)
  find_program(_gg_path_python python3)
  set(GG_TEST_PYTHON python3)
  foreach(_py ${_gg_path_python} /usr/bin/python3)
    if(EXISTS "${_py}")
      execute_process(COMMAND "${_py}" -c "import numpy" RESULT_VARIABLE _gg_np
        OUTPUT_QUIET ERROR_QUIET)
      if(_gg_np EQUAL 0)
        set(GG_TEST_PYTHON "${_py}")
        break()
      endif()
    endif()
  endforeach()
endif()
message(STATUS "Python tests run with ${GG_TEST_PYTHON}")
set(_gg_py_run "command -v \"$0\" >/dev/null 2>&1 || { echo 'SKIP: python3 is not available'; exit 77; }; exec \"$0\" \"$@\"")
foreach(_t package torch_cpu frontend_traces frontend_fusion)
  add_test(NAME python_${_t}
    COMMAND sh -c "${_gg_py_run}" ${GG_TEST_PYTHON}
      ${CMAKE_SOURCE_DIR}/tests/python/test_${_t}.py
      --daemon $<TARGET_FILE:gfxgraphd> --lib $<TARGET_FILE:gfxgraph-client>)
endforeach()
foreach(_t frontend frontend_npexec compile_partition)
  add_test(NAME python_${_t}
    COMMAND sh -c "${_gg_py_run}" ${GG_TEST_PYTHON}
      ${CMAKE_SOURCE_DIR}/tests/python/test_${_t}.py)
endforeach()
set(_gg_py_env "PYTHONPATH=${CMAKE_SOURCE_DIR}/python:${CMAKE_SOURCE_DIR}/tests/python"
  PYTHONDONTWRITEBYTECODE=1)
if(GFXGRAPH_SANITIZE)
  # python loads the ASan-built library with ctypes: the runtime must come
  # first, and python's own allocations are not ours to leak-check (the
  # daemon keeps leak checks: GG_DAEMON_ASAN_OPTIONS).
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE _gg_libasan OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND _gg_py_env LD_PRELOAD=${_gg_libasan}
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
    GG_DAEMON_ASAN_OPTIONS=detect_leaks=1:abort_on_error=1)
endif()
set_tests_properties(python_package python_torch_cpu python_frontend_traces python_frontend
  python_frontend_fusion python_frontend_npexec python_compile_partition PROPERTIES
  LABELS integration TIMEOUT 300 SKIP_RETURN_CODE 77
  ENVIRONMENT "${_gg_py_env}")
