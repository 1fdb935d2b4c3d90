#!/bin/bash
# packaging/deb/build-debs.sh BUILD_DIR OUT_DIR: the three Debian packages of
# gfxgraph from a built CMake tree, with dpkg-deb only (no debhelper, no
# network).  `make deb` runs it on build-deb/ (configured with prefix /usr,
# so that the library lands in /usr/lib/<multiarch> and the daemon's built-in
# config path is /etc/gfxgraph/gfxgraphd.conf).
#
#   gfxgraphd              daemon, gfxgraphctl, units, sysusers/tmpfiles
#                          snippets, /etc/gfxgraph/gfxgraphd.conf (conffile),
#                          man pages, docs; postinst/prerm/postrm
#   libgfxgraph-client0    libgfxgraph-client.so.0*, shlibs, ldconfig trigger
#   libgfxgraph-client-dev header, .so link, pkg-config and CMake files
#
# The tree is staged with `cmake --install BUILD_DIR --prefix /usr --strip`
# into a scratch DESTDIR and split by path.  Depends come from dpkg-shlibdeps
# when it is there, else from a fixed list.  Version: project(VERSION) of
# CMakeLists.txt plus -$GG_DEB_REVISION (default 1); architecture: dpkg
# --print-architecture.  LINTIAN=no skips lintian (run when installed;
# LINTIAN_STRICT=1 makes its errors fail the build).
# Prints the paths of the packages built, one a line, on stdout.
set -euo pipefail
umask 022

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:?usage: build-debs.sh BUILD_DIR OUT_DIR}
out=${2:?usage: build-debs.sh BUILD_DIR OUT_DIR}
build=$(cd "$build" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
log() { echo "build-debs: $*" >&2; }

command -v dpkg-deb >/dev/null || { log "dpkg-deb not found"; exit 1; }

upstream=$(sed -nE 's/^project\(gfxgraph VERSION ([0-9][0-9.]*).*/\1/p' "$src/CMakeLists.txt")
[ -n "$upstream" ] || { log "no project(gfxgraph VERSION ...) in CMakeLists.txt"; exit 1; }
version="$upstream-${GG_DEB_REVISION:-1}"
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || true)
maint="gfxgraph maintainers <maintainers@gfxgraph.invalid>"
date=$(date -R -d "@${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct 2>/dev/null || date +%s)}")

