//! In-memory backend (placeholder until the store lands).
