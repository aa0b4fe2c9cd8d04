"""Hardware: buses, backends, drivers and named devices (see DESIGN.md)."""
