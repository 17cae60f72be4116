-- The ingest inbox: where a webhook claim's queued run is written, in the claim's own
-- transaction, until it is moved into `runs` (src/store/postgres.rs, "The ingest inbox").
--
-- Why: a queued run written straight into `runs` cost the claim a row with seven index
-- entries and one row with two entries per search value (five for a Stripe event), about
-- 0.1-0.15 ms of the database's CPU per delivery; here it is one row and one index entry.
-- pgbench of the claim's shape (32 claims a transaction, 4 clients, the 4.4 KB record of
-- tests/fixtures/payloads/stripe/invoice.paid.json): 13,500-19,400 claims/s into `runs`,
-- 32,500-39,900 into this table (README, "Scale-out"). The run is durable and queued either
-- way: this row is its queued state, committed with the claim.
--
-- A row is moved (deleted here and inserted into `runs` with its search values, in one
-- statement, so a run is in exactly one of the two tables in every snapshot) by the workers
-- of any process when `runs` has no queued run to take, and before any listing or count of
-- the runs. A single run is read from either table. Ids are UUIDv7, so the primary key's
-- order is the runs' creation order, the order in which they are moved.
--
-- The columns are those of `runs` (their meanings there); `summary` and `record` are the
-- JSON text as serde wrote it (`text`: not parsed on the claim's path; cast to `json` when
-- moved), and `search_values` the run's free-search values (`run_values` rows once moved).
CREATE TABLE run_inbox (
    id              text COLLATE "C" PRIMARY KEY,
    workflow_id     text COLLATE "C" NOT NULL,
    status          text   NOT NULL,
    mode            text   NOT NULL,
    trigger         text   NOT NULL,
    idempotency_key text COLLATE "C",
    created_at      bigint NOT NULL,
    finished_at     bigint,
    retain_at       bigint,
    root_run_id     text COLLATE "C" NOT NULL,
    parent_run      text COLLATE "C",
    summary         text   NOT NULL,
    record          text   NOT NULL,
    search_values   text[] NOT NULL
);

-- As `runs.record` (migration 0005): lz4 where the server has it.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE run_inbox ALTER COLUMN record SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'inbox records stay compressed with pglz: %', SQLERRM;
END
$$;
