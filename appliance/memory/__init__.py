"""Memory: one SQLite file (WAL, one writer) holding conversations and, later, recall."""
