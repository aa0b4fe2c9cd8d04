"""The database's schema, as a list of small migrations (simonw/llm's way): each runs once, in order.

``PRAGMA user_version`` counts the migrations a file has had; :class:`appliance.memory.db.Database` runs
the missing ones in one transaction each at open. A migration never changes: a new need is a new one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from appliance.memory.schema import dedupe_key


def _script(db: sqlite3.Connection, sql: str) -> None:
    """Run several statements inside the caller's transaction (executescript would commit first)."""
    pending = ""
    for piece in sql.split(";"):
        pending += piece + ";"
        # A trigger body holds semicolons of its own: run only what SQLite calls a complete statement.
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                db.execute(pending)
            pending = ""


def _m1_conversations(db: sqlite3.Connection) -> None:
    _script(
        db,
        """
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            channel TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            closed_at REAL
        );
        CREATE INDEX conversations_open ON conversations (channel, chat_id) WHERE closed_at IS NULL;
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations (id),
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            content TEXT NOT NULL,
            created_at REAL NOT NULL,
            route TEXT,
            meta TEXT
        );
        CREATE INDEX messages_conversation ON messages (conversation_id, id);
        """,
    )


def _m2_web_auth(db: sqlite3.Connection) -> None:
    # The web face's owner password (settings), login sessions and API tokens; secrets stored only hashed.
    _script(
        db,
        """
        CREATE TABLE settings (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE web_sessions (
            id_hash TEXT PRIMARY KEY,
            csrf TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL
        );
        CREATE TABLE api_tokens (
            id INTEGER PRIMARY KEY,
            name TEXT UNIQUE NOT NULL,
            token_hash TEXT UNIQUE NOT NULL,
            created_at REAL NOT NULL,
            last_used_at REAL
        );
        """,
    )


def _m3_hardware(db: sqlite3.Connection) -> None:
    _script(
        db,
        """
        CREATE TABLE approvals (
            id TEXT PRIMARY KEY,
            device TEXT NOT NULL,
            value TEXT NOT NULL,
            requested_by TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'failed')),
            decided_by TEXT,
            decided_at REAL,
            result TEXT
        );
        CREATE INDEX approvals_pending ON approvals (status, expires_at);
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            at REAL NOT NULL,
            kind TEXT NOT NULL,
            device TEXT,
            message TEXT NOT NULL,
            data TEXT
        );
        CREATE INDEX events_at ON events (at)
        """,
    )


def _m4_telegram_scheduler_tasks(db: sqlite3.Connection) -> None:
    _script(
        db,
        """
        CREATE TABLE outbox (
            id INTEGER PRIMARY KEY,
            channel TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            text TEXT NOT NULL,
            kind TEXT NOT NULL,
            created_at REAL NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'failed')),
            sent_at REAL,
            remote_id TEXT,
            last_error TEXT
        );
        CREATE INDEX outbox_due ON outbox (status, next_attempt_at);
        CREATE TABLE telegram_users (
            user_id INTEGER PRIMARY KEY,
            name TEXT,
            paired_at REAL NOT NULL
        );
        CREATE TABLE telegram_pairing (
            code_hash TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            used_by INTEGER,
            used_at REAL
        );
        CREATE TABLE schedule_runs (
            job_id TEXT PRIMARY KEY,
            last_run_at REAL,
            last_result TEXT,
            last_ok INTEGER
        );
        CREATE TABLE tasks (
            id INTEGER PRIMARY KEY,
            goal TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'error', 'paused')),
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            steps_done INTEGER NOT NULL DEFAULT 0,
            result TEXT,
            error TEXT
        );
        CREATE TABLE task_steps (
            id INTEGER PRIMARY KEY,
            task_id INTEGER NOT NULL REFERENCES tasks (id),
            n INTEGER NOT NULL,
            at REAL NOT NULL,
            kind TEXT NOT NULL,
            content TEXT NOT NULL,
            UNIQUE (task_id, n)
        )
        """,
    )


def _m5_memories(db: sqlite3.Connection) -> None:
    # The vec0 table is made by the memory store once it knows the embedding width (it depends on the model).
    _script(
        db,
        """
        CREATE TABLE memories (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('fact', 'summary')),
            text TEXT NOT NULL,
            source TEXT NOT NULL,
            created_at REAL NOT NULL,
            importance REAL NOT NULL DEFAULT 0.5,
            conversation_id INTEGER,
            embedded_with TEXT
        );
        CREATE VIRTUAL TABLE memories_fts USING fts5(text, content='memories', content_rowid='id');
        CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text);
        END;
        CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END;
        CREATE TRIGGER memories_au AFTER UPDATE OF text ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
            INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text);
        END;
        CREATE TABLE memory_progress (
            conversation_id INTEGER PRIMARY KEY,
            extracted_through INTEGER NOT NULL DEFAULT 0,
            summarised_through INTEGER NOT NULL DEFAULT 0
        )
        """,
    )


