"""The agent: one turn (loop), its prompt (context) and where it is served (router)."""
