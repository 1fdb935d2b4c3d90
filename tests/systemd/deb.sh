#!/bin/bash
# SPDX-License-Identifier: MIT
# The Debian packages (debian/, built the way `make deb` builds them: a copy
# of the source tree, dpkg-buildpackage -b with the build profile
# pkg.gfxgraph.cpu and nocheck) into a scratch dir:
#  1. three packages, version <project version>, this dpkg architecture;
#     (dh_compress gzips the larger docs: operations.md may be .md.gz)
#     each package's files (dpkg-deb --contents), no file in two of them.
#  2. control data (dpkg-deb --info/--field): the conffile, the maintainer
#     scripts from debhelper (sh -n; systemd through deb-systemd-helper and
#     deb-systemd-invoke, never systemctl by hand), the symbols and shlibs of
#     the library, the -dev package's exact Depends on the library, no HIP
#     runtime in the library's Depends, hardening (lintian when installed:
#     no warnings).
#  3. unpacked with dpkg-deb -x into a scratch root: the daemon runs from it
#     (--version; --backend cpu on a temp socket with the packaged config),
#     the packaged gfxgraphctl gets health, the daemon stops with status 0.
# Skipped (77) without dpkg-buildpackage and debhelper (make deps-deb).
. "$(dirname "$0")/lib.sh"
gg_need dpkg-deb dpkg-buildpackage dh cmake git
gg_mktemp
T=$gg_tmp

