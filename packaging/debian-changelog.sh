#!/bin/sh
# SPDX-License-Identifier: MIT
# packaging/debian-changelog.sh [SOURCE_DIR]: writes SOURCE_DIR/debian/changelog
# for the version of project(gfxgraph VERSION ...) in CMakeLists.txt, the
# project's one version number (the library, the Python package and the
# Debian packages all take it from there; debian/changelog is not kept in
# git).  The date is the last commit's (SOURCE_DATE_EPOCH when set), so the
# same tree gives the same packages.
set -eu
src=${1:-$(cd "$(dirname "$0")/.." && pwd)}
version=$(sed -nE 's/^project\(gfxgraph VERSION ([0-9][0-9.]*).*/\1/p' "$src/CMakeLists.txt")
[ -n "$version" ] || { echo "debian-changelog.sh: no project(gfxgraph VERSION ...) in $src/CMakeLists.txt" >&2; exit 1; }
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct 2>/dev/null || date +%s)}
cat >"$src/debian/changelog" <<CHANGELOG
gfxgraph ($version) unstable; urgency=medium

  * gfxgraph $version.

 -- gfxgraph maintainers <maintainers@gfxgraph.org>  $(LC_ALL=C date -R -u -d "@$epoch")
CHANGELOG
