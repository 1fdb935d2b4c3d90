#!/bin/bash
# SPDX-License-Identifier: MIT
# make install / cmake --install with DESTDIR: what goes where.
#  1. --prefix /usr: binaries, library, header, pkg-config and CMake package
#     files, the units (ExecStart=/usr/sbin/gfxgraphd), sysusers.d,
#     tmpfiles.d, /etc/gfxgraph/gfxgraphd.conf; a program builds and links
#     against the installed library through pkg-config.
#  2. --prefix /opt/gfxgraph: ExecStart= follows the prefix, and the --config
#     path in the unit is where the example config was installed.
#  3. Reinstalling does not overwrite an edited config.
#  4. The example config is accepted by the daemon as it is, and with every
#     commented "key = value" line uncommented.
#  5. Installed with the configured prefix (what `make install` does), the
#     example config is where the daemon looks without --config.
#  6. make install DESTDIR=..., the top-level Makefile's target, of this
#     build tree (BUILD=; NODEPS=1 so it never runs apt-get; no PREFIX=, which
#     would reconfigure the tree the suite is running from): the same files
#     as case 5, and the source tree's build/ left alone.
. "$(dirname "$0")/lib.sh"
gg_need cmake
gg_mktemp
T=$gg_tmp
D=$T/dest

gg_check "cmake --install --prefix /usr with DESTDIR" gg_install "$D" /usr || gg_summary
key_files="/usr/bin/gfxgraphctl /usr/sbin/gfxgraphd /usr/include/gfxgraph/client.h
    /usr/lib/systemd/system/gfxgraphd.service /usr/lib/systemd/system/gfxgraphd.socket
    /usr/lib/systemd/system/gfxgraphd@.service /usr/lib/systemd/system/gfxgraphd@.socket
    /usr/lib/sysusers.d/gfxgraph.conf /usr/lib/tmpfiles.d/gfxgraph.conf
    /etc/gfxgraph/gfxgraphd.conf /usr/share/doc/gfxgraph/gfxgraphd.conf.example
    /usr/share/man/man8/gfxgraphd.8 /usr/share/man/man1/gfxgraphctl.1
    /usr/share/man/man5/gfxgraphd.conf.5 /usr/share/doc/gfxgraph/PROTOCOL.md
    /usr/share/doc/gfxgraph/ops.md /usr/share/doc/gfxgraph/configuration.md
    /usr/share/doc/gfxgraph/operations.md"
have() { test -e "$D$1"; }
for f in $key_files; do
    gg_check "installed: $f" have "$f"
done
gg_check "installed: /usr/sbin/gfxgraphd is executable" test -x "$D/usr/sbin/gfxgraphd"
one() { compgen -G "$D$1" | head -1; }
lib=$(one '/usr/lib*/libgfxgraph-client.so.0')
gg_check "installed: /usr/lib*/libgfxgraph-client.so.0 (${lib#$D})" test -n "$lib"
pc=$(one '/usr/lib*/pkgconfig/gfxgraph-client.pc')
gg_check "installed: /usr/lib*/pkgconfig/gfxgraph-client.pc (${pc#$D})" test -n "$pc"
cm=$(one '/usr/lib*/cmake/gfxgraph-client/gfxgraph-clientConfig.cmake')
gg_check "installed: /usr/lib*/cmake/gfxgraph-client/gfxgraph-clientConfig.cmake" test -n "$cm"
gg_check "installed: gfxgraph-clientConfigVersion.cmake and the targets file" \
    test -e "$(dirname "$cm")/gfxgraph-clientConfigVersion.cmake" -a \
         -e "$(dirname "$cm")/gfxgraph-clientTargets.cmake"
gg_check "nothing installed outside /usr and /etc" \
    test -z "$(find "$D" -mindepth 1 -maxdepth 1 ! -name usr ! -name etc)"

execstart() { sed -n 's/^ExecStart=//p' "$1"; }
for u in gfxgraphd.service gfxgraphd@.service; do
    e=$(execstart "$D/usr/lib/systemd/system/$u")
    gg_check "$u: ExecStart=/usr/sbin/gfxgraphd --config /etc/gfxgraph/gfxgraphd.conf ..." \
        eval '[[ "$e" == "/usr/sbin/gfxgraphd --config /etc/gfxgraph/gfxgraphd.conf "* ]]'
done
gg_check "no @VARIABLE@ left in the installed units" \
    eval '! grep -l "@[A-Z_]*@" "$D"/usr/lib/systemd/system/gfxgraphd*'
gg_check "units are not executable (systemd warns about that)" \
    eval '[ -z "$(find "$D/usr/lib/systemd/system" -name "gfxgraphd*" -perm /111)" ]'

# A consumer of the installed library through pkg-config.
if command -v pkg-config >/dev/null && command -v cc >/dev/null; then
    cat >"$T/use.c" <<'C'
#include <gfxgraph/client.h>
int main(void) { return 0; }
C
    # only the installed file counts: no sysroot a build environment may set
    flags=$(env -u PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH="$(dirname "$pc")" \
            PKG_CONFIG_LIBDIR="$(dirname "$pc")" pkg-config --define-prefix --cflags --libs gfxgraph-client 2>&1)
    gg_check "pkg-config gfxgraph-client (with --define-prefix): $flags" test $? -eq 0
    # shellcheck disable=SC2086
    gg_check "a program compiles and links against the installed library" \
        cc -o "$T/use" "$T/use.c" $flags -Wl,-rpath-link,"$(dirname "$lib")"
