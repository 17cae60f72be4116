-- Every statement that names a lease's owner also names its run (`owner = $1 AND run_id =
-- ANY($2)`: renewing and releasing a process's leases), so the primary key finds the rows and
-- the owner index served nothing. It was worse than idle: a release's prepared plan, fixed
-- while the table was small, read the owner index, i.e. every lease the process ever held
-- that vacuum had not yet cleared, to delete one row (0.6 ms a release under the pg×1 load,
-- about as long as the run's own write; README, "Webhook ingest"). Without it the plans use
-- the primary key, a take writes one index entry fewer, and a renewal, which changes no
-- indexed column, can update in place (HOT).
DROP INDEX IF EXISTS run_leases_owner;
