//! TLS to PostgreSQL (issue 11): the store URL's `sslmode` and `sslrootcert` (libpq's names)
//! choose an encrypted, verified connection; every connection the store's pool opens is TLS
//! (checked on the server, `pg_stat_ssl`); a server whose certificate the given CA did not
//! sign, or one without TLS when TLS is required, is refused with a message that says so.
//! The server is the harness's own (`tests/common/pg.rs`), with a CA and a certificate for
//! 127.0.0.1 made per run.

use std::process::Command;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use sqlx::Connection;

use fluxo::store::PgStore;

mod common;
use common::pg::TestPg;

/// A CA (its PEM) and a server certificate for 127.0.0.1 and localhost it signed (PEM chain,
/// PEM key).
fn ca_and_server(ca_name: &str) -> (String, String, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "fluxo test server");
    let cert = params.signed_by(&key, &ca).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_speaks_verified_tls_when_the_url_asks() {
    let (ca, cert, key) = ca_and_server("Fluxo test CA");
    let pg = TestPg::start_tls(&cert, &key);
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("ca.pem");
    std::fs::write(&ca_path, &ca).unwrap();
    let db = pg.fresh_db().await;
    let verified = format!("{db}?sslmode=verify-full&sslrootcert={}", ca_path.display());

    // The CLI migrates over it, and the store works over it.
    let out = Command::new(env!("CARGO_BIN_EXE_fluxo"))
        .args(["db", "migrate", "--store", &verified])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fluxo db migrate over TLS: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = PgStore::connect(&verified).await.unwrap();
    store.migrate().await.unwrap();
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(store.pool().acquire().await.unwrap());
    }

    // On the server: every connection to this database but the observer's is TLS.
    let name = db.rsplit('/').next().unwrap().to_string();
    let mut observer = sqlx::PgConnection::connect(&format!("{}?sslmode=disable", pg.url()))
        .await
        .unwrap();
    let (tls, plain): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl) \
         FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.datname = $1",
    )
    .bind(&name)
    .fetch_one(&mut observer)
    .await
    .unwrap();
    assert!(tls >= 3, "{tls} TLS connections");
    assert_eq!(plain, 0, "no plain connection to {name}");
    drop(conns);

    // A CA that did not sign the server's certificate: refused, and the message says why.
    let (other_ca, _, _) = ca_and_server("Someone else's CA");
    let other_path = dir.path().join("other-ca.pem");
    std::fs::write(&other_path, &other_ca).unwrap();
    let err = PgStore::connect(&format!(
        "{db}?sslmode=verify-full&sslrootcert={}",
        other_path.display()
    ))
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.to_lowercase().contains("certificate"),
        "the refusal names the certificate: {err}"
    );

    // TLS required from a server that has none (the shared plain server): refused.
    let plain_db = TestPg::shared().fresh_db().await;
    let err = PgStore::connect(&format!("{plain_db}?sslmode=require"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.to_lowercase().contains("tls") || err.to_lowercase().contains("ssl"),
        "the refusal says TLS was not available: {err}"
    );
}