work=$(mktemp -d "${TMPDIR:-/tmp}/ggdeb.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/stage
if ! DESTDIR="$stage" cmake --install "$build" --prefix /usr --strip >"$work/install.log" 2>&1; then
    cat "$work/install.log" >&2
    exit 1
fi

# ---- split the staged tree ------------------------------------------------
# debian/<pkg>/ so that dpkg-shlibdeps finds the library's shlibs file there.
deb=$work/debian
P_D=$deb/gfxgraphd
P_L=$deb/libgfxgraph-client0
P_V=$deb/libgfxgraph-client-dev
mkdir -p "$P_D" "$P_L" "$P_V"

libso=$(cd "$stage" && find usr/lib* -maxdepth 2 -name libgfxgraph-client.so.0 2>/dev/null | head -1)
[ -n "$libso" ] || { log "no libgfxgraph-client.so.0 staged under usr/lib*"; exit 1; }
libdir=$(dirname "$libso")
if [ -n "$multiarch" ] && [ "$libdir" != "usr/lib/$multiarch" ]; then
    log "warning: the library is in /$libdir, not /usr/lib/$multiarch (configure the tree with -DCMAKE_INSTALL_PREFIX=/usr)"
fi

# mv_into PKGROOT PATH...: move staged paths (relative to the stage) into a package.
mv_into() {
    local root=$1 p
    shift
    for p in "$@"; do
        [ -e "$stage/$p" ] || [ -L "$stage/$p" ] || continue
        mkdir -p "$root/$(dirname "$p")"
        mv "$stage/$p" "$root/$p"
    done
}
(cd "$stage" && compgen -G "$libdir/libgfxgraph-client.so.0*") | while read -r f; do mv_into "$P_L" "$f"; done
mv_into "$P_V" usr/include "$libdir/libgfxgraph-client.so" "$libdir/libgfxgraph-client.a" \
    "$libdir/pkgconfig/gfxgraph-client.pc" "$libdir/cmake/gfxgraph-client"
# The Python package (python/, when the tree installs it) is not part of
# these three packages: a python3-gfxgraph package would carry it.
rm -rf "$stage"/usr/lib/python3*
# everything else is the daemon's
mkdir -p "$P_D"
cp -a "$stage/." "$P_D/"
find "$P_D" -depth -type d -empty -delete
[ -x "$P_D/usr/sbin/gfxgraphd" ] || { log "no usr/sbin/gfxgraphd staged"; exit 1; }
[ -f "$P_D/etc/gfxgraph/gfxgraphd.conf" ] || { log "no etc/gfxgraph/gfxgraphd.conf staged"; exit 1; }

# ---- docs: copyright and changelog of each package -------------------------
changelog() {
    cat <<EOF
gfxgraph ($version) unstable; urgency=medium

  * Built from the gfxgraph source tree with packaging/deb/build-debs.sh.

 -- $maint  $date
EOF
}
for r in "$P_D" "$P_L" "$P_V"; do
    p=$(basename "$r")
    d=$r/usr/share/doc/$p
    mkdir -p "$d"
    install -m 0644 "$here/copyright" "$d/copyright"
    changelog | gzip -9n >"$d/changelog.Debian.gz"
done
# the project's own doc dir (what CMake installs) carries the copyright too
if [ -d "$P_D/usr/share/doc/gfxgraph" ]; then
    install -m 0644 "$here/copyright" "$P_D/usr/share/doc/gfxgraph/copyright"
fi
# man pages are shipped compressed
if [ -d "$P_D/usr/share/man" ]; then
    find "$P_D/usr/share/man" -type f ! -name '*.gz' -exec gzip -9n {} +
fi

# ---- Depends ---------------------------------------------------------------
# DEBIAN/shlibs of the library: what packages linking it depend on.
mkdir -p "$P_L/DEBIAN"
echo "libgfxgraph-client 0 libgfxgraph-client0 (>= $upstream)" >"$P_L/DEBIAN/shlibs"

elf_in() { find "$1" -type f \( -perm /111 -o -name '*.so*' \) -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print; }
shlibdeps() {   # shlibdeps PKGROOT: the ${shlibs:Depends} of its ELF files
    local root=$1 files
    files=$(elf_in "$root")
    [ -n "$files" ] || return 0
    if command -v dpkg-shlibdeps >/dev/null; then
        # shellcheck disable=SC2086
        (cd "$work" && dpkg-shlibdeps -O -e $files -l"$P_L/$libdir" 2>"$work/shlibdeps.err") |
            sed -n 's/^shlibs:Depends=//p' && return 0
        cat "$work/shlibdeps.err" >&2
        log "dpkg-shlibdeps failed: the fixed list instead"
    fi
    case $(basename "$root") in
        gfxgraphd) echo "libc6, libmsgpackc2, libuv1, libsystemd0" ;;
        *) echo "libc6, libmsgpackc2" ;;
    esac
}
cat >"$deb/control" <<EOF
Source: gfxgraph
Section: misc
Priority: optional
Maintainer: $maint

Package: gfxgraphd
Architecture: any
Description: gfxgraph daemon

Package: libgfxgraph-client0
Architecture: any
Description: gfxgraph client library

Package: libgfxgraph-client-dev
Architecture: any
Description: gfxgraph client library (development files)
EOF
dep_D=$(shlibdeps "$P_D")
dep_L=$(shlibdeps "$P_L")
ma_line=""
[ -n "$multiarch" ] && [ "$libdir" = "usr/lib/$multiarch" ] && ma_line="Multi-Arch: same"

