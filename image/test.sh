#!/bin/sh
# image/test.sh: `make image-test`. Boots a copy of the built image under qemu-system-aarch64 and checks
# that picoagent comes up by itself, configured from a picoagent-setup.yaml put on the boot partition.
#
# The `virt` machine (CPU: cortex-a76 unless CPU says otherwise -- the Pi 5's core; cortex-a72 is the Pi 4's,
# cortex-a53 the Pi 3's and Zero 2 W's; 2 cores; MEM MiB: 2048 unless MEM says otherwise -- MEM=512 is a Pi
# Zero 2 W or a 512 MB Pi 3 A+) with the image's own kernel and initrd: this tests the
# kernel, initramfs, root by label, systemd, first boot, the app and its network -- not the Pi's
# firmware boot path (qemu 7.2 has no Pi 4 or Pi 5 machine). The copy is 2 GiB bigger than the image, so
# first boot must grow the root partition and file system to fill it.
#
# Checks: /healthz answers over HTTPS (plain http:// redirected); /api/status with the setup file's API
# token reports the model; the journal has the certificate's fingerprint, never the web password; over SSH
# with the setup file's key: the services, the hostname, the secrets file's mode, the grown root, and
# the doctor finding the embedding model the image build converted; zram swap on; a local chat answered
# by the packaged model through POST /api/chat, with MemAvailable printed before and after it (at least
# MIN_AVAILABLE_MB, default 100, after it) and no OOM kill in the kernel log; after shutdown: no secret left
# anywhere in the FAT partition's bytes, the setup file rewritten; the boot files each board's firmware
# reads (the Pi 5's included), and in the booted system Debian 13, its Python, the kernel's drivers for the
# Pi 5's RP1 and the GPIO character device through lgpio as the picoagent user.
# EXPECT_MODEL=FILE.gguf (make image-test MODEL=...): /api/status must report that baked-in model.
# Then a real OTA update (bundle, push over SSH, switch, health) and a rollback; OTA=0 skips it.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
. "$HERE/common.sh"

OUTDIR=${BUILD_DIR:-$REPO/build/image}   # where make image left the kernel and initrd
case $OUTDIR in /*) ;; *) OUTDIR=$REPO/$OUTDIR ;; esac
IMAGE=${IMAGE:-$OUTDIR/picoagent-arm64.img}
case $IMAGE in /*) ;; *) IMAGE=$REPO/$IMAGE ;; esac
TIMEOUT=${TIMEOUT:-900}
MEM=${MEM:-2048}   # MiB of RAM for the guest
CPU=${CPU:-cortex-a76}   # the guest's CPU model: the Pi 5's Cortex-A76 by default
case $CPU in cortex-a53|cortex-a72|cortex-a76|neoverse-n1|max) ;; *) die "CPU=$CPU: one of cortex-a53, cortex-a72, cortex-a76" ;; esac
MIN_AVAILABLE_MB=${MIN_AVAILABLE_MB:-100}
CHAT_TIMEOUT=${CHAT_TIMEOUT:-900}   # one local reply under TCG emulation takes minutes
case $MEM in *[!0-9]*|'') die "MEM=$MEM: expected MiB of RAM, e.g. MEM=512" ;; esac
[ "$MEM" -ge 256 ] || die "MEM=$MEM: at least 256 MiB"
GROW_MB=2048
T=$OUTDIR/test
LOG=$T/serial.log
BOOT_OFFSET=$((8192 * 512))   # the boot partition starts at 4 MiB (image/build.sh)

need_tool qemu-system-aarch64 qemu-system-arm
need_tool mcopy mtools
need_tool ssh-keygen openssh-client
need_tool sfdisk fdisk
[ -f "$IMAGE" ] || die "$IMAGE is missing: run make image first"
[ -f "$OUTDIR/vmlinuz" ] && [ -f "$OUTDIR/initrd.img" ] || die "$OUTDIR/vmlinuz or initrd.img missing: run make image"

rm -rf "$T" && mkdir -p "$T"
QEMU_PID=
finish() {
    code=$?
    if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then kill "$QEMU_PID" 2>/dev/null || true; fi
    if [ "$code" != 0 ] && [ -f "$LOG" ]; then
        echo "---- last 60 lines of the serial log ($LOG) ----" >&2
        tail -n 60 "$LOG" >&2
    fi
}
trap finish EXIT
trap 'exit 130' INT TERM

say "test copy of $(basename "$IMAGE"), $GROW_MB MiB bigger"
cp --sparse=always "$IMAGE" "$T/disk.img"
truncate -s +${GROW_MB}M "$T/disk.img"
PART2_BEFORE=$(sfdisk -d "$T/disk.img" | sed -n 's/.*img2 : .*size= *\([0-9]*\).*/\1/p')