fi

# 2: another prefix
O=$T/opt
gg_check "cmake --install --prefix /opt/gfxgraph with DESTDIR" gg_install "$O" /opt/gfxgraph
e=$(execstart "$O/opt/gfxgraph/lib/systemd/system/gfxgraphd.service")
gg_check "/opt prefix: ExecStart follows it ($e)" eval '[[ "$e" == /opt/gfxgraph/sbin/gfxgraphd\ * ]]'
gg_check "/opt prefix: the binary is where ExecStart says" test -x "$O/opt/gfxgraph/sbin/gfxgraphd"
conf=$(sed -E 's/.*--config ([^ ]+).*/\1/' <<<"$e")
gg_check "/opt prefix: the config the unit names is installed ($conf)" test -f "$O$conf"

# 3: an edited config survives a reinstall
echo "vram-cap = 0.5" >>"$D/etc/gfxgraph/gfxgraphd.conf"
gg_install "$D" /usr
gg_check "reinstall keeps an edited /etc/gfxgraph/gfxgraphd.conf" \
    grep -q "^vram-cap = 0.5$" "$D/etc/gfxgraph/gfxgraphd.conf"
cp "$GG_SOURCE_DIR/etc/gfxgraphd.conf" "$D/etc/gfxgraph/gfxgraphd.conf"

# 4: the example config parses, as shipped and uncommented
starts() {
    local conf=$1 sock=$T/c.sock pid ok=1
    "$GFXGRAPHD" --config "$conf" --backend cpu --socket "$sock" 2>"$T/c.err" &
    pid=$!
    gg_cleanup_hooks+=("gg_running $pid && kill -KILL $pid")
    gg_wait_socket "$sock" && "$GFXGRAPHCTL" health --socket "$sock" >/dev/null 2>&1 && ok=0
    gg_running "$pid" && kill -TERM "$pid"
    gg_wait_pid "$pid" 20
    [ $ok -eq 0 ] || cat "$T/c.err"
    return $ok
}
gg_check "the daemon starts with the installed example config" \
    starts "$D/etc/gfxgraph/gfxgraphd.conf"
sed -E 's/^# ([a-z-]+ = .*)$/\1/' "$GG_SOURCE_DIR/etc/gfxgraphd.conf" | grep -v '^socket = ' >"$T/all.conf"
keys=$(sed -nE 's/.*strcmp\(key, "([a-z-]+)"\).*/\1/p' "$GG_SOURCE_DIR/daemon/base/config.c" | sort -u)
missing=$(for k in $keys; do grep -qE "^# $k = " "$GG_SOURCE_DIR/etc/gfxgraphd.conf" || echo "$k"; done)
gg_check "the example config shows every key of daemon/base/config.c ($(wc -w <<<"$keys") keys)${missing:+; missing: }$(echo $missing)" \
    test -n "$keys" -a -z "$missing"
gg_check "the daemon starts with every example setting uncommented" starts "$T/all.conf"

# 5: the built-in config path follows the configured prefix
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$GG_BUILD_DIR/CMakeCache.txt")
builtin=$("$GFXGRAPHD" --help | sed -n 's/.*config file (default \(.*\)) over defaults.*/\1/p')
C=$T/configured
gg_check "cmake --install with the configured prefix ($prefix)" gg_install "$C" "$prefix"
gg_check "without --config the daemon reads ${builtin:-?}, the installed example config" \
    test -n "$builtin" -a -f "$C$builtin"

# 6: make install.  The variables of an enclosing make (make test-main runs
# ctest) would hand this one a jobserver it cannot reach.
if command -v make >/dev/null; then
    M=$T/mk
    had_build=no
    [ -e "$GG_SOURCE_DIR/build" ] && had_build=yes
    make_install() {
        env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$GG_SOURCE_DIR" install \
            BUILD="$GG_BUILD_DIR" DESTDIR="$M" NODEPS=1 JOBS=2 >"$T/make.log" 2>&1 ||
            { cat "$T/make.log"; return 1; }
    }
    gg_check "make install BUILD=<this build> DESTDIR=... NODEPS=1" make_install
    gg_check "make install: no package step (NODEPS=1)" \
        eval 'grep -q "not checked (NODEPS=1)" "$T/make.log" && ! grep -q "^installing:" "$T/make.log"'
    gg_check "make install: $prefix/sbin/gfxgraphd is executable" test -x "$M$prefix/sbin/gfxgraphd"
    gg_check "make install: the example config the daemon reads without --config" \
        test -n "$builtin" -a -f "$M$builtin"
    e=$(execstart "$M$prefix/lib/systemd/system/gfxgraphd.service")
    gg_check "make install: ExecStart=$prefix/sbin/gfxgraphd ... ($e)" \
        eval '[[ "$e" == "$prefix/sbin/gfxgraphd "* ]]'
    gg_check "make install: the same files as cmake --install" \
        diff <(cd "$C" && find . ! -type d | sort) <(cd "$M" && find . ! -type d | sort)
    if [ "$had_build" = no ]; then
        gg_check "make install BUILD=... left the source tree's build/ alone" \
            test ! -e "$GG_SOURCE_DIR/build"
    fi
else
    echo "skip - make not found: the make install case did not run"
fi
gg_summary
