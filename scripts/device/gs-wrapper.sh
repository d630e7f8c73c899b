#!/usr/bin/env bash
# Ghostscript 10.00.0 (Debian bookworm 10.0.0~dfsg-11+deb12u9 + the libraries it links,
# all but glibc/libstdc++/libgcc) for a machine without Ghostscript. The tree travels
# packed as ../root.tar.xz (14 MiB instead of 49) and is unpacked once, on first use, to
# /tmp/folio-gs-<id>/root (never under $TMPDIR: folio points that at a per-call temp dir);
# an unpacked ../root beside bin/ is used as is. Prints nothing of its own, so
# `gs --version` stays clean.
set -u
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
if [ -x "$here/root/usr/bin/gs" ]; then
  R="$here/root"
else
  tarball="$here/root.tar.xz"
  dest="${FOLIO_GS_ROOT:-/tmp/folio-gs-10.0.0-deb12u9-$(stat -c %s "$tarball")}"
  R="$dest/root"
  if [ ! -x "$R/usr/bin/gs" ]; then
    mkdir -p "$dest" || exit 127
    tmp=$(mktemp -d "$dest/.unpack.XXXXXX") || exit 127
    if ! tar -xJf "$tarball" -C "$tmp" 2>/dev/null; then
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$tarball" "$tmp" >&2 || { rm -rf "$tmp"; echo "gs wrapper: cannot unpack $tarball" >&2; exit 127; }
    fi
    # atomic: concurrent first calls race here, the loser drops its copy
    mv -T "$tmp" "$R" 2>/dev/null || rm -rf "$tmp"
  fi
fi
G="$R/usr/share/ghostscript/10.00.0"
# bundled libraries first (only this process sees them)
export LD_LIBRARY_PATH="$R/usr/lib/x86_64-linux-gnu:$R/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GS_LIB="$G/Resource/Init:$G/lib:$G/Resource/Font:$R/usr/share/fonts/type1/urw-base35${GS_LIB:+:$GS_LIB}"
# the resource and ICC profile dirs are compiled in as /usr/share/ghostscript/...: point them here
export GS_OPTIONS="-sGenericResourceDir=$G/Resource/ -sICCProfilesDir=$G/iccprofiles/${GS_OPTIONS:+ $GS_OPTIONS}"
# fontconfig: the bundled config only where the machine has none
if [ ! -e /etc/fonts/fonts.conf ] && [ -z "${FONTCONFIG_FILE:-}" ]; then
  export FONTCONFIG_FILE="$R/etc/fonts/fonts.conf" FONTCONFIG_PATH="$R/etc/fonts"
fi
exec "$R/usr/bin/gs" "$@"
