"""Host-side tools: keys, OTA bundles, pushing to a device, flashing an image (issue 9)."""
