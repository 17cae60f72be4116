//! Rebuild when a migration is added or changed: `sqlx::migrate!` embeds `migrations/` at
//! compile time but cannot tell cargo to watch it (sqlx's documented build-script fix).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
