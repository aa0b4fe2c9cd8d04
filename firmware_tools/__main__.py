"""`python -m firmware_tools keygen | version | bundle | verify | push | flash` (run on the laptop)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from appliance.errors import exit_for_people
from appliance.ota.bundle import read_manifest


def build_parser() -> argparse.ArgumentParser:
    """The host-side commands."""
    parser = argparse.ArgumentParser(prog="python -m firmware_tools", description=__doc__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    keygen = sub.add_parser("keygen", help="make the Ed25519 OTA signing key (ota.key, ota.pub)")
    keygen.add_argument("--dir", type=Path, default=Path("keys"), help="where (default: keys/, never committed)")
    keygen.add_argument("--force", action="store_true", help="replace an existing key")

    sub.add_parser("version", help="the version a bundle of this checkout gets")

    bundle = sub.add_parser("bundle", help="build and sign a bundle of this checkout")
    bundle.add_argument("--key", type=Path, default=Path("keys/ota.key"))
    bundle.add_argument("--arch", default="aarch64", help="the device's architecture (default aarch64)")
    bundle.add_argument("--wheels", type=Path, help="use these wheels instead of building them")
    bundle.add_argument("--tree", type=Path, help="bundle this directory instead of the checkout")
    bundle.add_argument("--version", help="override the version (default: pyproject version + commit count)")
    bundle.add_argument("--min-version", default="0", help="oldest installed version this bundle may update")
    bundle.add_argument("--install", nargs="+", help="the install command run in the new release")
    bundle.add_argument("--selftest", nargs="+", help="the self-test command run in the new release")
    bundle.add_argument("--allow-dirty", action="store_true", help="bundle uncommitted changes (testing)")
    bundle.add_argument(
        "--python", help="the device's Python: 3.13 (the Debian 13 image, the default) or 3.11 (the Debian 12 image)"
    )
    bundle.add_argument("--for-host", metavar="HOST", help="ask this device (as root over SSH) which Python it runs")
    bundle.add_argument("-o", "--out", type=Path, default=Path("build/ota"), help="file or directory")

    verify = sub.add_parser("verify", help="check a bundle's signature and every file's hash")
    verify.add_argument("bundle", type=Path)
    verify.add_argument("--pub", type=Path, default=Path("keys/ota.pub"))

    push = sub.add_parser("push", help="send a bundle over SSH and apply it on the device")
    push.add_argument("bundle", type=Path)
    push.add_argument("--host", required=True, help="e.g. picoagent.local")
    push.add_argument("--user", default="root")
    push.add_argument("--port", type=int)
    push.add_argument("-i", "--identity", type=Path, help="SSH private key")
    push.add_argument("-o", "--ssh-option", action="append", default=[], help="extra ssh -o options")
    push.add_argument("--picoagent", default=None, help="the device's picoagent program")
    push.add_argument("--force", action="store_true", help="allow a downgrade or re-install")
    push.add_argument("--apply-arg", action="append", default=[], help="extra arguments for `update apply`")

    flash = sub.add_parser("flash", help="write an image to an SD card (whole disk, e.g. /dev/sdb)")
    flash.add_argument("image", type=Path)
    flash.add_argument("device", type=Path)
    flash.add_argument("--yes", action="store_true", help="do not ask")
    return parser


def run(args: argparse.Namespace) -> int:
    """Run one command."""
    from firmware_tools import push as push_mod
    from firmware_tools import release

    if args.command == "keygen":
        private, public = release.keygen(args.dir, force=args.force)
        print(f"wrote {private} (secret: back it up, never commit it) and {public} (baked into images)")
    elif args.command == "version":
        print(release.version())
    elif args.command == "bundle":
        if args.out.suffix != ".bundle":
            args.out.mkdir(parents=True, exist_ok=True)
        python = args.python
        if args.for_host:
            python, glibc, name = push_mod.device_system(args.for_host)
            print(f"{args.for_host} runs Python {python} (glibc {glibc}) on {name}")
        path = release.build_bundle(
            args.out,
            args.key,
            arch=args.arch,
            wheels=args.wheels,
            tree=args.tree,
            version_text=args.version,
            min_version=args.min_version,
            install=args.install or release.INSTALL,
            selftest=args.selftest or release.SELFTEST,
            allow_dirty=args.allow_dirty,
            python=python,
        )
        print(f"{path} ({path.stat().st_size / 2**20:.1f} MB)")
    elif args.command == "verify":
        return _verify(args.bundle, args.pub)
    elif args.command == "push":
        extra = [*args.apply_arg, *(["--force"] if args.force else [])]
        return push_mod.push(
            args.bundle,
            args.host,
            user=args.user,
            port=args.port,
            identity=args.identity,
            ssh_options=args.ssh_option,
            picoagent=args.picoagent or push_mod.REMOTE_PICOAGENT,
            apply_args=extra,
        )
    elif args.command == "flash":
        push_mod.flash(args.image, args.device, yes=args.yes)
    return 0


def _verify(bundle: Path, pub: Path) -> int:
    """Extract into a temporary directory: the same check a device makes, signature then every hash."""
    import tempfile

    from appliance.ota.bundle import extract_verified, load_public_keys

    keys = load_public_keys([pub])
    manifest = read_manifest(bundle, keys)
    with tempfile.TemporaryDirectory(prefix="picoagent-verify-") as tmp:
        extract_verified(bundle, keys, Path(tmp))
    size = sum(f.size for f in manifest.files)
    print(
        f"{bundle}: signed by {pub}, version {manifest.version} for {manifest.arch}"
        f"{', ' + manifest.system() if manifest.python else ''} "
        f"(needs >= {manifest.min_version}), {len(manifest.files)} files, {size / 2**20:.1f} MB, all hashes match"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Expected failures print their message and fix, never a traceback."""
    args = build_parser().parse_args(argv)
    return exit_for_people(lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
