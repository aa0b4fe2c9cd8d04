"""Memory: one SQLite file (WAL, one writer) holding conversations, memories and their recall (vectors + FTS5)."""
