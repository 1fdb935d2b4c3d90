# SPDX-License-Identifier: MIT
# Metrics and gfxgraph-exporter (docs/metrics.md):
#
#   test_metrics_format   unit: the Prometheus text the daemon renders
#                         (HELP/TYPE, label escaping, histogram _bucket/_sum/
#                         _count with le="+Inf", error series at zero, the
#                         process_* metrics, the worst-case size)
#   test_exporter         the exporter's HTTP parser and body (unit), then the
#                         binary against a real cpu daemon: gfxgraph_up 1 with
#                         the daemon's text, gfxgraph_up 0 alone without it,
#                         bad requests answered, a silent client dropped
#   exporter_units        (label systemd) the exporter's units: verify,
#                         systemd-analyze security <= 2.0, socket activation
#                         under MemoryDenyWriteExecute
#   prometheus_check      (label prometheus) a real Prometheus scrapes the
#                         exporter: a rate, a quantile, staleness and the
#                         documented alert; skipped without prometheus
gg_core_test(test_metrics_format test_metrics_format.c unit 120 gg_daemon)
gg_core_test(test_exporter test_exporter.c integration 300 gg_exporter)
target_compile_definitions(test_exporter PRIVATE
  GG_EXPORTER_PATH="$<TARGET_FILE:gfxgraph-exporter>")
add_dependencies(test_exporter gfxgraph-exporter)

set(_gg_metrics_env
  GG_SOURCE_DIR=${PROJECT_SOURCE_DIR}
  GG_BUILD_DIR=${PROJECT_BINARY_DIR}
  GFXGRAPHD=$<TARGET_FILE:gfxgraphd>
  GFXGRAPHCTL=$<TARGET_FILE:gfxgraphctl>
  GG_SD_HELPER=$<TARGET_FILE:gg_sd_helper>
  GFXGRAPH_EXPORTER=$<TARGET_FILE:gfxgraph-exporter>)
add_test(NAME exporter_units COMMAND bash ${PROJECT_SOURCE_DIR}/tests/systemd/exporter.sh)
add_test(NAME prometheus_check COMMAND bash ${PROJECT_SOURCE_DIR}/tests/prometheus/prometheus-check.sh)
set_tests_properties(exporter_units PROPERTIES
  LABELS systemd SKIP_RETURN_CODE 77 TIMEOUT 180 ENVIRONMENT "${_gg_metrics_env}"
  RESOURCE_LOCK gg_cmake_install)
set_tests_properties(prometheus_check PROPERTIES
  LABELS prometheus SKIP_RETURN_CODE 77 TIMEOUT 600 ENVIRONMENT "${_gg_metrics_env}")
