//! Count aggregates of the run history: what `GET /api/v1/runs/stats` answers (runs per status
//! and per chart bucket, duration percentiles per workflow, failures by reason) for the filters
//! `workflow`, `status`, `mode`, `trigger`, `since` and `until`, without reading the runs
//! ([`super::RunStore::count_runs`]).
//!
//! # How each backend answers
//!
//! * sled keeps **counters** in the tree `run_counts`, written in the same transaction as the
//!   run's summary (insert, status change, retention, a released claim), so they never drift
//!   from the runs. One counter per *cell*: a time unit (a UTC minute, hour and day: three
//!   levels, aligned on the unix epoch) × workflow × status × mode × trigger, holding the number
//!   of runs created in it and the [`DurationHistogram`] of the finished ones; failed runs also
//!   count in a cell per failure reason. A range `[since, until)` is covered by the largest
//!   units that fit inside it **and** inside one chart bucket (day units only for buckets that
//!   are whole days, hour units for whole hours, minute units for whole minutes); what is left
//!   at the edges (less than a minute on each side) is counted exactly from the runs in it,
//!   through the time index. So the answer is exact, and reads about `units × cells per unit`
//!   counters: a month of history at 1,400 runs an hour is ~30 days + 46 hours + 118 minutes.
//!   A store written by an older version gets its counters built once, when it is opened.
//! * PostgreSQL counts with one `GROUP BY` over the `runs` table (its `created_at` and
//!   filter indexes): exact, consistent with the runs by construction, but it reads every
//!   matching row (see README, "Run history", for its figure).
//! * In memory: a scan of the runs (tests and benches).
//!
//! Every backend answers identically (`tests/store_conformance.rs` checks them against a
//! brute-force count).
//!
//! # Durations
//!
//! Percentiles come from [`DurationHistogram`], log-spaced bins with 7 significant bits
//! (HdrHistogram's layout): durations under 128 ms are exact; above, a percentile is the middle
//! of its bin, within 0.4% of the true nearest-rank value (a bin spans `1/128` of its lower
//! bound at most). Counts and failures are exact.

use std::collections::BTreeMap;

use super::RunSummary;
use crate::run::{Mode, RunStatus, Trigger};

/// One minute, in ms: the smallest counter unit.
pub const MINUTE_MS: i64 = 60_000;
/// One hour, in ms.
pub const HOUR_MS: i64 = 3_600_000;
/// One day, in ms.
pub const DAY_MS: i64 = 86_400_000;

/// The counter units, largest first: day, hour, minute (ms, aligned on the unix epoch, UTC).
pub(crate) const UNITS: [i64; 3] = [DAY_MS, HOUR_MS, MINUTE_MS];

/// The filters the count aggregates answer (all optional; every set one must match).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountFilter {
    /// Only runs of this workflow id.
    pub workflow: Option<String>,
    pub status: Option<RunStatus>,
    pub mode: Option<Mode>,
    pub trigger: Option<Trigger>,
}

impl CountFilter {
    /// True when `s` passes every set filter.
    pub fn matches(&self, s: &RunSummary) -> bool {
        self.workflow.as_deref().is_none_or(|w| w == s.workflow_id)
            && self.status.is_none_or(|st| st == s.status)
            && self.mode.is_none_or(|m| m == s.mode)
            && self.trigger.is_none_or(|t| t == s.trigger)
    }
}

/// What [`super::RunStore::count_runs`] counts: the runs matching `filter` created in
/// `[since, until)` (UTC unix ms), in chart buckets of `bucket_ms` aligned on the unix epoch
/// (`bucket_ms <= 0`: one bucket starting at `since`). Buckets that are whole minutes are
/// answered from counters; any other width is counted exactly from the runs (slow).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountQuery {
    pub filter: CountFilter,
    pub since: i64,
    pub until: i64,
    pub bucket_ms: i64,
}

/// The answer of [`super::RunStore::count_runs`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunCounts {
    /// Bucket start (UTC unix ms) → status (wire name) → runs; empty buckets and zero counts
    /// left out.
    pub buckets: BTreeMap<i64, BTreeMap<String, u64>>,
    /// Status → runs over the whole range (zero counts left out).
    pub counts: BTreeMap<String, u64>,
    /// Workflow id → durations (`duration_ms`) of its finished runs that have one.
    pub durations: BTreeMap<String, DurationHistogram>,
    /// Failure reason ([`RunSummary::failure_reason`]) → runs.
    pub failures: BTreeMap<String, u64>,
}

