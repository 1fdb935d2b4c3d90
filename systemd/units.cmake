# SPDX-License-Identifier: MIT
# Generating the systemd units from their .in templates.
#
# Used twice: at configure time (the build-tree copies under
# <build>/systemd/units/, for the tests) and at install time (cmake --install
# may be given another --prefix than the one configured, and ExecStart= must
# name the binary where it is really installed).  At install time
# CMAKE_INSTALL_PREFIX is the prefix being installed to.

# The absolute form of a GNUInstallDirs directory for a given prefix, with the
# same special cases as GNUInstallDirs (/, /usr and /opt/... put etc, var and
# run at the top).
function(gg_systemd_full_dir out prefix rel kind)
  if(IS_ABSOLUTE "${rel}")
    set(_full "${rel}")
  elseif(prefix STREQUAL "/")
    if(kind STREQUAL "SYSCONFDIR")
      set(_full "/${rel}")
    elseif(rel MATCHES "^usr/")
      set(_full "/${rel}")
    else()
      set(_full "/usr/${rel}")
    endif()
  elseif(prefix MATCHES "^/usr/?$")
    if(kind STREQUAL "SYSCONFDIR")
      set(_full "/${rel}")
    else()
      set(_full "/usr/${rel}")
    endif()
  elseif(prefix MATCHES "^/opt/(.*)" AND kind STREQUAL "SYSCONFDIR")
    set(_full "/${rel}/opt/${CMAKE_MATCH_1}")
  else()
    string(REGEX REPLACE "/+$" "" _p "${prefix}")
    set(_full "${_p}/${rel}")
  endif()
  set(${out} "${_full}" PARENT_SCOPE)
endfunction()

# gg_systemd_generate(<srcdir> <outdir> <prefix> <sbindir> <sysconfdir> <docdir>)
# writes <outdir>/gfxgraphd.service, .socket, gfxgraphd@.service, @.socket.
function(gg_systemd_generate src out prefix sbindir sysconfdir docdir)
  gg_systemd_full_dir(CMAKE_INSTALL_FULL_SBINDIR "${prefix}" "${sbindir}" SBINDIR)
  gg_systemd_full_dir(CMAKE_INSTALL_FULL_SYSCONFDIR "${prefix}" "${sysconfdir}" SYSCONFDIR)
  gg_systemd_full_dir(CMAKE_INSTALL_FULL_DOCDIR "${prefix}" "${docdir}" DOCDIR)
  file(READ "${src}/service-common.in" GG_UNIT_SERVICE_COMMON)
  foreach(_u gfxgraphd.service gfxgraphd.socket gfxgraphd@.service gfxgraphd@.socket)
    configure_file("${src}/${_u}.in" "${out}/${_u}" @ONLY)
  endforeach()
  # the exporter's units: gfxgraph-exporter is installed in bin/, the sbin/
  # of gfxgraphd with its last part changed
  string(REGEX REPLACE "sbin$" "bin" _bindir "${sbindir}")
  gg_systemd_full_dir(GG_FULL_BINDIR "${prefix}" "${_bindir}" BINDIR)
  set(GG_FULL_DOCDIR "${CMAKE_INSTALL_FULL_DOCDIR}")
  foreach(_u gfxgraph-exporter.service gfxgraph-exporter.socket)
    configure_file("${src}/${_u}.in" "${out}/${_u}" @ONLY)
  endforeach()
  set(GG_SYSTEMD_FULL_SYSCONFDIR "${CMAKE_INSTALL_FULL_SYSCONFDIR}" PARENT_SCOPE)
  set(GG_SYSTEMD_FULL_DOCDIR "${CMAKE_INSTALL_FULL_DOCDIR}" PARENT_SCOPE)
endfunction()

