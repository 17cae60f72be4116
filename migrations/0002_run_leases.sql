-- Leases of the shared run queue (SPEC §8): several `fluxo serve` processes on one database
-- take `queued` runs under a lease, renew it by heartbeat while they execute, and take over
-- `running` runs whose lease expired (their process died) to recover them by the resume rule.
-- A separate table, so a lease can be taken before the run's row exists (a run executed at
-- once by the API) and run writes never touch it.
CREATE TABLE run_leases (
    run_id      text COLLATE "C" PRIMARY KEY,
    -- The process holding it (its instance id).
    owner       text   NOT NULL,
    -- Held until (UTC unix ms); past it, any process may take the run.
    lease_until bigint NOT NULL
);
CREATE INDEX run_leases_owner ON run_leases (owner);

-- The queue and the orphan scan read these in age order.
CREATE INDEX runs_queued ON runs (created_at, id) WHERE status = 'queued';
CREATE INDEX runs_running ON runs (created_at, id) WHERE status = 'running';
