//! Built-in samples compiled into the binary: the workflow templates of `workflows/` (offered
//! by "New from template" and seeded into a fresh app workflows folder) and the real payloads
//! of `tests/fixtures/payloads/` (offered by the Dry Run input editor).

/// `(id, file text)` of every template workflow.
pub const TEMPLATES: &[(&str, &str)] = &[
    (
        "invoice-paid-once",
        include_str!("../workflows/invoice-paid-once.json"),
    ),
    (
        "ai-enrichment-relay",
        include_str!("../workflows/ai-enrichment-relay.json"),
    ),
    (
        "github-issue-to-ticket",
        include_str!("../workflows/github-issue-to-ticket.json"),
    ),
    (
        "stripe-to-ledger",
        include_str!("../workflows/stripe-to-ledger.json"),
    ),
    (
        "polling-sync",
        include_str!("../workflows/polling-sync.json"),
    ),
    (
        "polling-sync-item",
        include_str!("../workflows/polling-sync-item.json"),
    ),
    (
        "invoice-paid-to-hubspot",
        include_str!("../workflows/invoice-paid-to-hubspot.json"),
    ),
    (
        "stripe-customer-to-hubspot",
        include_str!("../workflows/stripe-customer-to-hubspot.json"),
    ),
];

/// `(name, JSON text)` of every sample payload (Stripe events built from Stripe's API
/// fixtures; GitHub webhook payloads from GitHub's published examples).
pub const PAYLOADS: &[(&str, &str)] = &[
    (
        "stripe/invoice.paid.json",
        include_str!("../tests/fixtures/payloads/stripe/invoice.paid.json"),
    ),
    (
        "stripe/invoice.paid.second.json",
        include_str!("../tests/fixtures/payloads/stripe/invoice.paid.second.json"),
    ),
    (
        "stripe/charge.succeeded.json",
        include_str!("../tests/fixtures/payloads/stripe/charge.succeeded.json"),
    ),
    (
        // The charge itself, as a list (`GET /v1/charges`) or a poll returns it: the object of
        // `charge.succeeded.json`.
        "stripe/charge.json",
        include_str!("../tests/fixtures/payloads/stripe/charge.json"),
    ),
    (
        "stripe/customer.created.json",
        include_str!("../tests/fixtures/payloads/stripe/customer.created.json"),
    ),
    (
        "github/issues.opened.payload.json",
        include_str!("../tests/fixtures/payloads/github/issues.opened.payload.json"),
    ),
    (
        "github/issues.opened.with-empty-body.payload.json",
        include_str!(
            "../tests/fixtures/payloads/github/issues.opened.with-empty-body.payload.json"
        ),
    ),
    (
        "github/ping.payload.json",
        include_str!("../tests/fixtures/payloads/github/ping.payload.json"),
    ),
    (
        "github/pull_request.opened.with-null-body.json",
        include_str!("../tests/fixtures/payloads/github/pull_request.opened.with-null-body.json"),
    ),
    (
        "github/push.payload.json",
        include_str!("../tests/fixtures/payloads/github/push.payload.json"),
    ),
];

/// Copy every template into `dir` unless a file of that name exists (first launch).
pub fn seed_templates(dir: &std::path::Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let mut n = 0;
    for (id, text) in TEMPLATES {
        let path = dir.join(format!("{id}.json"));
        if !path.exists() {
            std::fs::write(&path, text)?;
            n += 1;
        }
    }
    Ok(n)
}
