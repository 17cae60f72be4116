-- The free search's value index (RunQuery::q, store::SEARCH_VALUES_MAX): the ids and other
-- short strings found in a run's input and step outputs, written with the run (one statement
-- with its upsert) and removed with it (ON DELETE CASCADE: retention, released claims).
-- `q` matches a value exactly or by prefix: with the "C" collation the primary key serves the
-- range `value >= $q AND value < successor($q)`, newest first within one value.
-- Runs stored before this migration are indexed when they are next written.
CREATE TABLE run_values (
    value      text COLLATE "C" NOT NULL,
    created_at bigint NOT NULL,
    run_id     text COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    PRIMARY KEY (value, created_at, run_id)
);
-- A run's own rows: rewriting and deleting a run.
CREATE INDEX run_values_run ON run_values (run_id);