# Install-time part: called from the install(CODE) in CMakeLists.txt.
function(gg_systemd_install)
  cmake_parse_arguments(A "" "SRC;CONF;DOC;SBINDIR;SYSCONFDIR;DOCDIR;UNITDIR;SYSUSERSDIR;TMPFILESDIR;DAEMON_CONF" "" ${ARGN})
  set(_prefix "${CMAKE_INSTALL_PREFIX}")
  # Generated in a private temporary directory (the build tree may be
  # read-only for the installing user; concurrent installs must not mix).
  set(_tmp "$ENV{TMPDIR}")
  if(NOT _tmp OR NOT IS_DIRECTORY "${_tmp}")
    set(_tmp "/tmp")
  endif()
  string(RANDOM LENGTH 12 _rnd)
  set(_out "${_tmp}/gfxgraph-units-${_rnd}")
  gg_systemd_generate("${A_SRC}" "${_out}" "${_prefix}" "${A_SBINDIR}" "${A_SYSCONFDIR}" "${A_DOCDIR}")
  gg_systemd_full_dir(_unitdir "${_prefix}" "${A_UNITDIR}" UNITDIR)
  gg_systemd_full_dir(_sysusersdir "${_prefix}" "${A_SYSUSERSDIR}" SYSUSERSDIR)
  gg_systemd_full_dir(_tmpfilesdir "${_prefix}" "${A_TMPFILESDIR}" TMPFILESDIR)

  file(INSTALL DESTINATION "${_unitdir}" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
       FILES "${_out}/gfxgraphd.service" "${_out}/gfxgraphd.socket"
             "${_out}/gfxgraphd@.service" "${_out}/gfxgraphd@.socket"
             "${_out}/gfxgraph-exporter.service" "${_out}/gfxgraph-exporter.socket")
  if(EXISTS "${A_SRC}/../docs/metrics.md")
    file(INSTALL DESTINATION "${GG_SYSTEMD_FULL_DOCDIR}" TYPE FILE
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${A_SRC}/../docs/metrics.md")
  endif()
  file(INSTALL DESTINATION "${_sysusersdir}" TYPE FILE RENAME gfxgraph.conf
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${A_SRC}/gfxgraph.sysusers")
  file(INSTALL DESTINATION "${_tmpfilesdir}" TYPE FILE RENAME gfxgraph.conf
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${A_SRC}/gfxgraph.tmpfiles")

  # The example config: always in the doc dir; in <sysconfdir>/gfxgraph only
  # when there is none yet, so a reinstall never overwrites an edited config.
  file(INSTALL DESTINATION "${GG_SYSTEMD_FULL_DOCDIR}" TYPE FILE RENAME gfxgraphd.conf.example
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${A_CONF}")
  if(EXISTS "${A_DOC}")
    file(INSTALL DESTINATION "${GG_SYSTEMD_FULL_DOCDIR}" TYPE FILE
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${A_DOC}")
  endif()
  set(_conf "$ENV{DESTDIR}${GG_SYSTEMD_FULL_SYSCONFDIR}/gfxgraph/gfxgraphd.conf")
  # The units name the config with --config; a daemon started by hand reads
  # the path built in from the configured prefix, which --prefix cannot move.
  if(A_DAEMON_CONF AND NOT A_DAEMON_CONF STREQUAL "${GG_SYSTEMD_FULL_SYSCONFDIR}/gfxgraph/gfxgraphd.conf")
    message(STATUS "Note: the config goes to ${GG_SYSTEMD_FULL_SYSCONFDIR}/gfxgraph/gfxgraphd.conf, "
                   "but gfxgraphd without --config reads ${A_DAEMON_CONF} (configured prefix); "
                   "configure with -DCMAKE_INSTALL_PREFIX=${_prefix} to match")
  endif()
  if(EXISTS "${_conf}")
    file(READ "${_conf}" _have)
    file(READ "${A_CONF}" _ship)
    if(NOT _have STREQUAL _ship)
      message(STATUS "Keeping: ${_conf} (edited; the shipped example is "
                     "${GG_SYSTEMD_FULL_DOCDIR}/gfxgraphd.conf.example)")
      file(REMOVE_RECURSE "${_out}")
      return()
    endif()
  endif()
  # 0644: the daemon (user gfxgraph) reads it, and it holds no secrets.
  file(INSTALL DESTINATION "${GG_SYSTEMD_FULL_SYSCONFDIR}/gfxgraph" TYPE FILE
       RENAME gfxgraphd.conf PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
       FILES "${A_CONF}")
  file(REMOVE_RECURSE "${_out}")
endfunction()