# The setup file a person would write: fresh secrets each run, so finding one later means a leak. The token's
# scope is devices: the test reads /api/status (read) and chats (chat), and a read token may not chat.
ssh-keygen -q -t ed25519 -N '' -C image-test -f "$T/id_ed25519"
PASSWORD=pw-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
TOKEN=pat_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
CLOUD_KEY=sk-ant-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
cat > "$T/picoagent-setup.yaml" <<EOF
# image-test's settings
hostname: picoagent-test
timezone: Europe/Berlin
ssh_authorized_keys:
  - $(cat "$T/id_ed25519.pub")
web_password: "$PASSWORD"
api_token: $TOKEN
api_token_scope: devices
anthropic_api_key: $CLOUD_KEY
EOF
mcopy -o -i "$T/disk.img@@$BOOT_OFFSET" "$T/picoagent-setup.yaml" ::picoagent-setup.yaml

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
HTTP_PORT=$(free_port)
SSH_PORT=$(free_port)
say "booting under qemu-system-aarch64 (virt, $CPU, 2 cores, $MEM MiB); serial log: $LOG"
START=$(date +%s)
qemu-system-aarch64 -M virt -cpu "$CPU" -smp 2 -m "$MEM" \
    -kernel "$OUTDIR/vmlinuz" -initrd "$OUTDIR/initrd.img" \
    -append "root=LABEL=RASPIROOT rw rootwait net.ifnames=0 console=ttyAMA0" \
    -drive if=none,id=disk,file="$T/disk.img",format=raw,cache=unsafe -device virtio-blk-pci,drive=disk \
    -netdev user,id=net,hostfwd=tcp:127.0.0.1:$HTTP_PORT-:8080,hostfwd=tcp:127.0.0.1:$SSH_PORT-:22 \
    -device virtio-net-pci,netdev=net,romfile= \
    -device virtio-rng-pci \
    -display none -monitor none -serial file:"$LOG" -no-reboot &
QEMU_PID=$!

SSH="ssh -i $T/id_ed25519 -p $SSH_PORT -o StrictHostKeyChecking=no -o UserKnownHostsFile=$T/known_hosts -o ConnectTimeout=20 -o BatchMode=yes root@127.0.0.1"
CERT=$T/web-cert.pem

# http GET URL [TOKEN]: prints the body; fails unless 200. The image serves HTTPS (web.tls: auto) with the
# certificate it made at its first start: fetched over SSH, it is the one certificate trusted here.
http() {
    python3 - "$CERT" "$@" <<'PY'
import ssl, sys, urllib.request
context = ssl.create_default_context(cafile=sys.argv[1])
req = urllib.request.Request(sys.argv[2])
if len(sys.argv) > 3:
    req.add_header("Authorization", "Bearer " + sys.argv[3])
with urllib.request.urlopen(req, timeout=10, context=context) as resp:
    sys.stdout.write(resp.read().decode())
PY
}

# chat MESSAGE: POST /api/chat with the setup file's API token, answered by the local model; prints the
# reply record (JSON).
chat() {
    python3 - "$CERT" "https://127.0.0.1:$HTTP_PORT/api/chat" "$TOKEN" "$1" "$CHAT_TIMEOUT" <<'PY'
import json, ssl, sys, urllib.request
context = ssl.create_default_context(cafile=sys.argv[1])
body = json.dumps({"message": sys.argv[4], "session": "image-test", "route": "local"}).encode()
req = urllib.request.Request(sys.argv[2], data=body, method="POST")
req.add_header("Authorization", "Bearer " + sys.argv[3])
req.add_header("Content-Type", "application/json")
with urllib.request.urlopen(req, timeout=float(sys.argv[5]), context=context) as resp:
    sys.stdout.write(resp.read().decode())
PY
}