def _m6_usage(db: sqlite3.Connection) -> None:
    _script(
        db,
        """
        CREATE TABLE usage (
            day TEXT NOT NULL,
            route TEXT NOT NULL,
            model TEXT NOT NULL,
            turns INTEGER NOT NULL DEFAULT 0,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (day, route, model)
        )
        """,
    )


def _m7_routing(db: sqlite3.Connection) -> None:
    # Usage gains the provider ("local" for the Pi's model) and the cost; routing decisions are counted by
    # their codes; private chats (per channel and chat, surviving /reset) never leave the Pi.
    _script(
        db,
        """
        ALTER TABLE usage RENAME TO usage_m6;
        CREATE TABLE usage (
            day TEXT NOT NULL,
            route TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            turns INTEGER NOT NULL DEFAULT 0,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL NOT NULL DEFAULT 0,
            PRIMARY KEY (day, route, provider, model)
        );
        INSERT INTO usage (day, route, provider, model, turns, prompt_tokens, completion_tokens)
            SELECT day, route, 'local', model, turns, prompt_tokens, completion_tokens FROM usage_m6;
        DROP TABLE usage_m6;
        CREATE TABLE routing_log (
            day TEXT NOT NULL,
            route TEXT NOT NULL,
            why TEXT NOT NULL,
            blocked TEXT NOT NULL,
            turns INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (day, route, why, blocked)
        );
        CREATE TABLE private_chats (
            channel TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            since REAL NOT NULL,
            PRIMARY KEY (channel, chat_id)
        );
        """,
    )


def _m8_embedding_cache(db: sqlite3.Connection) -> None:
    # Vectors of fixed texts (device profiles, tool descriptions) by embedding model, so that a
    # one-shot command does not embed them all again: ~0.6 s with MiniLM on one core.
    _script(
        db,
        """
        CREATE TABLE embedding_cache (
            model TEXT NOT NULL,
            text TEXT NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (model, text)
        ) WITHOUT ROWID
        """,
    )


def _m9_token_scopes(db: sqlite3.Connection) -> None:
    # What each API token may do (appliance/channels/web/scopes.py). Tokens made before scopes existed
    # could do everything, and programs rely on that: they keep it (admin) until their owner narrows them.
    # New rows name their scope; the column's default is the narrowest, never admin.
    _script(
        db,
        """
        ALTER TABLE api_tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'chat'
            CHECK (scope IN ('chat', 'read', 'devices', 'admin'));
        UPDATE api_tokens SET scope = 'admin';
        """,
    )


def _m10_memory_store(db: sqlite3.Connection) -> None:
    # The memory store's bookkeeping (appliance/memory/schema.py says what each part is for). The store
    # made it itself when it opened, before this migration: a file it opened has it, hence IF NOT EXISTS.
    # Its vec0 tables stay with the store, which makes them once it knows the embedding model's width.
    had_keys = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_keys'").fetchone() is not None
    _script(
        db,
        """
        CREATE TABLE IF NOT EXISTS memory_meta (key TEXT PRIMARY KEY, value);
        INSERT OR IGNORE INTO memory_meta (key, value) VALUES ('generation', 0), ('deletions', 0);
        CREATE TABLE IF NOT EXISTS memory_keys (key BLOB PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS memory_keys_id ON memory_keys (id);
        CREATE TRIGGER IF NOT EXISTS memory_keys_ad AFTER DELETE ON memories BEGIN
            DELETE FROM memory_keys WHERE id = old.id;
        END;
        CREATE INDEX IF NOT EXISTS memories_embedded_with ON memories (embedded_with);
        CREATE TRIGGER IF NOT EXISTS memories_generation_ai AFTER INSERT ON memories BEGIN
            UPDATE memory_meta SET value = value + 1 WHERE key IN ('generation');
        END;
        CREATE TRIGGER IF NOT EXISTS memories_generation_ad AFTER DELETE ON memories BEGIN
            UPDATE memory_meta SET value = value + 1 WHERE key IN ('generation', 'deletions');
        END;
        CREATE TRIGGER IF NOT EXISTS memories_generation_au AFTER UPDATE ON memories BEGIN
            UPDATE memory_meta SET value = value + 1 WHERE key IN ('generation');
        END;
        """,
    )
    if not had_keys:  # memories written before the store's tables existed get their dedupe keys once
        rows = db.execute("SELECT id, kind, text FROM memories").fetchall()
        db.executemany(
            "INSERT OR IGNORE INTO memory_keys (key, id) VALUES (?, ?)", ((dedupe_key(k, t), i) for i, k, t in rows)
        )


