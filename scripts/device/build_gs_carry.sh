#!/usr/bin/env bash
# Builds .gs-carry/ (git-ignored): Ghostscript for the GPU machine, which has none.
# Debian bookworm's ghostscript and every library it links except glibc/libstdc++/libgcc,
# extracted with dpkg -x and packed as root.tar.xz (about 14 MiB; one device call carries
# 64 MiB), plus bin/gs, a wrapper that unpacks it once to /tmp and points Ghostscript's
# library, resource and font paths there. Run here (apt reaches Debian's packages), then
# carry .gs-carry and put .gs-carry/bin first on PATH (bench/gpu_user_path_device.sh does).
set -euo pipefail
cd "$(dirname "$0")/../.."
pkgs="ghostscript libgs10 libgs10-common libgs-common fonts-urw-base35 fontconfig-config
libavahi-client3 libavahi-common3 libbrotli1 libbsd0 libcap2 libcom-err2 libcups2 libdbus-1-3
libdeflate0 libexpat1 libffi8 libfontconfig1 libfreetype6 libgcrypt20 libgmp10 libgnutls30
libgpg-error0 libgssapi-krb5-2 libhogweed6 libice6 libidn12 libidn2-0 libijs-0.35 libjbig0
libjbig2dec0 libjpeg62-turbo libk5crypto3 libkeyutils1 libkrb5-3 libkrb5support0 liblcms2-2
liblerc4 liblz4-1 liblzma5 libmd0 libnettle8 libopenjp2-7 libp11-kit0 libpaper1 libpng16-16
libsm6 libsystemd0 libtasn1-6 libtiff6 libunistring2 libuuid1 libwebp7 libx11-6 libxau6
libxcb1 libxdmcp6 libxt6 libzstd1 zlib1g"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
apt-get update -qq
(cd "$work" && apt-get download -qq $pkgs)
mkdir -p "$work/root"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
rm -rf "$work/root/usr/share/doc" "$work/root/usr/share/man" "$work/root/usr/share/lintian"
rm -rf .gs-carry && mkdir -p .gs-carry/bin
tar -cJf .gs-carry/root.tar.xz -C "$work/root" .
install -m 755 scripts/device/gs-wrapper.sh .gs-carry/bin/gs
FOLIO_GS_ROOT="$work/check" .gs-carry/bin/gs --version
du -sh .gs-carry
