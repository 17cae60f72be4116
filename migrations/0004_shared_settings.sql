-- Documents every `fluxo serve` process on this database shares (store::SharedSettings): the
-- app settings (`settings`, as `<data-dir>/settings.json` holds them, secret env values
-- included: protect the database as that file) and the API token (`token`, {"token": …}), each
-- with a revision that grows on every write, which the processes poll to pick up changes.
CREATE TABLE shared_settings (
    name     text COLLATE "C" PRIMARY KEY,
    value    jsonb NOT NULL,
    revision bigint NOT NULL
);