impl RunCounts {
    /// Runs counted, all statuses.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Count `n` runs of `status` in the bucket starting at `bucket`.
    pub(crate) fn add_status(&mut self, bucket: i64, status: RunStatus, n: u64) {
        if n == 0 {
            return;
        }
        *self
            .buckets
            .entry(bucket)
            .or_default()
            .entry(status.as_str().to_string())
            .or_default() += n;
        *self.counts.entry(status.as_str().to_string()).or_default() += n;
    }

    /// Count one run (its bucket from `q`).
    pub(crate) fn add_summary(&mut self, s: &RunSummary, q: &CountQuery) {
        let bucket = super::common::bucket_start(s.created_at.0, q.since, q.bucket_ms);
        self.add_status(bucket, s.status, 1);
        if let (true, Some(d)) = (s.status.is_final(), s.duration_ms) {
            self.durations
                .entry(s.workflow_id.clone())
                .or_default()
                .record(d, 1);
        }
        if let Some(r) = s.failure_reason() {
            *self.failures.entry(r).or_default() += 1;
        }
    }

    /// Brute force: count `runs` (every stored summary, in any order) for `q`. What the
    /// in-memory store answers, and what the counters must equal.
    pub fn of_summaries<'a>(
        runs: impl IntoIterator<Item = &'a RunSummary>,
        q: &CountQuery,
    ) -> Self {
        let mut out = RunCounts::default();
        for s in runs {
            if s.created_at.0 >= q.since && s.created_at.0 < q.until && q.filter.matches(s) {
                out.add_summary(s, q);
            }
        }
        out
    }
}

/// Durations (ms) in log-spaced bins with 7 significant bits, HdrHistogram's layout: a
/// duration under 128 ms has a bin of its own (exact); above, bin `b` covers
/// `[m << s, (m + 1) << s)` with `m` in `128..256`, so a bin is at most 1/128 of its lower
/// bound wide. A percentile is reported as the middle of its bin: exact under 128 ms, within
/// 0.4% above. Bins are `u16` (the largest `u64` falls in bin 7,423).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurationHistogram {
    bins: BTreeMap<u16, u64>,
}

impl DurationHistogram {
    /// The bin of a duration in ms.
    pub fn bin(ms: u64) -> u16 {
        if ms < 128 {
            return ms as u16;
        }
        let top = 63 - ms.leading_zeros(); // >= 7
        let shift = top - 7;
        let m = (ms >> shift) as u16; // 128..256
        ((shift as u16) + 1) * 128 + (m - 128)
    }

    /// The duration reported for bin `b`: itself under 128, else the middle of its range
    /// (saturating at `u64::MAX` for a bin past the largest duration).
    pub fn bin_value(b: u16) -> u64 {
        if b < 128 {
            return u64::from(b);
        }
        let shift = u32::from(b / 128 - 1);
        if shift > 56 {
            // Past the bin of u64::MAX (only a damaged counter holds one).
            return u64::MAX;
        }
        let m = u128::from(128 + b % 128);
        let (lo, hi) = (m << shift, (m + 1) << shift);
        u64::try_from(lo + (hi - 1 - lo) / 2).unwrap_or(u64::MAX)
    }

    /// Count `n` durations of `ms`.
    pub fn record(&mut self, ms: u64, n: u64) {
        self.add_bin(Self::bin(ms), n);
    }

    /// Count `n` durations in bin `b`.
    pub(crate) fn add_bin(&mut self, b: u16, n: u64) {
        if n > 0 {
            *self.bins.entry(b).or_default() += n;
        }
    }

    /// Add `other`'s counts.
    pub fn merge(&mut self, other: &DurationHistogram) {
        for (b, n) in &other.bins {
            self.add_bin(*b, *n);
        }
    }

    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.bins.values().sum()
    }

    /// `(bin, count)` pairs, bins ascending.
    pub fn bins(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.bins.iter().map(|(b, n)| (*b, *n))
    }

    /// The nearest-rank `p`-th percentile (0 < p <= 100) in ms, as [`Self::bin_value`] of its
    /// bin; `None` when empty. Rank `ceil(p / 100 × count)`, at least 1 (what the exact
    /// computation over sorted durations used).
    pub fn percentile(&self, p: f64) -> Option<u64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = ((p / 100.0) * count as f64).ceil() as u64;
        let rank = rank.clamp(1, count);
        let mut seen = 0;
        for (b, n) in &self.bins {
            seen += n;
            if seen >= rank {
                return Some(Self::bin_value(*b));
            }
        }
        self.bins.keys().next_back().map(|b| Self::bin_value(*b))
    }
}

/// One part of a range cover ([`cover`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Runs created in `[lo, hi)`, counted one by one.
    Exact { lo: i64, hi: i64 },
    /// The counter units of `unit` ms that start in `[lo, hi)` (both multiples of `unit`).
    Units { unit: i64, lo: i64, hi: i64 },
}

