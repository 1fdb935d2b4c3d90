# SPDX-License-Identifier: MIT
# systemd integration (label "systemd"): shell scripts in tests/systemd/,
# each ending with "N passed, M failed"; exit 77 = skipped (a tool missing).
#
#   systemd_verify             systemd-analyze verify on every installed unit
#                              (offline --root), sysusers/tmpfiles snippets
#   systemd_security           systemd-analyze security --offline=true:
#                              exposure of gfxgraphd.service <= 2.0
#   systemd_socket_activation  systemd-socket-activate + gfxgraphctl health;
#                              restart on a kept socket (gg_sd_helper activate)
#   systemd_notify             READY/STATUS/WATCHDOG/STOPPING as seen from a
#                              NOTIFY_SOCKET (gg_sd_helper notify)
#   systemd_journal            --log-target=journal against a stand-in journald
#                              (private mount namespace; skipped parts say so)
#   systemd_install_layout     cmake --install and make install (the Makefile,
#                              BUILD=this tree) with DESTDIR: the file layout
#   systemd_deb                the Debian packages (packaging/deb/, make deb)
#                              of this tree: contents, control data, and the
#                              unpacked daemon and gfxgraphctl run
set(_gg_sd_dir ${PROJECT_SOURCE_DIR}/tests/systemd)

add_executable(gg_sd_helper ${_gg_sd_dir}/sd_helper.c)
target_link_libraries(gg_sd_helper PRIVATE gfxgraph-client)

set(_gg_sd_env
  GG_SOURCE_DIR=${PROJECT_SOURCE_DIR}
  GG_BUILD_DIR=${PROJECT_BINARY_DIR}
  GFXGRAPHD=$<TARGET_FILE:gfxgraphd>
  GFXGRAPHCTL=$<TARGET_FILE:gfxgraphctl>
  GG_SD_HELPER=$<TARGET_FILE:gg_sd_helper>)

foreach(_t verify:verify-units.sh security:security.sh socket_activation:socket-activation.sh
           notify:notify.sh journal:journal.sh install_layout:install-layout.sh
           reload:reload.sh config_check:config-check.sh man:man.sh ctl_ops:ctl-ops.sh
           deb:deb.sh)
  string(REPLACE ":" ";" _t "${_t}")
  list(GET _t 0 _name)
  list(GET _t 1 _script)
  add_test(NAME systemd_${_name} COMMAND bash ${_gg_sd_dir}/${_script})
  set_tests_properties(systemd_${_name} PROPERTIES
    LABELS systemd
    SKIP_RETURN_CODE 77
    TIMEOUT 180
    ENVIRONMENT "${_gg_sd_env}")
endforeach()
# systemd_deb builds the packages with dpkg-buildpackage from a copy of the
# tree (a cpu build of what is installed): more than the others' time.
set_tests_properties(systemd_deb PROPERTIES TIMEOUT 900)
# These run `cmake --install` of the build tree (which writes
# install_manifest.txt there): one at a time.
set_tests_properties(systemd_verify systemd_security systemd_install_layout systemd_man systemd_ctl_ops
                     systemd_deb PROPERTIES
  RESOURCE_LOCK gg_cmake_install)
