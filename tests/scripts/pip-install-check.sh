#!/bin/bash
# SPDX-License-Identifier: MIT
# pip-install-check.sh SOURCE_DIR VERSION LIBRARY: `pip install ./python`
# with no index (what a machine without network does) into a fresh venv:
#  1. the venv is made without pip (python3 -m venv --without-pip) and the
#     system's pip installs into it (pip --python), from the in-tree build
#     backend only;
#  2. the venv's python imports gfxgraph from the venv (not the source
#     tree), with __version__ = VERSION and the metadata, py.typed and the
#     torch_dynamo_backends entry point installed;
#  3. without GFXGRAPH_LIB and with no library installed where it looks,
#     the first use fails with ELIBACC naming what to install; with
#     GFXGRAPH_LIB=LIBRARY it loads that library.
# Exit 77 (skipped) without python3's venv module or pip.
set -uo pipefail
src=${1:?source dir}
version=${2:?version}
lib=${3:?library}
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "SKIP: no python3"; exit 77; }
"$py" -c 'import venv' 2>/dev/null || { echo "SKIP: $py has no venv module"; exit 77; }
"$py" -m pip --version >/dev/null 2>&1 || { echo "SKIP: $py has no pip (Debian: python3-pip)"; exit 77; }

t=$(mktemp -d "${TMPDIR:-/tmp}/gg-pip.XXXXXX")
trap 'rm -rf "$t"' EXIT
fail=0
check() { if "${@:2}"; then echo "ok - $1"; else echo "not ok - $1"; fail=1; fi; }

# the source is copied: pip builds in place and must not write into the tree
cp -r "$src/python" "$t/python"
cp "$src/CMakeLists.txt" "$src/LICENSE" "$t/"
find "$t/python" -name __pycache__ -prune -exec rm -rf {} + -o -name _build_info.py -delete

"$py" -m venv --without-pip "$t/venv"
vpy=$t/venv/bin/python
install() {
    PIP_CONFIG_FILE=/dev/null "$py" -m pip --python "$vpy" install --no-index \
        --disable-pip-version-check --no-cache-dir "$t/python" >"$t/pip.log" 2>&1 ||
        { cat "$t/pip.log"; return 1; }
}
check "pip install --no-index ./python into a fresh venv" install
grep -E "Successfully (built|installed)" "$t/pip.log"

# run in the venv from a directory that has no gfxgraph of its own
cd "$t"
out=$(env -u GFXGRAPH_LIB -u PYTHONPATH "$vpy" -c '
import os, sys, gfxgraph
from importlib import metadata
d = metadata.distribution("gfxgraph")
eps = [e.name for e in d.entry_points if e.group == "torch_dynamo_backends"]
print("file", os.path.realpath(gfxgraph.__file__))
print("prefix", os.path.realpath(sys.prefix))
print("version", gfxgraph.__version__, d.version)
print("license", d.metadata["License"])
print("typed", os.path.isfile(os.path.join(os.path.dirname(gfxgraph.__file__), "py.typed")))
print("entry", ",".join(eps))
' 2>&1)
echo "$out"
field() { sed -n "s/^$1 //p" <<<"$out"; }
prefix=$(field prefix)
check "imported from the venv, not the source tree" \
    eval '[ -n "$prefix" ] && [[ "$(field file)" == "$prefix"/lib/python3*/site-packages/gfxgraph/__init__.py ]]'
check "__version__ and the metadata: $version" test "$(field version)" = "$version $version"
check "License: MIT" test "$(field license)" = MIT
check "py.typed installed" test "$(field typed)" = True
check "torch_dynamo_backends entry point gfxgraph" test "$(field entry)" = gfxgraph

# 3: the library.  The system may have one installed (a Debian package, make
# install): then "not found" cannot be shown, only that it loads.
noenv=$(env -u GFXGRAPH_LIB -u PYTHONPATH "$vpy" -c '
import gfxgraph
try:
    print("loaded", gfxgraph.library_path())
except gfxgraph.Error as e:
    print("error", e.code, str(e))
' 2>&1)
echo "$noenv"
case $noenv in
    "error ELIBACC"*)
        check "no library: ELIBACC says to install libgfxgraph-client0 or set GFXGRAPH_LIB" \
            eval 'grep -q "libgfxgraph-client0" <<<"$noenv" && grep -q "GFXGRAPH_LIB=" <<<"$noenv"' ;;
    "loaded "*) echo "# a libgfxgraph-client is installed on this machine: ${noenv#loaded }" ;;
    *) check "first use without GFXGRAPH_LIB: loaded or ELIBACC" false ;;
esac
withenv=$(GFXGRAPH_LIB=$lib env -u PYTHONPATH "$vpy" -c '
import gfxgraph
print(gfxgraph.library_path())
c = gfxgraph.Client.__name__
' 2>&1)
check "GFXGRAPH_LIB=$lib: that library loads ($withenv)" test "$withenv" = "$lib"
exit $fail
