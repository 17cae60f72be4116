-- No crash loops (issue 42): how many times a run's lease was taken over from a process that
-- died holding it (src/app/quarantine.rs). A lease row lives from a take until its holder
-- releases it, so a take that finds the row expired finds a holder that died while executing
-- the run (`queued`, before its take was made durable as `running`, or `running`): each such
-- take counts one (`owner <> ''`). An automatic resume of an orphaned run starts with the
-- count of the run it resumes, on a row seeded with no owner and an expired lease (free to
-- take, and its first take is not counted). At the limit (`--quarantine-after`, default 2)
-- the taker quarantines the run instead of executing or recovering it. The take already
-- writes this row in its own transaction: no write is added to a run's path.
ALTER TABLE run_leases ADD COLUMN takeovers integer NOT NULL DEFAULT 0;