arch=$(dpkg --print-architecture)
upstream=$(sed -nE 's/^project\(gfxgraph VERSION ([0-9][0-9.]*).*/\1/p' "$GG_SOURCE_DIR/CMakeLists.txt")
build_debs() {
    mkdir -p "$T/src/gfxgraph" "$T/out"
    (cd "$GG_SOURCE_DIR" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        xargs -0 cp --parents -t "$T/src/gfxgraph") &&
    sh "$GG_SOURCE_DIR/packaging/debian-changelog.sh" "$T/src/gfxgraph" &&
    (cd "$T/src/gfxgraph" && DEB_BUILD_OPTIONS="nocheck parallel=2" DEB_BUILD_PROFILES=pkg.gfxgraph.cpu \
        dpkg-buildpackage -b -us -uc) >"$T/debs.log" 2>&1 || { tail -n 60 "$T/debs.log"; return 1; }
    mv "$T"/src/*.deb "$T"/src/*.changes "$T"/src/*.buildinfo "$T/out/"
}
gg_check "dpkg-buildpackage -b (profile pkg.gfxgraph.cpu, nocheck) of a copy of the tree" build_debs || gg_summary
D=$T/out/gfxgraphd_${upstream}_${arch}.deb
L=$T/out/libgfxgraph-client0_${upstream}_${arch}.deb
V=$T/out/libgfxgraph-client-dev_${upstream}_${arch}.deb
for f in "$D" "$L" "$V"; do
    gg_check "built: $(basename "$f")" test -s "$f"
done
[ -s "$D" ] && [ -s "$L" ] && [ -s "$V" ] || gg_summary

# 1: contents
contents() { dpkg-deb --contents "$1" | awk '{ print $6 }' | sed 's|^\./|/|'; }
has() {   # has DEB REGEX: a path of DEB matches REGEX (whole path)
    contents "$1" | grep -qE "^$2\$"
}
for p in /usr/sbin/gfxgraphd /usr/bin/gfxgraphctl /etc/gfxgraph/gfxgraphd.conf \
         '/(usr/)?lib/systemd/system/gfxgraphd\.service' '/(usr/)?lib/systemd/system/gfxgraphd\.socket' \
         '/(usr/)?lib/systemd/system/gfxgraphd@\.service' '/(usr/)?lib/systemd/system/gfxgraphd@\.socket' \
         /usr/lib/sysusers.d/gfxgraph.conf /usr/lib/tmpfiles.d/gfxgraph.conf \
         /usr/share/doc/gfxgraphd/copyright \
         '/usr/share/doc/gfxgraph/operations\.md(\.gz)?'; do
    gg_check "gfxgraphd: $p" has "$D" "$p"
done
# man pages: when this tree installs them (an old tree may not)
if grep -q 'man8' "$GG_BUILD_DIR/cmake_install.cmake" 2>/dev/null; then
    gg_check "gfxgraphd: man pages, compressed" \
        eval 'has "$D" /usr/share/man/man8/gfxgraphd.8.gz && has "$D" /usr/share/man/man1/gfxgraphctl.1.gz'
fi
gg_check "libgfxgraph-client0: libgfxgraph-client.so.0 and its real file" \
    eval 'has "$L" "/usr/lib/([a-z0-9_-]+/)?libgfxgraph-client\.so\.0" &&
          has "$L" "/usr/lib/([a-z0-9_-]+/)?libgfxgraph-client\.so\.0\.[0-9.]+"'
only_lib() { ! contents "$L" | grep -v "/$" | grep -vE "^/usr/share/doc/libgfxgraph-client0/|/libgfxgraph-client\.so\.0"; }
gg_check "libgfxgraph-client0: nothing but the library and its doc dir" only_lib
for p in /usr/include/gfxgraph/client.h '/usr/lib/([a-z0-9_-]+/)?libgfxgraph-client\.so' \
         '/usr/lib/([a-z0-9_-]+/)?pkgconfig/gfxgraph-client\.pc' \
         '/usr/lib/([a-z0-9_-]+/)?cmake/gfxgraph-client/gfxgraph-clientConfig\.cmake' \
         /usr/share/doc/libgfxgraph-client-dev/copyright; do
    gg_check "libgfxgraph-client-dev: $p" has "$V" "$p"
done
gg_check "no file in two packages" \
    eval '[ -z "$(for f in "$D" "$L" "$V"; do contents "$f" | grep -v "/$"; done | sort | uniq -d)" ]'

# 2: control data
field() { dpkg-deb --field "$1" "$2"; }
gg_check "versions: $upstream, architecture $arch" \
    eval '[ "$(field "$D" Version)$(field "$L" Version)$(field "$V" Version)" = "$upstream$upstream$upstream" ] &&
          [ "$(field "$D" Architecture)$(field "$L" Architecture)$(field "$V" Architecture)" = "$arch$arch$arch" ]'
gg_check "libgfxgraph-client-dev Depends: libgfxgraph-client0 (= $upstream)" \
    eval 'field "$V" Depends | grep -qF "libgfxgraph-client0 (= $upstream)"'
gg_check "gfxgraphd Depends: libc6, libmsgpackc2, libuv1, libsystemd0 ($(field "$D" Depends))" \
    eval 'dep=$(field "$D" Depends); for l in libc6 libmsgpackc2 libuv1 libsystemd0; do grep -qE "(^|[ ,])$l( |,|$)" <<<"$dep" || exit 1; done'
C=$T/ctrl
mkdir -p "$C/d" "$C/l"
dpkg-deb --control "$D" "$C/d" && dpkg-deb --control "$L" "$C/l"
gg_check "gfxgraphd: conffiles lists /etc/gfxgraph/gfxgraphd.conf" \
    grep -qx /etc/gfxgraph/gfxgraphd.conf "$C/d/conffiles"
for s in postinst prerm postrm; do
    gg_check "gfxgraphd: $s is executable and parses (sh -n)" eval 'test -x "$C/d/$s" && sh -n "$C/d/$s"'
done
gg_check "gfxgraphd postinst (debhelper): systemd-sysusers, then systemd-tmpfiles --create, then deb-systemd-helper enable gfxgraphd.socket" \
    eval 'u=$(grep -n "systemd-sysusers.*gfxgraph.conf" "$C/d/postinst" | head -1 | cut -d: -f1);
          t=$(grep -n "systemd-tmpfiles.*--create gfxgraph.conf" "$C/d/postinst" | head -1 | cut -d: -f1);
          e=$(grep -n "deb-systemd-helper enable .gfxgraphd.socket." "$C/d/postinst" | head -1 | cut -d: -f1);
          [ -n "$u" ] && [ -n "$t" ] && [ -n "$e" ] && [ "$u" -lt "$t" ] && [ "$t" -lt "$e" ]'
gg_check "gfxgraphd: gfxgraphd.service enabled by the postinst only where the admin had enabled it" \
    eval 'grep -q "deb-systemd-helper debian-installed .gfxgraphd.service." "$C/d/postinst"'
gg_check "maintainer scripts: no systemctl by hand (debhelper's guarded daemon-reload only)" \
    eval '! grep -h "systemctl" "$C/d/postinst" "$C/d/prerm" "$C/d/postrm" 2>/dev/null | grep -v "systemctl --system daemon-reload" | grep -q .'
gg_check "libgfxgraph-client0: symbols file (every gg_client_ function of the library)" \
    eval 'grep -q "^libgfxgraph-client.so.0 libgfxgraph-client0" "$C/l/symbols" && grep -q " gg_client_connect@Base" "$C/l/symbols"'
gg_check "libgfxgraph-client0: triggers activate-noawait ldconfig" grep -qx "activate-noawait ldconfig" "$C/l/triggers"
gg_check "libgfxgraph-client0: shlibs" grep -q "^libgfxgraph-client 0 libgfxgraph-client0" "$C/l/shlibs"
gg_check "libgfxgraph-client0: no HIP runtime in Depends ($(field "$L" Depends))" \
    eval '! field "$L" Depends | grep -q amdhip'
gg_check "libgfxgraph-client-dev: the description names gfxgraph::client" \
    eval 'dpkg-deb --field "$V" Description | grep -qF "gfxgraph::client"'
if command -v hardening-check >/dev/null 2>&1; then
    # --nocfprotection: control-flow protection is not part of Debian 12's hardening flags
    hc() { dpkg-deb -x "$D" "$T/hc" && hardening-check -q --nocfprotection "$T/hc/usr/sbin/gfxgraphd" "$T/hc/usr/bin/gfxgraphctl"; }
    gg_check "hardening-check: gfxgraphd and gfxgraphctl (fortify, relro, bindnow, pie)" hc
fi
if command -v lintian >/dev/null 2>&1; then
    lint() { lintian --fail-on error,warning --tag-display-limit 0 "$T"/out/*.changes >"$T/lintian.log" 2>&1 ||
             { cat "$T/lintian.log"; return 1; }; }
    gg_check "lintian: no errors, no warnings" lint
else
    echo "# lintian not installed: not run"
fi
gg_check "dpkg-deb --info reads each package" \
    eval 'dpkg-deb --info "$D" >/dev/null && dpkg-deb --info "$L" >/dev/null && dpkg-deb --info "$V" >/dev/null'

# 3: the unpacked packages run
R=$T/root
for f in "$D" "$L" "$V"; do dpkg-deb -x "$f" "$R"; done
libdir=$(dirname "$(find "$R/usr/lib" -maxdepth 2 -name libgfxgraph-client.so.0 | head -1)")
run() { LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
gg_check "unpacked: gfxgraphd --version ($(run "$R/usr/sbin/gfxgraphd" --version 2>&1 | head -1))" \
    eval 'run "$R/usr/sbin/gfxgraphd" --version | grep -qF "$upstream"'
sock=$T/d.sock
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$R/usr/sbin/gfxgraphd" --config "$R/etc/gfxgraph/gfxgraphd.conf" \
    --backend cpu --socket "$sock" 2>"$T/d.err" &
pid=$!
gg_cleanup_hooks+=("gg_running $pid && kill -KILL $pid")
gg_check "unpacked: gfxgraphd --backend cpu with the packaged config listens on $sock" gg_wait_socket "$sock"
gg_check "unpacked: gfxgraphctl --socket ... health" \
    eval 'run "$R/usr/bin/gfxgraphctl" --socket "$sock" health >"$T/h.out" 2>&1 || { cat "$T/h.out"; false; }'
gg_running "$pid" && kill -TERM "$pid"
gg_wait_pid "$pid" 20
gg_check "unpacked: gfxgraphd stops on SIGTERM with status 0 (status $gg_wait_rc)" test "$gg_wait_rc" -eq 0 ||
    cat "$T/d.err"
gg_summary
