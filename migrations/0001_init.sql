-- Fluxo's PostgreSQL store (src/store/postgres.rs): Memory keys, run history, webhook claims
-- and REST API idempotency records. Applied by `PgStore::migrate` (sqlx embedded migrations,
-- under an advisory lock, so several processes may migrate at once).
--
-- Conventions:
-- * Every instant is a `bigint` of UTC unix milliseconds passed in by the engine's clock; the
--   database clock is never read. A record is expired when `expires_at <= now`.
-- * Text that the other backends order byte-wise (ids, keys, namespaces) is `COLLATE "C"`, so
--   ORDER BY and row comparisons here agree with Rust's `String` order (UTF-8 bytes) whatever
--   the database's default collation is, and btree indexes also serve prefix ranges.
-- * Stored records are `json` (not `jsonb`): the text is kept exactly as serde_json wrote it
--   (object key order, number spelling, `\u0000` escapes, which `jsonb` refuses).

-- ---------------------------------------------------------------------------------------------
-- Memory (MemoryStore)
-- ---------------------------------------------------------------------------------------------

CREATE TABLE memory (
    namespace  text COLLATE "C" NOT NULL,
    -- The key's UTF-8 bytes: Memory keys may hold any character, NUL included, which a
    -- `text` column cannot store; bytea compares byte-wise, the order the other backends use.
    key        bytea  NOT NULL,
    value      json   NOT NULL,
    written_at bigint NOT NULL,
    -- NULL = never expires.
    expires_at bigint,
    -- The writer (ClaimOwner): both set or both NULL.
    owner_run  text,
    owner_step text,
    PRIMARY KEY (namespace, key)
);

-- The sweep: earliest expiry first, only entries with a TTL.
CREATE INDEX memory_expires_at ON memory (expires_at) WHERE expires_at IS NOT NULL;

-- ---------------------------------------------------------------------------------------------
-- Runs (RunStore)
-- ---------------------------------------------------------------------------------------------

CREATE TABLE runs (
    id              text COLLATE "C" PRIMARY KEY,
    workflow_id     text COLLATE "C" NOT NULL,
    -- Wire names (RunStatus::as_str, Mode::as_str, Trigger::as_str).
    status          text   NOT NULL,
    mode            text   NOT NULL,
    trigger         text   NOT NULL,
    idempotency_key text COLLATE "C",
    created_at      bigint NOT NULL,
    finished_at     bigint,
    -- The instant retention orders a finished run by (finished_at, or created_at when a final
    -- run has none); NULL for queued and running runs, which retention never removes.
    retain_at       bigint,
    root_run_id     text COLLATE "C" NOT NULL,
    parent_run      text COLLATE "C",
    -- The list view (RunSummary), so listings never decode whole records.
    summary         json   NOT NULL,
    -- The full RunRecord.
    record          json   NOT NULL
);

-- Listing order (newest first = a backward scan) and every filter's index; each ends in
-- (created_at, id) so a cursor `(created_at, id) < ($1, $2)` is a range of the same index.
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_workflow ON runs (workflow_id, created_at, id);
CREATE INDEX runs_status ON runs (status, created_at, id);
CREATE INDEX runs_workflow_status ON runs (workflow_id, status, created_at, id);
-- Also the free search `q`, a prefix of the id (the primary key) or of the key: with the "C"
-- collation a plain btree serves the prefix range `col >= $q AND col < successor($q)`, in
-- generic plans too (where `LIKE $1` or `text_pattern_ops` would not help).
CREATE INDEX runs_key ON runs (idempotency_key, created_at, id) WHERE idempotency_key IS NOT NULL;
-- Retention: each workflow's finished runs, newest finish first (ties: the higher id).
CREATE INDEX runs_retention ON runs (workflow_id, retain_at DESC, id DESC) WHERE retain_at IS NOT NULL;

-- ---------------------------------------------------------------------------------------------
-- Webhook claims and API idempotency records (IdempotencyStore)
-- ---------------------------------------------------------------------------------------------

CREATE TABLE webhook_claims (
    workflow_id text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,
    run_id      text   NOT NULL,
    claimed_at  bigint NOT NULL,
    expires_at  bigint NOT NULL,
    PRIMARY KEY (workflow_id, key)
);

CREATE INDEX webhook_claims_expires_at ON webhook_claims (expires_at);

CREATE TABLE api_records (
    scope       text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,
    fingerprint text   NOT NULL,
    created_at  bigint NOT NULL,
    expires_at  bigint NOT NULL,
    -- The ApiRecordState as serde writes it (`{"state":"in_progress","owner":..,
    -- "lease_until":..}` or `{"state":"done","status":..,"body":..}`).
    state       json   NOT NULL,
    -- `state` is `in_progress` (api_abandon removes only those).
    in_progress boolean NOT NULL,
    PRIMARY KEY (scope, key)
);

CREATE INDEX api_records_expires_at ON api_records (expires_at);
