"""Device drivers: one small module per part. See base.py for what a driver is."""
