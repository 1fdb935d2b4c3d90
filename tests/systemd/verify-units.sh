#!/bin/bash
# SPDX-License-Identifier: MIT
# systemd-analyze verify on every unit, offline (no running systemd needed):
# the project is installed with prefix /usr into a temporary root next to
# copies of this host's system units, and verify runs with --root on it, so
# ExecStart= is checked against the installed /usr/sbin/gfxgraphd.
#
# A unit passes only when verify exits 0 AND prints nothing: systemd reports
# unknown keys and unparsable values as warnings with exit status 0.  The
# test then breaks a copy of the unit in several ways and checks that each
# breakage is caught, so it cannot pass vacuously.  It also applies the
# sysusers.d and tmpfiles.d snippets to the root and checks the result.
. "$(dirname "$0")/lib.sh"
gg_need systemd-analyze cmake
gg_mktemp
R=$gg_tmp/root
U=/usr/lib/systemd/system
gg_check "install into a unit root" gg_make_unit_root "$R" || gg_summary

# verify_unit NAME: clean verify of NAME (a file in $R$U or an instance).
verify_unit() {
    local out rc
    out=$(cd "$R" && systemd-analyze verify --root="$R" "$U/$1" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] || [ -n "$out" ]; then
        echo "    systemd-analyze verify $1 (exit $rc):"
        sed 's/^/      /' <<<"$out"
        return 1
    fi
}

for u in gfxgraphd.socket gfxgraphd.service gfxgraphd@.socket gfxgraphd@.service; do
    gg_check "$u is installed" test -f "$R$U/$u"
done
for u in gfxgraphd.service gfxgraphd.socket gfxgraphd@0.service gfxgraphd@0.socket \
         gfxgraphd@1.service gfxgraphd@1.socket; do
    gg_check "systemd-analyze verify $u: clean" verify_unit "$u"
done

# The template instance: socket path and device index follow the instance.
unit_prop() { grep -E "^$2=" "$R$U/$1" | sed "s/^$2=//"; }
gg_check "gfxgraphd@.socket listens on /run/gfxgraph/gfxgraphd-%i.sock" \
    test "$(unit_prop gfxgraphd@.socket ListenStream)" = /run/gfxgraph/gfxgraphd-%i.sock
gg_check "gfxgraphd@.service passes --set device=%i and its socket" \
    grep -qE '^ExecStart=/usr/sbin/gfxgraphd .*--socket /run/gfxgraph/gfxgraphd-%i.sock --set device=%i$' \
    "$R$U/gfxgraphd@.service"
gg_check "gfxgraphd.service is Type=notify with a watchdog" \
    test "$(unit_prop gfxgraphd.service Type)/$(unit_prop gfxgraphd.service WatchdogSec)" = notify/20s
gg_check "bad settings (exit 2) are not retried" \
    test "$(unit_prop gfxgraphd.service RestartPreventExitStatus)" = 2

# Break a copy of the unit in ways a person might, and expect each caught.
cp "$R$U/gfxgraphd.service" "$gg_tmp/good.service"
broken() {
    local desc=$1 expr=$2
    sed -e "$expr" "$gg_tmp/good.service" >"$R$U/gfxgraphd.service"
    if cmp -s "$gg_tmp/good.service" "$R$U/gfxgraphd.service"; then
        gg_nok "self-check: the edit for '$desc' changed nothing"
    elif verify_unit gfxgraphd.service >/dev/null; then
        gg_nok "self-check: a unit with $desc passes verify"
    else
        gg_ok "self-check: a unit with $desc is caught"
    fi
}
broken "a misspelt key" 's/^Type=notify$/Typ=notify/'
broken "a bad value" 's/^Restart=on-failure$/Restart=sometimes/'
broken "a missing binary" 's#^ExecStart=/usr/sbin/gfxgraphd #ExecStart=/usr/sbin/gfxgraphd-nope #'
broken "a missing dependency" 's/^Requires=gfxgraphd.socket$/Requires=gfxgraphd-nope.socket/'
broken "a bad user name" 's/^User=gfxgraph$/User=gfx:graph/'
broken "an unknown section" 's/^\[Service\]$/[Servce]/'
cp "$gg_tmp/good.service" "$R$U/gfxgraphd.service"
gg_check "the restored unit verifies clean again" verify_unit gfxgraphd.service

# sysusers.d / tmpfiles.d snippets, applied to the root.
if command -v systemd-sysusers >/dev/null && command -v systemd-tmpfiles >/dev/null; then
    out=$(systemd-sysusers --root="$R" 2>&1)
    gg_check "systemd-sysusers --root applies the snippet" test $? -eq 0
    echo "$out" | sed 's/^/    /'
    gg_check "system user gfxgraph with nologin" \
        grep -qE '^gfxgraph:x:[0-9]+:[0-9]+:[^:]*:[^:]*:.*nologin$' "$R/etc/passwd"
    uid=$(awk -F: '$1 == "gfxgraph" { print $3 }' "$R/etc/passwd")
    gg_check "gfxgraph is a system user (uid $uid < 1000)" test "${uid:-99999}" -lt 1000
    gg_check "gfxgraph is in group render" grep -qE '^render:[^:]*:[0-9]+:(.*,)?gfxgraph(,|$)' "$R/etc/group"
    gg_check "gfxgraph is in group video" grep -qE '^video:[^:]*:[0-9]+:(.*,)?gfxgraph(,|$)' "$R/etc/group"
    if [ "$(id -u)" = 0 ]; then
        gg_check "systemd-tmpfiles --root creates /run/gfxgraph" \
            systemd-tmpfiles --root="$R" --create "$R/usr/lib/tmpfiles.d/gfxgraph.conf"
        gg_check "/run/gfxgraph is 0750 gfxgraph:gfxgraph" \
            test "$(stat -c '%a %u %g' "$R/run/gfxgraph" 2>/dev/null)" = \
                 "750 $uid $(awk -F: '$1 == "gfxgraph" { print $3 }' "$R/etc/group")"
    else
        echo "# not root: the tmpfiles.d snippet is not applied (it chowns to gfxgraph)"
    fi
else
    echo "# systemd-sysusers / systemd-tmpfiles not found: snippets not applied"
fi
gg_summary
