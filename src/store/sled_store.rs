//! sled backend (placeholder until the store lands).
