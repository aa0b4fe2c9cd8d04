# Shared by the image scripts (sourced): messages, root and tool checks, binfmt for arm64 under qemu-user.
# shellcheck shell=sh

say() { echo "image: $*" >&2; }
die() { echo "image: error: $*" >&2; exit 1; }

need_root() {
    [ "$(id -u)" = 0 ] || die "run as root (sudo make image): it chroots into the arm64 root file system"
}

# need_tool COMMAND DEBIAN-PACKAGE
need_tool() {
    command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ] ||
        die "$1 is missing: apt-get install $2"
}

# Running arm64 programs (the chroot's dpkg, python3) needs binfmt_misc with qemu-aarch64-static.
# There is no systemd here to set it up, so do it by hand and remember what to undo.
BINFMT_MOUNTED=
BINFMT_ENABLED=
binfmt_setup() {
    if [ "$(uname -m)" = aarch64 ]; then return 0; fi
    # qemu-user emulates its "max" CPU by default, with pointer authentication, which Debian 13 builds every
    # program with (-mbranch-protection) and qemu 7.2 computes slowly: Python ran 11x slower here (11.5 s
    # against 1.05 s). A Cortex-A72 has no pointer authentication (those instructions are NOPs there) and
    # runs every arm64 program the image carries. in_root (build.sh) passes it into the chroot.
    export QEMU_CPU="${QEMU_CPU:-cortex-a72}"
    if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || die "cannot mount binfmt_misc"
        BINFMT_MOUNTED=1
    fi
    if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
        update-binfmts --enable qemu-aarch64 || die "update-binfmts --enable qemu-aarch64 failed (apt-get install qemu-user-static binfmt-support)"
        BINFMT_ENABLED=1
    fi
}

binfmt_undo() {
    if [ -n "$BINFMT_ENABLED" ]; then update-binfmts --disable qemu-aarch64 >/dev/null 2>&1 || true; BINFMT_ENABLED=; fi
    if [ -n "$BINFMT_MOUNTED" ]; then umount /proc/sys/fs/binfmt_misc 2>/dev/null || true; BINFMT_MOUNTED=; fi
}

# The package list without comments, one name a line, sorted (what the cache key hashes).
package_list() {
    sed 's/#.*//' "$1" | tr -s ' \t' '\n\n' | sed '/^$/d' | sort -u
}
