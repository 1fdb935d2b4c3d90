# SPDX-License-Identifier: MIT
# Shared by the tests in tests/systemd/ (sourced, bash).
#
# Environment (set by tests/cmake/systemd.cmake):
#   GG_SOURCE_DIR GG_BUILD_DIR GFXGRAPHD GFXGRAPHCTL GG_SD_HELPER
#
# Each test counts its checks and ends with gg_summary, which prints
# "N passed, M failed" and exits 1 when a check failed.  gg_skip exits 77
# (ctest reports the test as skipped).

set -u
for _v in GG_SOURCE_DIR GG_BUILD_DIR GFXGRAPHD GFXGRAPHCTL GG_SD_HELPER; do
    if [ -z "${!_v:-}" ]; then
        echo "$_v is not set: run this test through ctest (tests/cmake/systemd.cmake)" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
done
gg_pass=0
gg_fail=0
gg_tmp=""

gg_ok()  { echo "ok - $*"; gg_pass=$((gg_pass + 1)); }
gg_nok() { echo "not ok - $*"; gg_fail=$((gg_fail + 1)); }

# gg_check DESCRIPTION COMMAND...: one check, passed when COMMAND succeeds.
gg_check() {
    local desc=$1
    shift
    if "$@"; then gg_ok "$desc"; else gg_nok "$desc"; fi
}

# gg_helper DESC COMMAND...: run a program that prints "ok - ..." /
# "not ok - ..." lines (gg_sd_helper) and fold its checks in.  A helper that
# fails without saying which check failed, or says nothing, is a failure too.
gg_helper() {
    local desc=$1 out rc np nf
    shift
    out=$("$@" 2>&1)
    rc=$?
    gg_helper_out=$out
    echo "$out"
    np=$(grep -c '^ok - ' <<<"$out")
    nf=$(grep -c '^not ok - ' <<<"$out")
    gg_pass=$((gg_pass + np))
    gg_fail=$((gg_fail + nf))
    if [ "$rc" -ne 0 ] && [ "$nf" -eq 0 ]; then
        gg_nok "$desc: exit status $rc"
    elif [ "$np" -eq 0 ] && [ "$nf" -eq 0 ]; then
        gg_nok "$desc: no checks ran"
    fi
}

gg_summary() {
    echo "$gg_pass passed, $gg_fail failed"
    [ "$gg_fail" -eq 0 ] && [ "$gg_pass" -gt 0 ]
    exit $?
}

gg_skip() {
    echo "SKIP: $*"
    echo "$gg_pass passed, $gg_fail failed"
    exit 77
}

gg_need() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || gg_skip "$c not found"
    done
}

# A private temporary directory, removed on exit (short: socket paths must
# fit in 108 bytes).
gg_mktemp() {
    gg_tmp=$(mktemp -d "${TMPDIR:-/tmp}/ggsd.XXXXXX")
    trap 'gg_cleanup' EXIT
}
gg_cleanup_hooks=()
gg_cleanup() {
    local h
    for h in "${gg_cleanup_hooks[@]+"${gg_cleanup_hooks[@]}"}"; do eval "$h" || true; done
    [ -n "$gg_tmp" ] && rm -rf "$gg_tmp"
}

# gg_install ROOT PREFIX: cmake --install of the build tree into DESTDIR=ROOT.
gg_install() {
    local root=$1 prefix=$2
    if ! DESTDIR="$root" cmake --install "$GG_BUILD_DIR" --prefix "$prefix" >"$root.install.log" 2>&1; then
        cat "$root.install.log"
        return 1
    fi
}

# gg_make_unit_root ROOT: an offline root for systemd-analyze --root: the
# project installed with prefix /usr, plus copies of this host's system units
# (sysinit.target and friends, which the units depend on).
gg_make_unit_root() {
    local root=$1 d
    gg_install "$root" /usr || return 1
    mkdir -p "$root/usr/lib/systemd/system"
    for d in /usr/lib/systemd/system /lib/systemd/system; do
        [ -d "$d" ] && cp -rn "$d/." "$root/usr/lib/systemd/system/" 2>/dev/null
    done
    # ExecReload=/bin/kill: verify checks that it is there
    if [ ! -e "$root/bin/kill" ] && [ -x /bin/kill ]; then
        mkdir -p "$root/bin" && cp /bin/kill "$root/bin/kill"
    fi
    [ -e "$root/usr/lib/systemd/system/sysinit.target" ]
}

# Wait until PATH is a socket (at most ~60 s: a sanitizer build on a busy
# machine starts slowly).
gg_wait_socket() {
    local i
    for i in $(seq 1 1200); do
        [ -S "$1" ] && return 0
        sleep 0.05
    done
    return 1
}

# Is PID (a child of this shell) still running?  A zombie is not.
gg_running() {
    local st
    st=$(sed -E 's/.*\) (.).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

# Wait for PID (a child of this shell) to exit, at most SECS s (default 20;
# then SIGKILL and return 1); its exit status in gg_wait_rc.
gg_wait_pid() {
    local pid=$1 secs=${2:-20} i r=0
    for i in $(seq 1 $((secs * 20))); do
        gg_running "$pid" || break
        sleep 0.05
    done
    if gg_running "$pid"; then
        kill -KILL "$pid" 2>/dev/null
        r=1
    fi
    wait "$pid" 2>/dev/null
    gg_wait_rc=$?
    return $r
}
