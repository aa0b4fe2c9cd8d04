"""The image's first boot (image/files/firstboot.py) against a root directory in a temporary folder.

No qemu: `make image-test` boots the real image. Here every setting is applied to a fake root, and the
commands that would act on a running Pi (picoagent passwd/tokens, growpart) are only logged.
"""

from __future__ import annotations

import importlib.util
import shutil
import stat
from pathlib import Path

import pytest
import yaml

SCRIPT = Path(__file__).resolve().parent.parent / "image" / "files" / "firstboot.py"
TEMPLATE = SCRIPT.parent / "picoagent-setup.yaml"


def _load():
    spec = importlib.util.spec_from_file_location("picoagent_firstboot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


firstboot = _load()

SECRETS = {
    "web_password": "correct horse battery",
    "api_token": "pat_" + "x" * 30,
    "anthropic_api_key": "sk-ant-secret-123",
    "wifi_password": "wifi-secret-456",
    "bot_token": "123456:telegram-secret",
}


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    (tmp_path / "etc/picoagent").mkdir(parents=True)
    (tmp_path / "etc/ssh").mkdir(parents=True)
    (tmp_path / "etc/group").write_text("root:x:0:\npicoagent:x:999:\n")
    (tmp_path / "etc/hosts").write_text("127.0.0.1\tlocalhost\n127.0.1.1\tpicoagent\n")
    (tmp_path / "etc/picoagent/picoagent.yaml").write_text(
        "data_dir: /var/lib/picoagent\nsecrets_file: secrets.env\nhardware:\n  backend: real\ndevices: {}\n"
    )
    zone = tmp_path / "usr/share/zoneinfo/Europe/Berlin"
    zone.parent.mkdir(parents=True)
    zone.write_bytes(b"TZif2")
    (tmp_path / "boot/firmware").mkdir(parents=True)
    return tmp_path


def _setup(root: Path, text: str) -> Path:
    path = root / "boot/firmware/picoagent-setup.yaml"
    path.write_text(text)
    return path


FULL = f"""
hostname: Kitchen-Pi
timezone: Europe/Berlin
wifi:
  ssid: "Home net"
  password: "{SECRETS["wifi_password"]}"
  country: de
ssh_authorized_keys:
  - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeyKeyKey me@laptop
web_password: "{SECRETS["web_password"]}"
api_token: {SECRETS["api_token"]}
api_token_scope: devices
telegram:
  bot_token: "{SECRETS["bot_token"]}"
  owner_id: 4242
anthropic_api_key: {SECRETS["anthropic_api_key"]}
"""


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen (openssh-client)")
def test_full_setup_is_applied_and_the_secrets_leave_the_boot_partition(root: Path, capsys) -> None:
    setup = _setup(root, FULL)
    assert firstboot.main(["--root", str(root)]) == 0

    assert (root / "etc/hostname").read_text() == "kitchen-pi\n"
    assert "127.0.1.1\tkitchen-pi" in (root / "etc/hosts").read_text()
    assert (root / "etc/localtime").readlink() == Path("/usr/share/zoneinfo/Europe/Berlin")
    auth = root / "root/.ssh/authorized_keys"
    assert "me@laptop" in auth.read_text() and stat.S_IMODE(auth.stat().st_mode) == 0o600

    wpa = root / "etc/wpa_supplicant/wpa_supplicant-wlan0.conf"
    assert stat.S_IMODE(wpa.stat().st_mode) == 0o600
    assert "country=DE" in wpa.read_text() and "ssid=" + b"Home net".hex() in wpa.read_text()
    assert SECRETS["wifi_password"] not in wpa.read_text()  # only the derived WPA key

    secrets = root / "etc/picoagent/secrets.env"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    text = secrets.read_text()
    assert f"TELEGRAM_BOT_TOKEN={SECRETS['bot_token']}" in text
    assert f"ANTHROPIC_API_KEY={SECRETS['anthropic_api_key']}" in text

    config = yaml.safe_load((root / "etc/picoagent/picoagent.yaml").read_text())
    assert config["telegram"] == {"enabled": True, "token": "${TELEGRAM_BOT_TOKEN}", "allow_from": [4242]}
    assert config["providers"]["claude"]["api_key"] == "${ANTHROPIC_API_KEY}"
    assert config["hardware"] == {"backend": "real"}  # what was there stays

    out = capsys.readouterr().out
    assert "picoagent passwd --stdin" in out and "tokens add setup --stdin --scope devices" in out
    assert SECRETS["web_password"] not in out and SECRETS["api_token"] not in out

    after = setup.read_text()
    for value in SECRETS.values():
        assert value not in after
    rewritten = yaml.safe_load(after)
    assert rewritten["hostname"] == "Kitchen-Pi" and rewritten["wifi"] == {"ssid": "Home net", "country": "de"}
    assert "first boot applied this file" in after

    assert list((root / "etc/ssh").glob("ssh_host_*_key"))
    assert (root / "var/lib/picoagent-image/firstboot.done").exists()


def test_no_setup_file_still_makes_host_keys_and_the_marker(root: Path) -> None:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("needs ssh-keygen")
    assert firstboot.main(["--root", str(root)]) == 0
    assert list((root / "etc/ssh").glob("ssh_host_ed25519_key"))
    assert (root / "var/lib/picoagent-image/firstboot.done").exists()


def test_the_shipped_template_applies_cleanly(root: Path) -> None:
    """The commented template on a fresh card: only the hostname and model: auto are set."""
    _setup(root, TEMPLATE.read_text())
    (root / "etc/ssh/ssh_host_ed25519_key").write_text("already there")
    assert firstboot.main(["--root", str(root)]) == 0
    assert (root / "etc/hostname").read_text() == "picoagent\n"
    assert yaml.safe_load((root / "etc/picoagent/picoagent.yaml").read_text())["llm"] == {"model": "auto"}
    assert not (root / "etc/picoagent/secrets.env").exists()
    # No web_password: the notes on the card say where the page is and how to get the one the Pi makes.
    notes = (root / "boot/firmware/picoagent-setup.yaml").read_text()
    assert "# done: web page https://picoagent.local:8080" in notes and "passwd --show-initial" in notes


def test_model_auto_or_a_catalog_chat_model_becomes_llm_model(root: Path) -> None:
    """model: goes into llm.model (the daemon downloads it); what else llm: held stays."""
    (root / "etc/ssh/ssh_host_ed25519_key").write_text("already there")
    config = root / "etc/picoagent/picoagent.yaml"
    config.write_text(config.read_text() + "llm:\n  model: ''\n  context_tokens: 2048\n")
    setup = _setup(root, "model: qwen2.5-1.5b\n")
    assert firstboot.main(["--root", str(root)]) == 0
    assert yaml.safe_load(config.read_text())["llm"] == {"model": "qwen2.5-1.5b", "context_tokens": 2048}
    assert "# done: model qwen2.5-1.5b (Qwen2.5 1.5B Instruct" in setup.read_text()

    (root / "var/lib/picoagent-image/firstboot.done").unlink()
    config.write_text("llm:\n  model: ''\n")
    _setup(root, "model: auto\n")
    assert firstboot.main(["--root", str(root)]) == 0
    assert yaml.safe_load(config.read_text())["llm"] == {"model": "auto"}


def test_an_unknown_or_embedding_model_is_an_error_on_the_card_and_the_packaged_model_stays(root: Path) -> None:
    (root / "etc/ssh/ssh_host_ed25519_key").write_text("already there")
    config = root / "etc/picoagent/picoagent.yaml"
    before = config.read_text()
    setup = _setup(root, "model: gpt-9-ultra\n")
    assert firstboot.main(["--root", str(root)]) == 1
    notes = setup.read_text()
    assert "# ERROR: model 'gpt-9-ultra' is not a chat model of the catalog: kept the packaged model" in notes
    assert "qwen2.5-0.5b" in notes and "minilm" not in notes.split("ERROR: model", 1)[1]  # chat models only
    assert config.read_text() == before
    (root / "var/lib/picoagent-image/firstboot.done").unlink()
    _setup(root, "model: minilm\n")  # an embedding model cannot chat
    assert firstboot.main(["--root", str(root)]) == 1
    assert "llm" not in yaml.safe_load(config.read_text())


def test_model_auto_keeps_a_model_built_into_the_image(root: Path) -> None:
    """`make image MODEL=...` set llm.model to its file: the template's model: auto does not replace it."""
    (root / "etc/ssh/ssh_host_ed25519_key").write_text("already there")
    config = root / "etc/picoagent/picoagent.yaml"
    config.write_text("llm:\n  model: /var/lib/picoagent/models/mine.gguf\n")
    setup = _setup(root, TEMPLATE.read_text())
    assert firstboot.main(["--root", str(root)]) == 0
    assert yaml.safe_load(config.read_text())["llm"]["model"] == "/var/lib/picoagent/models/mine.gguf"
    assert "kept /var/lib/picoagent/models/mine.gguf" in setup.read_text()


def test_the_catalog_is_read_from_the_release_on_the_card(root: Path) -> None:
    release = root / firstboot.CATALOG
    release.parent.mkdir(parents=True)
    release.write_text('{"models": [{"name": "only-this", "title": "Only", "kind": "chat"}]}')
    boot = firstboot.FirstBoot(root, root / "boot/firmware", live=False)
    assert boot.model("only-this") == "only-this" and boot.model("qwen2.5-1.5b") is None


def test_bad_values_are_reported_on_the_card_and_secrets_still_wiped(root: Path) -> None:
    (root / "etc/ssh/ssh_host_ed25519_key").write_text("already there")
    setup = _setup(
        root,
        "hostname: 'not a host!'\ntimezone: Mars/Olympus\nwifi: {ssid: x, password: short}\n"
        f"web_password: {SECRETS['web_password']}\nbogus: 1\n",
    )
    assert firstboot.main(["--root", str(root)]) == 1
    after = setup.read_text()
    assert SECRETS["web_password"] not in after
    assert "# ERROR: hostname" in after and "# ERROR: time zone" in after and "# ERROR: wifi password" in after
    assert "unknown settings ignored: bogus" in after
    assert not (root / "etc/wpa_supplicant/wpa_supplicant-wlan0.conf").exists()
    assert (root / "var/lib/picoagent-image/firstboot.done").exists()


def test_invalid_yaml_is_left_for_the_person_to_fix(root: Path) -> None:
    _setup(root, "wifi: [unclosed\n")
    with pytest.raises(SystemExit, match="not valid YAML"):
        firstboot.main(["--root", str(root)])
    assert not (root / "var/lib/picoagent-image/firstboot.done").exists()


def test_overwrite_in_place_leaves_no_old_bytes(root: Path) -> None:
    """The secret's bytes are overwritten where they were before the file is rewritten (same clusters on FAT)."""
    (root / "etc/ssh/ssh_host_ed25519_key").write_text("already there")
    setup = _setup(root, f"web_password: {SECRETS['web_password']}\n" + "# padding\n" * 200)
    writes: list[bytes] = []
    real_open = open

    def spy(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        if str(path) == str(setup) and "+" in mode:
            original = handle.write

            def write(data):
                writes.append(bytes(data))
                return original(data)

            handle.write = write
        return handle

    firstboot.open = spy  # the module's global open (builtins untouched)
    try:
        firstboot.main(["--root", str(root)])
    finally:
        del firstboot.open
    assert writes and set(writes[0]) == {ord("#")}
    assert SECRETS["web_password"] not in setup.read_text()


def test_a_failure_while_applying_still_wipes_the_secrets_and_is_reported(root: Path, capsys) -> None:
    """Applying stops half-way (here: the Pi's config is not valid YAML, so it cannot be merged into):
    the secrets must leave the card all the same, and the failure must be on the card and in the log."""
    (root / "etc/ssh/ssh_host_ed25519_key").write_text("already there")
    (root / "etc/picoagent/picoagent.yaml").write_text("data_dir: [unclosed\n")
    setup = _setup(root, FULL)
    try:
        code: object = firstboot.main(["--root", str(root)])
    except Exception as exc:  # what today's code does: the error escapes before the wipe
        code = exc
    after = setup.read_text()
    for value in SECRETS.values():
        assert value not in after
    assert code == 1
    assert "# ERROR: applying the settings stopped" in after
    assert "set them on the Pi itself" in after  # the header no longer says everything moved to the Pi
    assert "error: applying the settings stopped" in capsys.readouterr().err
    assert (root / "var/lib/picoagent-image/firstboot.done").exists()


def test_the_image_config_loads_and_serves_https(tmp_path: Path) -> None:
    """/etc/picoagent/picoagent.yaml as image/build.sh writes it: valid, web.tls auto, the 512 MB margin."""
    from appliance.config import load_config

    build = (SCRIPT.parent.parent / "build.sh").read_text()
    heredoc = build.split('cat > "$ROOT/etc/picoagent/picoagent.yaml" <<YAML\n', 1)[1].split("\nYAML\n", 1)[0]
    text = heredoc.replace("$LLM_MODEL", '""').replace("\\`", "`")
    assert "$" not in text, "the heredoc expands a variable this test does not know"
    path = tmp_path / "picoagent.yaml"
    path.write_text(text)
    config = load_config(path, environ={})
    assert config.web.tls == "auto" and config.hardware.backend == "real" and config.devices == {}
    assert config.llm.memory_margin_mb == 64  # the packaged model loads on a 512 MB board (image/README.md)


def test_a_setup_code_becomes_the_one_time_password_of_the_page_setup(root: Path, capsys) -> None:
    """setup_code: the first sign-in's password (picoagent passwd --initial); the owner's own comes in the page."""
    setup = _setup(root, 'setup_code: "only-mine-42"\n')
    assert firstboot.main(["--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "picoagent passwd --initial" in out and "only-mine-42" not in out
    assert "only-mine-42" not in setup.read_text()
    assert "your setup_code; the page's setup follows" in setup.read_text()