def _m11_channels(db: sqlite3.Connection) -> None:
    # Every chat channel after Telegram (appliance/channels/base.py): who was paired, by channel; the
    # platform ids of messages handled (a message delivered twice is answered once, across restarts);
    # what an outbound message needs besides its text (a thread, a Message-ID); and the feed of
    # proactive messages the status page shows, with the channel each one was given to.
    _script(
        db,
        """
        CREATE TABLE channel_users (
            channel TEXT NOT NULL,
            user_id TEXT NOT NULL,
            name TEXT,
            paired_at REAL NOT NULL,
            PRIMARY KEY (channel, user_id)
        );
        CREATE TABLE channel_pairing (
            code_hash TEXT PRIMARY KEY,
            channel TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            used_by TEXT,
            used_at REAL
        );
        CREATE TABLE inbound (
            channel TEXT NOT NULL,
            remote_id TEXT NOT NULL,
            received_at REAL NOT NULL,
            status TEXT NOT NULL DEFAULT 'received' CHECK (status IN ('received', 'handled')),
            PRIMARY KEY (channel, remote_id)
        ) WITHOUT ROWID;
        ALTER TABLE outbox ADD COLUMN meta TEXT;
        CREATE TABLE notifications (
            id INTEGER PRIMARY KEY,
            created_at REAL NOT NULL,
            kind TEXT NOT NULL,
            text TEXT NOT NULL,
            channel TEXT,
            outbox_id INTEGER
        );
        """,
    )


def _m12_chat_jobs(db: sqlite3.Connection) -> None:
    # Cron jobs made in chat (appliance/schedule/store.py says why they live here and not in
    # workspace/cron.yaml): every CronJob field plus who made it and when. Paused jobs by id, for any
    # job (the config's and cron.yaml's too). The run history, the last ~50 runs of each job.
    _script(
        db,
        """
        CREATE TABLE cron_jobs (
            id TEXT PRIMARY KEY,
            schedule TEXT NOT NULL,
            prompt TEXT NOT NULL DEFAULT '',
            device TEXT NOT NULL DEFAULT '',
            value TEXT NOT NULL DEFAULT '',
            task TEXT NOT NULL DEFAULT '',
            message TEXT NOT NULL DEFAULT '',
            deliver INTEGER NOT NULL DEFAULT 1,
            missed TEXT NOT NULL DEFAULT 'skip',
            created_by TEXT NOT NULL,
            created_at REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE cron_paused (
            job_id TEXT PRIMARY KEY,
            paused_at REAL NOT NULL,
            paused_by TEXT NOT NULL DEFAULT ''
        ) WITHOUT ROWID;
        CREATE TABLE cron_runs (
            id INTEGER PRIMARY KEY,
            job_id TEXT NOT NULL,
            at REAL NOT NULL,
            ok INTEGER NOT NULL,
            result TEXT NOT NULL,
            reason TEXT NOT NULL
        );
        CREATE INDEX cron_runs_job ON cron_runs (job_id, id);
        """,
    )


