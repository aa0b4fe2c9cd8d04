#!/bin/sh
# image/lgpio-wheel.sh REQUIREMENT OUTDIR: an aarch64 wheel of lgpio (gpiozero's pin factory for the
# GPIO character device: the Pi 5's RP1 as well as the Pi 3/4's header) for CPython $PYTHON_VERSION, when
# PyPI has none (its wheels stop at cp312; Debian 13 has no python3-lgpio). Called by image/wheelhouse.sh.
#
# lgpio's source archive carries the C library and a SWIG interface: SWIG writes the wrapper, Debian's
# aarch64-linux-gnu-gcc compiles library and wrapper into one extension (statically, as lgpio's own PyPI
# wheels are built), against the headers of the target Python taken from Debian's libpythonX.Y-dev for
# arm64 ($DEB_SUITE). Cached in $CACHE by version and Python; the image build imports it under qemu-user.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"

REQ=${1:?usage: image/lgpio-wheel.sh REQUIREMENT OUTDIR}
OUT=${2:?usage: image/lgpio-wheel.sh REQUIREMENT OUTDIR}
: "${CACHE:?}" "${PYTHON_VERSION:?}" "${PIP:?}" "${HOSTPY:?}"
DEB_SUITE=${DEB_SUITE:-}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
[ -n "$DEB_SUITE" ] || die "no Debian suite is known for Python $PYTHON_VERSION: cannot build lgpio for it"
need_tool swig swig
need_tool aarch64-linux-gnu-gcc crossbuild-essential-arm64
ABI=cp$(echo "$PYTHON_VERSION" | tr -d .)
EXT=_lgpio.cpython-${ABI#cp}-aarch64-linux-gnu.so   # the file name CPython imports

WORK=$CACHE/lgpio-$ABI
if ls "$WORK"/lgpio-*-"$ABI"-"$ABI"-linux_aarch64.whl >/dev/null 2>&1; then
    cp "$WORK"/lgpio-*-"$ABI"-"$ABI"-linux_aarch64.whl "$OUT/"
    say "pi extra: lgpio for $ABI aarch64 (built here before, cached)"
    exit 0
fi
say "pi extra: lgpio has no $ABI aarch64 wheel on PyPI: building it from source (SWIG + cross gcc)"
rm -rf "$WORK.part" && mkdir -p "$WORK.part" && cd "$WORK.part"

# 1. The source archive.
"$PIP" download -q --no-deps --no-binary=:all: --dest . "$REQ" 2>/dev/null || die "cannot download $REQ's source"
tar -xzf lgpio-*.tar.gz
SRC=$(ls -d lgpio-*/ | head -1)
VERSION=$(basename "$SRC" | sed 's/^lgpio-//')

# 2. The target Python's headers: Debian's libpythonX.Y-dev for arm64 (Python.h and the arch's pyconfig.h).
DEV=libpython$PYTHON_VERSION-dev
"$HOSTPY" - "$MIRROR" "$DEB_SUITE" "$DEV" > deb-url <<'PY' || die "cannot find $DEV (arm64) in Debian $DEB_SUITE"
import lzma, sys, urllib.request
mirror, suite, name = sys.argv[1:]
index = lzma.decompress(urllib.request.urlopen(f"{mirror}/dists/{suite}/main/binary-arm64/Packages.xz").read())
for stanza in index.decode().split("\n\n"):
    fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
    if fields.get("Package") == name:
        print(f"{mirror}/{fields['Filename']}")
        break
else:
    sys.exit(1)
PY
"$HOSTPY" -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], "dev.deb")' "$(cat deb-url)"
dpkg-deb -x dev.deb headers
INC=headers/usr/include/python$PYTHON_VERSION
PLATINC=headers/usr/include/aarch64-linux-gnu/python$PYTHON_VERSION
[ -f "$INC/Python.h" ] && [ -f "$PLATINC/pyconfig.h" ] || die "$DEV has no Python.h/pyconfig.h"

# 3. Wrapper and extension (the sources setup.py names with PYPI=1: every lg*.c, rgpiod.c, the wrapper).
cd "$SRC"
swig -python -Isrc lgpio.i
aarch64-linux-gnu-gcc -shared -fPIC -O2 -pthread -Isrc -I"../$INC" -I../headers/usr/include \
    src/lg*.c src/rgpiod.c lgpio_wrap.c -lrt -ldl -o "$EXT" 2> ../gcc.log ||
    { tail -20 ../gcc.log >&2; die "compiling lgpio for $ABI aarch64 failed (log: $WORK.part/gcc.log)"; }
file -b "$EXT" | grep -q 'ARM aarch64' || die "lgpio's extension is not aarch64 code"

# 4. The wheel: lgpio.py (SWIG's module), the extension, and its metadata; `wheel pack` writes RECORD.
cd ..
PKG=pkg/lgpio-$VERSION
INFO=$PKG/lgpio-$VERSION.dist-info
mkdir -p "$INFO"
cp "$SRC/lgpio.py" "$SRC/$EXT" "$PKG/"
printf 'Metadata-Version: 2.1\nName: lgpio\nVersion: %s\nSummary: Linux SBC GPIO module (built by picoagent for %s aarch64)\nLicense: Unlicense\n' \
    "$VERSION" "$ABI" > "$INFO/METADATA"
printf 'Wheel-Version: 1.0\nGenerator: picoagent image/lgpio-wheel.sh\nRoot-Is-Purelib: false\nTag: %s-%s-linux_aarch64\n' \
    "$ABI" "$ABI" > "$INFO/WHEEL"
echo lgpio > "$INFO/top_level.txt"
"$(dirname "$PIP")/wheel" pack --dest-dir . "$PKG" >/dev/null
ls lgpio-"$VERSION"-"$ABI"-"$ABI"-linux_aarch64.whl >/dev/null || die "wheel pack made no lgpio wheel"
mkdir -p "$WORK.done" && mv lgpio-*.whl "$WORK.done/"
cd / && rm -rf "$WORK" "$WORK.part" && mv "$WORK.done" "$WORK"
cp "$WORK"/lgpio-*.whl "$OUT/"
say "pi extra: lgpio $VERSION built for $ABI aarch64: $(ls "$WORK"/*.whl)"
