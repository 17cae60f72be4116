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
//!   Durations and failures do not depend on the bars, so they are read from the coarsest
//!   units (whole days inside the range) even when the bars need hours: the hourly counters
//!   are then read for their counts only (`plan`). Finished runs also count their steps'
//!   durations in step cells, read when the filter names one workflow.
//!   A store written by an older version gets its counters built once, when it is opened.
//! * PostgreSQL counts with one `GROUP BY` over the `runs` table (its `created_at` and
//!   filter indexes; a second over the summaries' `step_durations` for the steps): exact, consistent with the runs by construction, but it reads every
//!   matching row (see README, "Run history", for its figure).
//! * In memory: a scan of the runs (tests and benches).
//!
//! Every backend answers identically (`tests/store_conformance.rs` checks them against a
//! brute-force count).
//!
//! # Durations
//!
//! Percentiles (of runs per workflow, and of steps when a workflow is named) come from
//! [`DurationHistogram`], log-spaced bins with 7 significant bits
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
    /// Step id → durations (ms) of that step in the finished runs
    /// ([`RunSummary::step_durations`]: the steps each run executed). Only when the filter
    /// names a workflow (`filter.workflow`); empty otherwise, in every backend.
    pub steps: BTreeMap<String, DurationHistogram>,
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
        if q.filter.workflow.is_some() && s.status.is_final() {
            for (step, ms) in &s.step_durations {
                self.steps.entry(step.clone()).or_default().record(*ms, 1);
            }
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
/// 0.4% above. Bins are `u16` (the largest `u64` falls in bin 7,423, [`Self::MAX_BIN`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurationHistogram {
    /// `(bin, count)`, bins ascending, counts above zero (so equal histograms compare equal).
    bins: Vec<(u16, u64)>,
}

impl DurationHistogram {
    /// The bin of the longest duration (`u64::MAX` ms): bins are `0..=MAX_BIN`.
    pub const MAX_BIN: u16 = 7_423;

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
        if n == 0 {
            return;
        }
        // Appending in bin order (a dense array read back, a store's rows) is the common case.
        match self.bins.last_mut() {
            Some(last) if last.0 == b => last.1 = last.1.saturating_add(n),
            Some(last) if last.0 > b => match self.bins.binary_search_by_key(&b, |p| p.0) {
                Ok(i) => self.bins[i].1 = self.bins[i].1.saturating_add(n),
                Err(i) => self.bins.insert(i, (b, n)),
            },
            _ => self.bins.push((b, n)),
        }
    }

    /// The histogram of a dense array (`slots[b]` = durations in bin `b`).
    pub(crate) fn from_dense(slots: &[u64]) -> Self {
        DurationHistogram {
            bins: slots
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(b, n)| (b as u16, *n))
                .collect(),
        }
    }

    /// Add `other`'s counts (one pass over both, bins ascending).
    pub fn merge(&mut self, other: &DurationHistogram) {
        if other.bins.is_empty() {
            return;
        }
        if self.bins.is_empty() {
            self.bins = other.bins.clone();
            return;
        }
        let mut out = Vec::with_capacity(self.bins.len() + other.bins.len());
        let (mut a, mut b) = (self.bins.iter().peekable(), other.bins.iter().peekable());
        loop {
            match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.0 == y.0 => {
                    out.push((x.0, x.1.saturating_add(y.1)));
                    a.next();
                    b.next();
                }
                (Some(x), Some(y)) if x.0 < y.0 => {
                    out.push(**x);
                    a.next();
                }
                (_, Some(y)) => {
                    out.push(**y);
                    b.next();
                }
                (Some(x), None) => {
                    out.push(**x);
                    a.next();
                }
                (None, None) => break,
            }
        }
        self.bins = out;
    }

    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.bins.iter().map(|(_, n)| *n).sum()
    }

    /// `(bin, count)` pairs, bins ascending.
    pub fn bins(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.bins.iter().copied()
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
        let mut seen = 0u64;
        for (b, n) in &self.bins {
            seen = seen.saturating_add(*n);
            if seen >= rank {
                return Some(Self::bin_value(*b));
            }
        }
        self.bins.last().map(|(b, _)| Self::bin_value(*b))
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

/// What a piece of a [`plan`] is read for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// Everything: runs per bar and status, durations, failures.
    All,
    /// Runs per bar and status only.
    Bars,
    /// Durations (of runs and steps) and failures only.
    Durations,
}