# ---- control files ---------------------------------------------------------
size() { du -sk --exclude=DEBIAN "$1" | cut -f1; }
mkdir -p "$P_D/DEBIAN" "$P_V/DEBIAN"
cat >"$P_D/DEBIAN/control" <<EOF
Package: gfxgraphd
Source: gfxgraph
Version: $version
Architecture: $arch
Maintainer: $maint
Installed-Size: $(size "$P_D")
Depends: ${dep_D:+$dep_D, }systemd | systemd-standalone-sysusers | systemd-sysusers
Section: misc
Priority: optional
Description: GPU graph-replay daemon
 gfxgraphd records GPU command graphs from clients and replays them, with
 per-client quotas, over a Unix socket (socket-activated by systemd).
 This package has the daemon, gfxgraphctl, the systemd units (gfxgraphd.socket
 is enabled on install), the sysusers.d/tmpfiles.d snippets, the
 configuration file /etc/gfxgraph/gfxgraphd.conf, man pages and docs.
EOF
echo /etc/gfxgraph/gfxgraphd.conf >"$P_D/DEBIAN/conffiles"
for s in postinst prerm postrm; do
    install -m 0755 "$here/gfxgraphd.$s" "$P_D/DEBIAN/$s"
done

cat >"$P_L/DEBIAN/control" <<EOF
Package: libgfxgraph-client0
Source: gfxgraph
Version: $version
Architecture: $arch
Maintainer: $maint
Installed-Size: $(size "$P_L")
Depends: $dep_L
${ma_line:+$ma_line
}Section: libs
Priority: optional
Description: client library of the gfxgraph GPU graph-replay daemon
 libgfxgraph-client talks to gfxgraphd over its Unix socket: record and
 replay GPU graphs, query health and quotas.
EOF
echo "activate-noawait ldconfig" >"$P_L/DEBIAN/triggers"

cat >"$P_V/DEBIAN/control" <<EOF
Package: libgfxgraph-client-dev
Source: gfxgraph
Version: $version
Architecture: $arch
Maintainer: $maint
Installed-Size: $(size "$P_V")
Depends: libgfxgraph-client0 (= $version)
${ma_line:+$ma_line
}Section: libdevel
Priority: optional
Description: client library of the gfxgraph GPU graph-replay daemon (development files)
 The header gfxgraph/client.h, the libgfxgraph-client.so link, the
 pkg-config file gfxgraph-client.pc and the CMake package gfxgraph-client
 (target gfxgraph::gfxgraph-client).
EOF

# ---- md5sums, modes, build -------------------------------------------------
debs=()
for r in "$P_D" "$P_L" "$P_V"; do
    p=$(basename "$r")
    (cd "$r" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -print0 |
        sort -z | xargs -0r md5sum | sed 's|  \./|  |') >"$r/DEBIAN/md5sums"
    [ -s "$r/DEBIAN/md5sums" ] || rm -f "$r/DEBIAN/md5sums"
    chmod -R go-w "$r"
    find "$r/DEBIAN" -type f ! -name postinst ! -name prerm ! -name postrm -exec chmod 0644 {} +
    f=$out/${p}_${version}_${arch}.deb
    dpkg-deb --root-owner-group -Zxz --build "$r" "$f" >&2
    debs+=("$f")
done

if [ "${LINTIAN:-auto}" != no ] && command -v lintian >/dev/null; then
    log "lintian:"
    if ! lintian --tag-display-limit 0 "${debs[@]}" >&2; then
        [ -n "${LINTIAN_STRICT:-}" ] && { log "lintian reported errors"; exit 1; }
        log "lintian reported errors (LINTIAN_STRICT=1 makes them fatal)"
    fi
fi
printf '%s\n' "${debs[@]}"
