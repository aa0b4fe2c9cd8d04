#!/bin/sh
# image/rootfs.sh OUT.tar: the base arm64 root file system of the image (Debian 13 + image/packages.txt),
# built with mmdebstrap under qemu-user, as a tarball. image/build.sh caches it under build/image/ keyed
# by the package list and this script, so only a change to either pays the ~15 minutes again.
#
# Initramfs updates are turned off while packages install (each mkinitramfs under emulation takes
# minutes, and the kernel and its triggers would run it twice); build.sh runs it once, at the end.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"

OUT=${1:?usage: image/rootfs.sh OUT.tar}
SUITE=${SUITE:-trixie}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${SECURITY:-http://deb.debian.org/debian-security}

need_root
need_tool mmdebstrap mmdebstrap
need_tool qemu-aarch64-static qemu-user-static
need_tool update-binfmts binfmt-support
need_tool arch-test arch-test

trap 'binfmt_undo; rm -f "$OUT.part"' EXIT
trap 'exit 130' INT TERM
binfmt_setup

PACKAGES=$(package_list "$HERE/packages.txt" | tr '\n' ',' | sed 's/,$//')
COMPONENTS="main non-free-firmware"   # firmware-brcm80211 and raspi-firmware live in non-free-firmware
# Backports: the kernel (packages.txt asks for linux-image-arm64/SUITE-backports, the one with the Pi 5's RP1
# drivers). Backports are NotAutomatic: nothing else comes from there unless named; the kernel, once from
# there, is upgraded from there (ButAutomaticUpgrades).

say "mmdebstrap $SUITE arm64 (under qemu-user: ~15 minutes)"
mmdebstrap --arch=arm64 --variant=minbase --format=tar \
    --aptopt='APT::Install-Recommends "false"' \
    --essential-hook='chroot "$1" dpkg-divert --quiet --local --rename --add /usr/sbin/update-initramfs' \
    --essential-hook='printf "#!/bin/sh\necho update-initramfs: deferred by the image build >&2\n" > "$1/usr/sbin/update-initramfs"; chmod 755 "$1/usr/sbin/update-initramfs"' \
    --customize-hook='rm -f "$1/usr/sbin/update-initramfs"; chroot "$1" dpkg-divert --quiet --local --rename --remove /usr/sbin/update-initramfs' \
    --customize-hook='chroot "$1" apt-get clean' \
    --include="$PACKAGES" \
    "$SUITE" "$OUT.part" \
    "deb $MIRROR $SUITE $COMPONENTS" \
    "deb $MIRROR $SUITE-updates $COMPONENTS" \
    "deb $SECURITY $SUITE-security $COMPONENTS" \
    "deb $MIRROR $SUITE-backports $COMPONENTS"
mv "$OUT.part" "$OUT"
say "base root file system: $OUT ($(du -h "$OUT" | cut -f1))"