def _m13_deep_work(db: sqlite3.Connection) -> None:
    # Deep work and subtasks (appliance/tasks): a task's budgets, its plan, the tokens it used, its route,
    # its parent and its tools (JSON; NULL = every tool), whether it stopped with a partial result, whether
    # the owner was told it nears its budget; the state 'cancelled'; each step's tokens. The state's CHECK
    # cannot be altered in place, so the table is rebuilt. task_steps refers to it and foreign keys are on
    # (they cannot be turned off inside the migration's transaction): the steps are set aside while the old
    # table is dropped and come back once the new one carries its name.
    _script(
        db,
        """
        CREATE TABLE tasks_m13 (
            id INTEGER PRIMARY KEY,
            goal TEXT NOT NULL,
            state TEXT NOT NULL
                CHECK (state IN ('pending', 'running', 'done', 'error', 'paused', 'cancelled')),
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            steps_done INTEGER NOT NULL DEFAULT 0,
            result TEXT,
            error TEXT,
            budget_tokens INTEGER CHECK (budget_tokens IS NULL OR budget_tokens > 0),
            max_steps INTEGER NOT NULL DEFAULT 8 CHECK (max_steps > 0),
            tokens_used INTEGER NOT NULL DEFAULT 0,
            route TEXT NOT NULL DEFAULT 'auto' CHECK (route IN ('auto', 'local', 'cloud')),
            parent_id INTEGER REFERENCES tasks_m13 (id),
            plan TEXT,
            tools TEXT,
            partial INTEGER NOT NULL DEFAULT 0,
            budget_warned INTEGER NOT NULL DEFAULT 0
        );
        INSERT INTO tasks_m13 (id, goal, state, created_at, updated_at, steps_done, result, error)
            SELECT id, goal, state, created_at, updated_at, steps_done, result, error FROM tasks;
        CREATE TABLE task_steps_m13 AS SELECT id, task_id, n, at, kind, content FROM task_steps;
        DELETE FROM task_steps;
        DROP TABLE tasks;
        ALTER TABLE tasks_m13 RENAME TO tasks;
        ALTER TABLE task_steps ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
        INSERT INTO task_steps (id, task_id, n, at, kind, content)
            SELECT id, task_id, n, at, kind, content FROM task_steps_m13;
        DROP TABLE task_steps_m13;
        CREATE INDEX tasks_parent ON tasks (parent_id) WHERE parent_id IS NOT NULL;
        """,
    )


def _m14_tool_approvals(db: sqlite3.Connection) -> None:
    # A call of a tool in tools.require_approval waits in the same table as a device write, so that
    # one id namespace serves /approve ID for both: a tool row has device '' and value 'null', the
    # tool's name, its arguments (JSON) and the chat it came from ("telegram:111"), where its result goes.
    _script(
        db,
        """
        ALTER TABLE approvals ADD COLUMN tool TEXT;
        ALTER TABLE approvals ADD COLUMN arguments TEXT;
        ALTER TABLE approvals ADD COLUMN origin TEXT;
        """,
    )


def _m15_task_taint(db: sqlite3.Connection) -> None:
    # Outside text a task read (issue 31): ``outside`` lists what it read (JSON, NULL = nothing), so its
    # later steps, its subtasks and a restart keep treating it as untrusted; ``said`` holds the owner's
    # words a subtask born in an untrusted turn acts on (NULL: its own goal).
    _script(
        db,
        """
        ALTER TABLE tasks ADD COLUMN outside TEXT;
        ALTER TABLE tasks ADD COLUMN said TEXT;
        """,
    )


def _m16_telegram_pairing_shared(db: sqlite3.Connection) -> None:
    # Telegram is a chat channel like the others (appliance/channels/base.py): its paired users and its
    # pairing codes (used ones record who paired, unused ones still work) move into the shared tables.
    # The code hashes move unchanged: Telegram's codes keep their hash (appliance/channels/pairing.py).
    _script(
        db,
        """
        INSERT OR IGNORE INTO channel_users (channel, user_id, name, paired_at)
            SELECT 'telegram', CAST(user_id AS TEXT), name, paired_at FROM telegram_users;
        INSERT OR IGNORE INTO channel_pairing (code_hash, channel, created_at, expires_at, used_by, used_at)
            SELECT code_hash, 'telegram', created_at, expires_at, CAST(used_by AS TEXT), used_at
            FROM telegram_pairing;
        DROP TABLE telegram_users;
        DROP TABLE telegram_pairing;
        """,
    )


def _m17_skill_uses(db: sqlite3.Connection) -> None:
    # How often load_skill served each skill and when last (issue 35): one row a skill, bumped in place,
    # so counting costs one small write however often a skill is used.
    _script(
        db,
        """
        CREATE TABLE skill_uses (
            name TEXT PRIMARY KEY,
            uses INTEGER NOT NULL,
            last_used REAL NOT NULL
        );
        """,
    )


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _m1_conversations,
    _m2_web_auth,
    _m3_hardware,
    _m4_telegram_scheduler_tasks,
    _m5_memories,
    _m6_usage,
    _m7_routing,
    _m8_embedding_cache,
    _m9_token_scopes,
    _m10_memory_store,
    _m11_channels,
    _m12_chat_jobs,
    _m13_deep_work,
    _m14_tool_approvals,
    _m15_task_taint,
    _m16_telegram_pairing_shared,
    _m17_skill_uses,
]