/// Covers `[since, until)` with the largest counter units ([`UNITS`]) that each fall inside
/// one chart bucket of `bucket_ms` (`<= 0`: one bucket, any unit fits), and exact pieces at
/// the edges (less than a minute each when minute units fit). Empty when `since >= until`.
pub(crate) fn cover(since: i64, until: i64, bucket_ms: i64) -> Vec<Piece> {
    let units: Vec<i64> = UNITS
        .into_iter()
        .filter(|u| bucket_ms <= 0 || bucket_ms % u == 0)
        .collect();
    let mut out = Vec::new();
    cover_with(since, until, &units, &mut out);
    out
}

fn cover_with(lo: i64, hi: i64, units: &[i64], out: &mut Vec<Piece>) {
    if lo >= hi {
        return;
    }
    let Some((&unit, smaller)) = units.split_first() else {
        out.push(Piece::Exact { lo, hi });
        return;
    };
    // In i128: `lo` rounded up may pass i64::MAX.
    let (l, h, u) = (i128::from(lo), i128::from(hi), i128::from(unit));
    let a = l + (u - l.rem_euclid(u)) % u;
    let b = h - h.rem_euclid(u);
    if a >= b {
        cover_with(lo, hi, smaller, out);
        return;
    }
    // a and b lie within [lo, hi], so they fit in i64.
    let (a, b) = (a as i64, b as i64);
    cover_with(lo, a, smaller, out);
    out.push(Piece::Units { unit, lo: a, hi: b });
    cover_with(b, hi, smaller, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_are_exact_below_128_and_within_half_a_percent_above() {
        for ms in 0..128u64 {
            assert_eq!(DurationHistogram::bin_value(DurationHistogram::bin(ms)), ms);
        }
        let mut last = 0;
        for ms in (128..5_000_000u64)
            .step_by(37)
            .chain([u64::MAX / 3, u64::MAX])
        {
            let b = DurationHistogram::bin(ms);
            assert!(b >= last, "bins grow with the duration");
            last = b;
            let v = DurationHistogram::bin_value(b);
            let err = (v as f64 - ms as f64).abs() / ms as f64;
            assert!(err <= 0.004, "{ms} ms reported as {v} ({err})");
        }
        assert_eq!(DurationHistogram::bin(u64::MAX), 7_423);
        assert_eq!(DurationHistogram::bin_value(u16::MAX), u64::MAX);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut h = DurationHistogram::default();
        for ms in 1..=100 {
            h.record(ms, 1);
        }
        assert_eq!(h.percentile(50.0), Some(50));
        assert_eq!(h.percentile(95.0), Some(95));
        assert_eq!(h.percentile(99.0), Some(99));
        assert_eq!(DurationHistogram::default().percentile(50.0), None);
    }

    #[test]
    fn the_cover_is_exact_at_the_edges_and_coarse_inside() {
        let t0 = 1_767_225_600_000; // a midnight
        let since = t0 - 5 * HOUR_MS - 90_000 - 7;
        let until = t0 + 2 * DAY_MS + 3 * HOUR_MS + 61_000;
        let c = cover(since, until, HOUR_MS);
        let mut at = since;
        for p in &c {
            let (lo, hi) = match *p {
                Piece::Exact { lo, hi } => {
                    assert!(hi - lo < MINUTE_MS);
                    (lo, hi)
                }
                Piece::Units { unit, lo, hi } => {
                    assert_eq!(lo.rem_euclid(unit), 0);
                    (lo, hi)
                }
            };
            assert_eq!(lo, at, "contiguous");
            at = hi;
        }
        assert_eq!(at, until);
        // Hourly bars: whole hours inside (a day counter would span 24 bars)...
        assert!(c.contains(&Piece::Units {
            unit: HOUR_MS,
            lo: t0 - 5 * HOUR_MS,
            hi: t0 + 2 * DAY_MS + 3 * HOUR_MS
        }));
        // ... daily bars: whole days.
        assert!(cover(since, until, DAY_MS).contains(&Piece::Units {
            unit: DAY_MS,
            lo: t0,
            hi: t0 + 2 * DAY_MS
        }));
        // 15-minute buckets: an hour spans four of them, so only minute counters fit.
        assert!(cover(since, until, 15 * MINUTE_MS)
            .iter()
            .all(|p| !matches!(p, Piece::Units { unit, .. } if *unit != MINUTE_MS)));
        // A width that is not whole minutes: exact.
        assert_eq!(cover(0, 10, 7), vec![Piece::Exact { lo: 0, hi: 10 }]);
        // Extremes do not overflow.
        assert!(!cover(i64::MIN, i64::MAX, 0).is_empty());
        assert!(cover(5, 5, HOUR_MS).is_empty());
    }
}
