#!/bin/bash
# SPDX-License-Identifier: MIT
# The man pages: installed by cmake --install under share/man, each renders
# with `man -l` (skipped without man-db) and groff finds nothing to warn
# about (skipped without groff); the docs are installed under share/doc.
. "$GG_SOURCE_DIR/tests/systemd/lib.sh"
command -v man >/dev/null || command -v groff >/dev/null || gg_skip "neither man nor groff found"
gg_mktemp
D=$gg_tmp/dest
gg_check "cmake --install --prefix /usr" gg_install "$D" /usr || gg_summary
for p in man8/gfxgraphd.8:GFXGRAPHD man1/gfxgraphctl.1:GFXGRAPHCTL \
         man1/gfxgraph-exporter.1:GFXGRAPH-EXPORTER man5/gfxgraphd.conf.5:GFXGRAPHD.CONF; do
    f=$D/usr/share/man/${p%%:*}
    title=${p##*:}
    gg_check "installed: ${f#$D}" test -f "$f"
    if command -v man >/dev/null && command -v nroff >/dev/null; then
        out=$(MANWIDTH=80 man -l "$f" 2>"$gg_tmp/man.err")
        gg_check "man -l ${p%%:*}: renders the title" grep -q "^$title(" <<<"$out"
        gg_check "man -l ${p%%:*}: NAME, SYNOPSIS, SEE ALSO" \
            eval 'grep -q "^NAME" <<<"$out" && grep -q "^SYNOPSIS" <<<"$out" && grep -q "^SEE ALSO" <<<"$out"'
        gg_check "man -l ${p%%:*}: no warnings" test ! -s "$gg_tmp/man.err"
        cat "$gg_tmp/man.err"
    else
        echo "skip - man or nroff not found: man -l not run for ${p%%:*}"
    fi
    if command -v groff >/dev/null; then
        w=$(groff -man -ww -z -Tutf8 "$f" 2>&1)
        gg_check "groff -ww ${p%%:*}: no warnings" test -z "$w"
        echo "$w"
    fi
done
# every key the daemon knows is in gfxgraphd.conf(5)
keys=$("$GFXGRAPHD" --print-config --config /dev/null | awk '!/^#/ {print $1}')
for k in $keys; do
    gg_check "gfxgraphd.conf(5) documents $k" grep -q "^\.B ${k//-/\\\\-}\$" "$D/usr/share/man/man5/gfxgraphd.conf.5"
done
for d in PROTOCOL.md ops.md operations.md configuration.md; do
    gg_check "installed: /usr/share/doc/gfxgraph/$d" test -f "$D/usr/share/doc/gfxgraph/$d"
done
gg_summary