# memory LABEL: MemAvailable and the rest of the guest's memory picture, one line; sets AVAILABLE_MB.
memory() {
    mem=$($SSH 'awk "/^(MemTotal|MemAvailable|SwapTotal|SwapFree):/ {printf \"%s %d \", \$1, \$2 / 1024}" /proc/meminfo
        printf "picoagent-RSS: %s" "$(ps -o rss= -C picoagent 2>/dev/null | awk "{s += \$1} END {printf \"%d\", s / 1024}")"') ||
        die "reading /proc/meminfo over SSH failed"
    AVAILABLE_MB=$(printf '%s' "$mem" | sed -n 's/.*MemAvailable: \([0-9]*\).*/\1/p')
    say "memory $1: $mem (MiB)"
}

say "waiting for https://127.0.0.1:$HTTP_PORT/healthz (up to $TIMEOUT s; emulated, so slow)"
while :; do
    if [ -s "$CERT" ] || { $SSH 'cat /var/lib/picoagent/tls/cert.pem' > "$CERT" 2>/dev/null || rm -f "$CERT"; }; then
        if [ -s "$CERT" ] && body=$(http "https://127.0.0.1:$HTTP_PORT/healthz" 2>/dev/null); then break; fi
    fi
    kill -0 "$QEMU_PID" 2>/dev/null || die "qemu exited before picoagent answered"
    [ $(( $(date +%s) - START )) -lt "$TIMEOUT" ] || die "no answer from /healthz after $TIMEOUT s"
    sleep 2
done
BOOT_S=$(( $(date +%s) - START ))
say "OK /healthz over HTTPS after $BOOT_S s (qemu start to HTTPS): $body"
redirect=$(python3 - "$HTTP_PORT" <<'PY'
import http.client, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
conn.request("GET", "/healthz")
resp = conn.getresponse()
print(resp.status, resp.getheader("Location"))
PY
)
[ "$redirect" = "308 https://127.0.0.1:$HTTP_PORT/healthz" ] || die "plain http:// was not redirected to https://: $redirect"
say "OK plain http:// redirected: $redirect"

status=$(http "https://127.0.0.1:$HTTP_PORT/api/status" "$TOKEN") || die "/api/status refused the setup file's API token"
MODEL=$(printf '%s' "$status" | python3 -c 'import json, sys; m = json.load(sys.stdin)["model"]; print(m["name"], m["path"])')
printf '%s' "$MODEL" | grep -qi gguf || die "/api/status reports no model file: $MODEL"
if [ -n "${EXPECT_MODEL:-}" ]; then
    printf '%s' "$MODEL" | grep -qF "/var/lib/picoagent/models/$(basename "$EXPECT_MODEL")" ||
        die "/api/status reports $MODEL, not the baked-in $(basename "$EXPECT_MODEL")"
fi
say "OK /api/status with the API token: model $MODEL"
if http "https://127.0.0.1:$HTTP_PORT/api/status" "pat_wrong_token_0123456789abcdef" >/dev/null 2>&1; then
    die "/api/status accepted a wrong token"
fi

say "over SSH as root with the setup file's key"
$SSH 'set -e
    echo "hostname: $(hostname)"
    test "$(hostname)" = picoagent-test
    for u in picoagent picoagent-firstboot ssh avahi-daemon systemd-networkd systemd-timesyncd; do
        printf "%s: %s\n" "$u" "$(systemctl is-active $u)"
    done
    systemctl is-active -q picoagent
    for u in picoagent-firstboot ssh avahi-daemon systemd-networkd systemd-timesyncd; do systemctl is-active -q $u; done
    if journalctl -b -q | grep -i "ordering cycle"; then exit 1; fi
    test "$(systemctl is-active picoagent-sandbox.socket)" = active
    echo "workspace: $(stat -c "%a %U:%G" /var/lib/picoagent/workspace); sandbox user: $(id picoagent-sandbox)"
    test "$(stat -c "%a %U:%G" /var/lib/picoagent/workspace)" = "2770 picoagent:picoagent-sandbox"
    test "$(stat -c "%a %U" /usr/local/lib/picoagent/updater.pyz)" = "644 root"
    test -z "$(find /opt/picoagent ! -user root -print -quit)"
    test -e /var/lib/picoagent-image/firstboot.done
    echo "secrets.env: $(stat -c "%a %U:%G" /etc/picoagent/secrets.env)"
    test "$(stat -c %a /etc/picoagent/secrets.env)" = 600
    grep -q "^ANTHROPIC_API_KEY=" /etc/picoagent/secrets.env
    echo "time zone: $(cat /etc/timezone)"
    echo "root file system: $(df -h --output=size / | tail -1)"
    echo "root password: $(passwd -S root | cut -d" " -f2) (L: locked)"
    test "$(passwd -S root | cut -d" " -f2)" = L
    echo "SSH host keys: $(ls /etc/ssh/ssh_host_*_key | wc -l)"
    echo "current: $(readlink /opt/picoagent/current); $(cat /opt/picoagent/current/.release.json)"
    echo "failed units: $(systemctl --failed --no-legend --plain | cut -d" " -f1 | tr "\n" " ")"
    doctor=$(runuser -u picoagent -- /opt/picoagent/current/.venv/bin/picoagent doctor 2>&1 || true)
    echo "$doctor" | grep "embeddings:"
    echo "$doctor" | grep -q "^\[ok  \] embeddings: minilm: .*all-MiniLM-L6-v2.Q8_0.gguf"
    test "$(systemctl is-failed picoagent-firstboot)" != failed
    # The shell tool through picoagent-sandbox.socket, as the daemon uses it: the service runs as its own
    # user, sees no host process, has the seccomp filter, cannot write SOUL.md, and shares what it writes.
    probe="id -u; ls /proc | grep -c \"^[0-9]\"; echo made > from-sandbox.txt; echo x >> SOUL.md || echo SOUL.md read-only; python3 -c \"import ctypes; libc = ctypes.CDLL(None, use_errno=True); print(\\\"bpf\\\", libc.syscall(280, 0, 0, 0), ctypes.get_errno())\""
    args=$(python3 -c "import json, sys; print(json.dumps({\"command\": sys.argv[1]}))" "$probe")
    shell=$(runuser -u picoagent -- /opt/picoagent/current/.venv/bin/picoagent tools run shell --args "$args")
    said=$(echo "$shell" | python3 -c "import json, sys; print(json.load(sys.stdin)[\"result\"])")
    echo "shell through the sandbox service: $(echo "$said" | tr "\n" " ")"
    test "$(echo "$said" | sed -n 2p)" = "$(id -u picoagent-sandbox)"
    test "$(echo "$said" | sed -n 3p)" -le 5
    echo "$said" | grep -qx "SOUL.md read-only"
    echo "$said" | grep -qx "bpf -1 1"
    test "$(runuser -u picoagent -- cat /var/lib/picoagent/workspace/from-sandbox.txt)" = made
    journalctl -b -q -u picoagent | grep "public key.s SHA-256 fingerprint"
    # Debian 13 with its Python for the venv, and one kernel for every board: the Pi 5 needs its RP1 drivers.
    . /etc/os-release; echo "system: $PRETTY_NAME, kernel $(uname -r), $(/opt/picoagent/current/.venv/bin/python --version)"
    test "$VERSION_ID" = 13
    /opt/picoagent/current/.venv/bin/python -c "import sys; assert sys.version_info[:2] == (3, 13), sys.version"
    found=""
    for m in rp1_pci clk-rp1 pinctrl-rp1 macb i2c-designware-platform spi-gpio sdhci-brcmstb dwc3 pcie-brcmstb \
        irq-bcm2712-mip pinctrl-brcmstb-bcm2712 gpio-brcmstb i2c-bcm2835 spi-bcm2835 brcmfmac; do
        if modinfo -n $m >/dev/null 2>&1; then found="$found $m"
        elif grep -q "/$m.ko" /lib/modules/$(uname -r)/modules.builtin; then found="$found $m(built-in)"
        else echo "no driver $m in the kernel"; exit 1; fi
    done
    echo "kernel drivers: the Pi 5 RP1 (rp1_pci clk-rp1 pinctrl-rp1), its Ethernet, I2C and SPI, the BCM2712 SD, USB, PCIe and MSI, the Pi 3/4 I2C and SPI, Wi-Fi:$found"
    # The GPIO character device through the image s lgpio (built for Python 3.13), as the daemon opens it:
    # virt has one gpiochip (a PL061), which the picoagent user (group gpio) may open.
    chips=$(cd /root && runuser -u picoagent -- /opt/picoagent/current/.venv/bin/python -c "
from appliance.hardware.gpiochip import list_chips, prepare_lgpio
prepare_lgpio()  # as the pin factory does: from an unwritable working directory, /root
import lgpio
chips = list_chips()
handle = lgpio.gpiochip_open(chips[0].number)
print(chips[0].describe(), \"lgpio:\", lgpio.gpio_get_chip_info(handle))
lgpio.gpiochip_close(handle)")
    echo "gpio as picoagent: $chips"
    echo "$doctor" | grep "^\[ok  \] board: "' || die "checks over SSH failed"
if $SSH "journalctl -b -q | grep -cF '$PASSWORD'" >/dev/null; then die "the web password is in the journal"; fi
say "OK the journal shows the certificate's fingerprint and never the web password"
ROOT_BYTES=$($SSH 'df -B1 --output=size / | tail -1' | tr -d ' ')
[ "$ROOT_BYTES" -gt $(( (GROW_MB + 200) * 1024 * 1024 )) ] || die "the root file system did not grow ($ROOT_BYTES bytes)"

# What runs, swap in RAM, and a local chat with the memory it leaves (a 512 MB board's budget).
say "running services: $($SSH 'systemctl list-units --type=service --state=running --no-legend --plain | cut -d" " -f1 | sed "s/\.service$//" | tr "\n" " "')"
swaps=$($SSH 'cat /proc/swaps; cat /sys/block/zram0/comp_algorithm 2>/dev/null || true')
printf '%s' "$swaps" | grep -q '^/dev/zram0 ' || die "no zram swap: $swaps"
say "OK zram swap: $(printf '%s' "$swaps" | awk '/^\/dev\/zram0/ {printf "%d MiB, priority %s", $3 / 1024, $5}'); algorithm $(printf '%s' "$swaps" | tail -1)"
memory "before the chat"
BEFORE_MB=$AVAILABLE_MB
CHAT_START=$(date +%s)
record=$(chat "Say hello in five words.") || die "POST /api/chat failed"
CHAT_S=$(( $(date +%s) - CHAT_START ))
reply=$(printf '%s' "$record" | python3 -c 'import json, sys
r = json.load(sys.stdin)
t = r["timings"]
assert r["route"] == "local" and r["text"].strip(), r
print("%s: %r (%d prompt tokens, first text after %.1f s, %.1f s in all)" % (
    r["model"], r["text"].strip()[:80], t["prompt_tokens"], t["ttft_s"], t["total_s"]))') ||
    die "the chat was not answered by the local model: $record"
say "OK local chat in $CHAT_S s: $reply"
memory "after the chat"
AFTER_MB=$AVAILABLE_MB
oom=$($SSH 'dmesg | grep -iE "out of memory|oom-kill|invoked oom-killer" || true')
[ -z "$oom" ] || die "the kernel's OOM killer ran: $oom"
[ -n "$AFTER_MB" ] && [ "$AFTER_MB" -ge "$MIN_AVAILABLE_MB" ] ||
    die "MemAvailable after the chat is ${AFTER_MB:-?} MiB at MEM=$MEM (at least $MIN_AVAILABLE_MB wanted)"
say "OK MemAvailable at MEM=$MEM: $BEFORE_MB MiB before the chat, $AFTER_MB MiB after it (at least $MIN_AVAILABLE_MB)"

# A real OTA update onto the booted image, the way `make ota` does it: a signed aarch64 bundle of this
# checkout (version bumped), pushed over SSH, installed, self-tested and switched on the device, which
# must then answer /healthz with the new version; then `picoagent update rollback` goes back. OTA=0 skips.
if [ "${OTA:-1}" = 1 ]; then
    OTA_KEY=${OTA_KEY:-$REPO/keys/ota.key}
    [ -f "$OTA_KEY" ] || die "$OTA_KEY is missing (the key whose ota.pub the image trusts)"
    OLD=$(http "https://127.0.0.1:$HTTP_PORT/healthz" | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
    NEW=$OLD.1
    say "OTA: bundling $NEW for aarch64 and pushing it over SSH"
    (cd "$REPO" && python3 -m firmware_tools bundle --arch aarch64 --key "$OTA_KEY" --version "$NEW" \
        --allow-dirty --out "$T/ota.bundle") >&2 || die "building the OTA bundle failed"
    OTA_START=$(date +%s)
    (cd "$REPO" && python3 -m firmware_tools push "$T/ota.bundle" --host 127.0.0.1 --port "$SSH_PORT" \
        -i "$T/id_ed25519" -o StrictHostKeyChecking=no -o UserKnownHostsFile="$T/known_hosts") >&2 ||
        die "the OTA update was refused or rolled back"
    OTA_S=$(( $(date +%s) - OTA_START ))
    now=$(http "https://127.0.0.1:$HTTP_PORT/healthz")
    printf '%s' "$now" | grep -qF "\"$NEW\"" || die "after the update /healthz says $now, not $NEW"
    say "OK OTA: $OLD -> $NEW in $OTA_S s (emulated: upload, verify, venv from wheels, self-test, restart)"
    $SSH '/opt/picoagent/current/.venv/bin/picoagent update check' >&2
    $SSH '/opt/picoagent/current/.venv/bin/picoagent update rollback' >&2 || die "update rollback failed"
    now=$(http "https://127.0.0.1:$HTTP_PORT/healthz")
    printf '%s' "$now" | grep -qF "\"$OLD\"" || die "after the rollback /healthz says $now, not $OLD"
    say "OK OTA: rolled back to $OLD by hand"
    rm -f "$T/ota.bundle"
fi

# Moving to this image from another Pi (README: "From the Debian 12 image to Debian 13"), steps 1 and 3 on
# this one: pack the state with the README's tar line, import it with picoagent-import-state; the API token,
# the chat history, the owners and the modes come through, and the daemon is healthy again.
say "state move: pack /var/lib/picoagent and /etc/picoagent as the README says, then picoagent-import-state"
count='/opt/picoagent/current/.venv/bin/python -c "import sqlite3; print(sqlite3.connect(\"file:/var/lib/picoagent/picoagent.db?mode=ro\", uri=True).execute(\"select count(*) from messages\").fetchone()[0])"'
MOVED=$($SSH "set -e; systemctl stop picoagent; $count; tar -C / --numeric-owner -czf /root/picoagent-state.tgz var/lib/picoagent etc/picoagent; systemctl start picoagent") ||
    die "packing the state failed"
$SSH 'picoagent-import-state /root/picoagent-state.tgz && rm /root/picoagent-state.tgz' >&2 || die "picoagent-import-state failed"
i=0
until http "https://127.0.0.1:$HTTP_PORT/healthz" >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 120 ] || die "no /healthz after the state was imported"; sleep 2
done
http "https://127.0.0.1:$HTTP_PORT/api/status" "$TOKEN" >/dev/null || die "the API token did not come through the move"
after=$($SSH "set -e; $count; stat -c '%a %U' /etc/picoagent/secrets.env /etc/picoagent; ls /var/lib/picoagent-replaced-*.tgz | wc -l")
[ "$(printf '%s\n' "$after" | sed -n 1p)" = "$MOVED" ] || die "the history did not come through the move: $MOVED messages before, $after"
printf '%s\n' "$after" | sed -n 2p | grep -qx '600 picoagent' || die "secrets.env after the move: $after"
printf '%s\n' "$after" | sed -n 3p | grep -qx '1770 root' || die "/etc/picoagent after the move: $after"
say "OK state move: $MOVED messages, the API token and the secrets (0600 picoagent) came through picoagent-import-state"

say "shutting down"
$SSH 'systemctl poweroff' >/dev/null 2>&1 || true
i=0
while kill -0 "$QEMU_PID" 2>/dev/null && [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done
kill -0 "$QEMU_PID" 2>/dev/null && { kill "$QEMU_PID"; sleep 1; }
QEMU_PID=

PART2_AFTER=$(sfdisk -d "$T/disk.img" | sed -n 's/.*img2 : .*size= *\([0-9]*\).*/\1/p')
[ "$PART2_AFTER" -gt "$PART2_BEFORE" ] || die "the root partition did not grow ($PART2_BEFORE sectors)"
say "OK root partition grew from $((PART2_BEFORE / 2048)) to $((PART2_AFTER / 2048)) MiB"

mtype -i "$T/disk.img@@$BOOT_OFFSET" ::picoagent-setup.yaml > "$T/setup-after.yaml"
grep -q "first boot applied this file" "$T/setup-after.yaml" || die "the setup file was not rewritten: $(cat "$T/setup-after.yaml")"
dd if="$T/disk.img" bs=1M skip=4 count=256 status=none > "$T/boot-partition.bin"
for secret in "$PASSWORD" "$TOKEN" "$CLOUD_KEY"; do
    if grep -qaF "$secret" "$T/boot-partition.bin"; then
        die "a secret from the setup file is still in the FAT partition's bytes"
    fi
done
say "OK no secret left in the boot partition"
# The Pi's boot files: root by label, SPI switched on in the Pi 4 and Pi 3 device trees; for the Pi 5
# (whose EEPROM bootloader reads this partition itself) config.txt's kernel and initramfs, its two device
# trees with I2C1 and SPI0 on the header.
mtype -i "$T/disk.img@@$BOOT_OFFSET" ::cmdline.txt | grep -q "root=LABEL=RASPIROOT" || die "cmdline.txt lacks root=LABEL=RASPIROOT"
need_tool fdtget device-tree-compiler
for dtb in bcm2711-rpi-4-b.dtb bcm2837-rpi-3-b.dtb bcm2712-rpi-5-b.dtb bcm2712d0-rpi-5-b.dtb; do
    mcopy -o -i "$T/disk.img@@$BOOT_OFFSET" "::$dtb" "$T/$dtb" || die "no $dtb on the boot partition"
done
for dtb in bcm2711-rpi-4-b.dtb bcm2837-rpi-3-b.dtb; do
    [ "$(fdtget "$T/$dtb" /soc/spi@7e204000 status)" = okay ] || die "SPI0 is off in $dtb"
done
RP1=/axi/pcie@1000120000/pci@0,0/dev@0,0/pci-ep-bus@1
for dtb in bcm2712-rpi-5-b.dtb bcm2712d0-rpi-5-b.dtb; do
    [ "$(fdtget "$T/$dtb" / model)" = "Raspberry Pi 5" ] || die "$dtb is not the Pi 5's tree"
    fdtget "$T/$dtb" "$RP1/pinctrl@400d0000" compatible | grep -q raspberrypi,rp1-gpio || die "$dtb has no RP1 GPIO"
    [ "$(fdtget "$T/$dtb" "$RP1/i2c@40074000" status)" = okay ] || die "I2C1 is off in $dtb"
    [ "$(fdtget "$T/$dtb" /picoagent-spi0 compatible)" = spi-gpio ] || die "SPI0 is off in $dtb"
done
mtype -i "$T/disk.img@@$BOOT_OFFSET" ::config.txt > "$T/config.txt"
KERNEL_FILE=$(sed -n 's/^kernel=//p' "$T/config.txt")
INITRD_FILE=$(sed -n 's/^initramfs \([^ ]*\).*/\1/p' "$T/config.txt")
for f in "$KERNEL_FILE" "$INITRD_FILE"; do
    [ -n "$f" ] && mdir -i "$T/disk.img@@$BOOT_OFFSET" "::$f" >/dev/null 2>&1 || die "config.txt names $f, which is not on the boot partition"
done
grep -qx '\[pi5\]' "$T/config.txt" && grep -qx 'arm_64bit=1' "$T/config.txt" || die "config.txt lacks its [pi5] section or arm_64bit"
say "OK the Pi 5's boot files: config.txt (kernel=$KERNEL_FILE, initramfs $INITRD_FILE, [pi5]), bcm2712-rpi-5-b.dtb and bcm2712d0-rpi-5-b.dtb with I2C1 and SPI0 on the header"
say "OK cmdline.txt roots by label; SPI0 on in the Pi 4 and Pi 3 device trees; the setup file now reads:"
sed 's/^/    /' "$T/setup-after.yaml" >&2
rm -f "$T/boot-partition.bin" "$T/disk.img"

echo "image-test: PASS -- $(basename "$IMAGE") booted to HTTP in $BOOT_S s under qemu (virt, $CPU, TCG, $MEM MiB); MemAvailable $BEFORE_MB MiB before a local chat, $AFTER_MB MiB after"
echo "$BOOT_S" > "$OUTDIR/boot-seconds"
