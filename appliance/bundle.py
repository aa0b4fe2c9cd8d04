"""Where the OTA bundle was before ``appliance/ota/`` (issue 34); it is ota/bundle.py.

Kept at its old path because releases from before ``appliance/ota/`` zip it into the boot-time updater
(appliance/update.py says what happens then).
"""

from appliance.ota.bundle import (
    BundleError,
    FileEntry,
    Manifest,
    extract_verified,
    load_private_key,
    load_public_keys,
    manifest_for,
    parse_version,
    read_manifest,
    verify_tree,
    write_bundle,
)

__all__ = [
    "BundleError",
    "FileEntry",
    "Manifest",
    "extract_verified",
    "load_private_key",
    "load_public_keys",
    "manifest_for",
    "parse_version",
    "read_manifest",
    "verify_tree",
    "write_bundle",
]
