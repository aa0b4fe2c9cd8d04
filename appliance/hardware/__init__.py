"""Hardware: buses, backends and named devices (see DESIGN.md; arrives with issue 4)."""