/// What to read for `[since, until)` in bars of `bucket_ms`: every instant is in exactly one
/// piece read for its bars and exactly one read for its durations and failures. Durations and
/// failures do not follow the bars, so they come from the coarsest cover (whole days inside the
/// range, hours and minutes toward the edges, [`cover`] with one bucket); where its units are
/// too large for a bar (a day under 3-hour bars), the unit is read for durations only and the
/// bars come from the smaller units inside it. A week of 3-hour bars reads the histograms of
/// ~6 day counters per cell instead of ~150 hourly ones (the hourly ones only for their
/// counts).
pub(crate) fn plan(since: i64, until: i64, bucket_ms: i64) -> Vec<(Piece, Part)> {
    let bars = cover(since, until, bucket_ms);
    if bars.iter().all(|p| matches!(p, Piece::Exact { .. })) {
        // No counter unit fits a bar (or nothing to count): the runs are read one by one.
        return bars.into_iter().map(|p| (p, Part::All)).collect();
    }
    let mut out = Vec::new();
    for piece in cover(since, until, 0) {
        match piece {
            Piece::Units { unit, lo, hi } if bucket_ms > 0 && bucket_ms % unit != 0 => {
                out.push((piece, Part::Durations));
                // `lo` and `hi` are multiples of `unit`, itself whole minutes, and the bucket
                // is whole minutes (a unit fits it), so no exact piece comes out here.
                out.extend(
                    cover(lo, hi, bucket_ms)
                        .into_iter()
                        .map(|p| (p, Part::Bars)),
                );
            }
            _ => out.push((piece, Part::All)),
        }
    }
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

    /// The instants `[lo, hi)` of the pieces of `plan` read for bars (or for durations): they
    /// must tile the range exactly once, each.
    fn tiles(plan: &[(Piece, Part)], bars: bool) -> Vec<(i64, i64)> {
        let mut spans: Vec<(i64, i64)> = plan
            .iter()
            .filter(|(_, part)| match part {
                Part::All => true,
                Part::Bars => bars,
                Part::Durations => !bars,
            })
            .map(|(p, _)| match *p {
                Piece::Exact { lo, hi } | Piece::Units { lo, hi, .. } => (lo, hi),
            })
            .collect();
        spans.sort();
        spans
    }

    fn assert_tiles(spans: &[(i64, i64)], since: i64, until: i64) {
        let mut at = since;
        for (lo, hi) in spans {
            assert_eq!(*lo, at, "contiguous, no overlap: {spans:?}");
            assert!(hi > lo);
            at = *hi;
        }
        assert_eq!(at, until);
    }

    #[test]
    fn the_plan_reads_bars_and_durations_once_each() {
        let t0 = 1_767_225_600_000; // a midnight
        let since = t0 - 5 * HOUR_MS - 90_000 - 7;
        let until = t0 + 7 * DAY_MS + 3 * HOUR_MS + 61_000;
        for bucket in [
            0,
            MINUTE_MS,
            15 * MINUTE_MS,
            HOUR_MS,
            3 * HOUR_MS,
            DAY_MS,
            7 * DAY_MS,
            7,
        ] {
            let plan = plan(since, until, bucket);
            assert_tiles(&tiles(&plan, true), since, until);
            assert_tiles(&tiles(&plan, false), since, until);
            for (p, part) in &plan {
                if let (Piece::Units { unit, .. }, Part::All | Part::Bars) = (p, part) {
                    assert!(bucket <= 0 || bucket % unit == 0, "a bar read fits one bar");
                }
            }
        }
        // 3-hour bars over a week: the whole days are read for durations at the day level, and
        // for bars at the hour level.
        let plan = plan(since, until, 3 * HOUR_MS);
        assert!(plan.contains(&(
            Piece::Units {
                unit: DAY_MS,
                lo: t0,
                hi: t0 + 7 * DAY_MS
            },
            Part::Durations
        )));
        assert!(plan.contains(&(
            Piece::Units {
                unit: HOUR_MS,
                lo: t0,
                hi: t0 + 7 * DAY_MS
            },
            Part::Bars
        )));
        // Whole-minute edges and a width that is not whole minutes: one exact read.
        assert_eq!(
            super::plan(0, 10, 7),
            vec![(Piece::Exact { lo: 0, hi: 10 }, Part::All)]
        );
        assert!(super::plan(5, 5, HOUR_MS).is_empty());
    }
}
