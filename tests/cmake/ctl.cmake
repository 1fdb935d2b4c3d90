# SPDX-License-Identifier: MIT
# gfxgraphctl's commands (COMMAND --help, call, config, top's percentiles,
# kill-session's ECONNABORTED), the log level's environment names and the
# library's JSON call, against a real daemon.
gg_core_test(test_ctl_commands test_ctl_commands.c integration 300 gg_client_static)
add_dependencies(test_ctl_commands gfxgraphctl)
