-- A run's record (its input, every step's output and the definition it ran) is ~10 KB of JSON
-- for a 6 KB webhook body, so PostgreSQL keeps it out of line (TOAST), compressed, and
-- compresses it anew on each of the run's writes (queued, running, final). With pglz, the
-- default, the upsert of such a run took 0.70 ms of server time; with lz4 0.35 ms
-- (pg_stat_statements, README "Benchmarks"). lz4 needs PostgreSQL 14+ built with it (Debian's
-- is); elsewhere the records stay with pglz and this migration changes nothing. Records
-- already stored keep their compression until they are next written.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE runs ALTER COLUMN record SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'run records stay compressed with pglz: %', SQLERRM;
END
$$;
