//! `schedule_trigger`: entry point fired by time (SPEC §3). The scheduler that fires it lives
//! in the server ([`crate::app::scheduler`]); this file owns the config, its validation and
//! the rule that turns a cron expression and a time zone into instants ([`Schedule`]).
//!
//! The run's `input` (and so this step's output) is
//! `{"scheduled_at": "<RFC 3339 UTC>", "previous_success_at"?: "<RFC 3339 UTC>", "missed"?: N}`:
//! the tick's scheduled instant, the scheduled instant of the newest scheduled run of the
//! workflow that succeeded, and, on a catch-up run, how many earlier ticks passed without a run
//! of their own.

use async_trait::async_trait;
use chrono::TimeZone;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{
    parse_config, schema_of, Category, ConfigProblem, Descriptor, StepContext, StepError, StepKind,
    StepOutput,
};

/// Most runs `catch_up: all` starts for missed ticks.
pub const MAX_CATCH_UP: usize = 100;

/// What a tick does while an earlier run of the workflow is queued or running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Start nothing; the tick is recorded in history as a run with status `skipped`.
    #[default]
    Skip,
    /// Queue the tick's run; it starts after the earlier run(s) end, one at a time.
    Queue,
    /// Start the tick's run at once, beside the earlier one.
    Allow,
}

/// What happens to ticks that passed while no scheduler ran (the server was stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Nothing runs for them; the schedule goes on from the next tick.
    #[default]
    None,
    /// One run, for the newest missed tick, with `missed` = how many ticks it stands for.
    Last,
    /// One run per missed tick, oldest first, at most 100 (the newest 100). Pair it with
    /// `overlap: queue` to run them one after another; under `skip` the first catch-up run,
    /// still queued, makes the others skipped ticks.
    All,
}

/// Schedule trigger config.
///
/// **Time zones and DST** (the rule of the `croner` crate, which evaluates the expression on
/// the zone's wall clock): a wall-clock time that does not exist because clocks jump forward
/// (02:30 on the night Europe/Berlin goes from 02:00 to 03:00) fires once, at the first
/// instant after the gap (03:00 local); a wall-clock time that exists twice because clocks go
/// back (02:30 on the night Europe/Berlin goes from 03:00 back to 02:00) fires once, at its
/// first occurrence (02:30 summer time); the repeated hour's second pass fires nothing. So a
/// daily schedule fires exactly once every local day. A schedule in `UTC` (the default) has
/// neither case.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Cron expression on the zone's wall clock: 5 fields (`minute hour day-of-month month
    /// day-of-week`, e.g. `*/5 * * * *` = every 5 minutes, `30 2 * * *` = 02:30 every day) or
    /// 6 with seconds first (`*/10 * * * * *` = every 10 seconds). Ranges `1-5`, lists `1,15`,
    /// steps `*/5`, names `MON`/`JAN`; when day-of-month and day-of-week are both restricted, a
    /// day matching either fires (Vixie cron).
    #[schemars(title = "Cron expression")]
    pub cron: String,
    /// IANA time zone the expression is read in, e.g. `Europe/Berlin` (default `UTC`).
    #[serde(default = "default_timezone")]
    #[schemars(title = "Time zone (IANA)")]
    pub timezone: String,
    /// A tick while an earlier run of this workflow is queued or running: `skip` (default;
    /// recorded in history as a `skipped` run), `queue` (start after it ends) or `allow`.
    #[serde(default)]
    #[schemars(title = "If the previous run is still going")]
    pub overlap: Overlap,
    /// Ticks missed while the scheduler was not running (counted from the workflow's newest
    /// scheduled run in history): `none` (default), `last` (one run) or `all` (one per tick,
    /// at most 100).
    #[serde(default)]
    #[schemars(title = "Ticks missed while stopped")]
    pub catch_up: CatchUp,
}

fn default_timezone() -> String {
    "UTC".to_string()
}

/// Where validation looks for a first tick (2026-01-01T00:00:00Z).
const NEVER_CHECK_FROM_MS: i64 = 1_767_225_600_000;

/// A parsed cron expression in its zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: croner::Cron,
    tz: chrono_tz::Tz,
}

impl Schedule {
    /// Parse `cron` (5 or 6 fields) and `timezone` (IANA name); each problem names its field.
    pub fn parse(cron: &str, timezone: &str) -> Result<Schedule, Vec<ConfigProblem>> {
        let mut problems = Vec::new();
        let fields = cron.split_whitespace().count();
        let parsed = if !(5..=6).contains(&fields) {
            problems.push(ConfigProblem {
                path: "cron".into(),
                message: format!(
                    "`{cron}` has {fields} fields; a cron expression has 5 (minute hour \
                     day-of-month month day-of-week) or 6 (seconds first)"
                ),
            });
            None
        } else {
            match croner::Cron::new(cron.trim())
                .with_seconds_optional()
                .parse()
            {
                Ok(c) => Some(c),
                Err(e) => {
                    problems.push(ConfigProblem {
                        path: "cron".into(),
                        message: format!("`{cron}` is not a valid cron expression: {e}"),
                    });
                    None
                }
            }
        };
        let tz = match timezone.parse::<chrono_tz::Tz>() {
            Ok(tz) => Some(tz),
            Err(_) => {
                problems.push(ConfigProblem {
                    path: "timezone".into(),
                    message: format!(
                        "`{timezone}` is not an IANA time zone name (e.g. `UTC`, \
                         `Europe/Berlin`, `America/New_York`)"
                    ),
                });
                None
            }
        };
        match (parsed, tz) {
            (Some(parsed), Some(tz)) if problems.is_empty() => {
                let s = Schedule { cron: parsed, tz };
                // An expression no date matches (`0 0 30 2 *`) would never fire.
                if s.next_after(NEVER_CHECK_FROM_MS).is_none() {
                    return Err(vec![ConfigProblem {
                        path: "cron".into(),
                        message: format!("`{cron}` matches no date: it would never fire"),
                    }]);
                }
                Ok(s)
            }
            _ => Err(problems),
        }
    }

    /// Parse a config's schedule.
    pub fn of(config: &Config) -> Result<Schedule, Vec<ConfigProblem>> {
        Schedule::parse(&config.cron, &config.timezone)
    }

    /// The first tick strictly after `after_ms` (UTC unix ms), as UTC unix ms (whole seconds);
    /// `None` if the expression never matches again (e.g. `0 0 30 2 *`).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        // Whole seconds: a tick at 10:00:00.000 is after 09:59:59.999 but not after itself.
        let floor_s = after_ms.div_euclid(1000);
        let mut from = self.tz.timestamp_opt(floor_s, 0).single()?;
        // The crate searches on the wall clock: in a repeated hour it can answer an instant
        // before `from` (the first pass of a wall time already gone by); search on from there.
        for _ in 0..10_000 {
            let next = self.cron.find_next_occurrence(&from, false).ok()?;
            let ms = next.timestamp_millis();
            if ms > after_ms {
                return Some(ms);
            }
            from = next;
        }
        None
    }

    /// `ms` (UTC unix ms) on this schedule's wall clock, RFC 3339 with the zone's offset then
    /// (`2026-03-29T03:00:00+02:00`); `None` out of range.
    pub fn local_rfc3339(&self, ms: i64) -> Option<String> {
        use chrono::TimeZone as _;
        let at = self.tz.timestamp_millis_opt(ms).single()?;
        Some(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, false))
    }

    /// Ticks in `(after_ms, until_ms]`, oldest first, at most `max` (the newest `max` when
    /// there are more), and how many there were in all (counted up to `count_cap`).
    pub fn ticks_between(
        &self,
        after_ms: i64,
        until_ms: i64,
        max: usize,
        count_cap: usize,
    ) -> (Vec<i64>, usize) {
        let mut ticks = std::collections::VecDeque::new();
        let mut total = 0;
        let mut at = after_ms;
        while let Some(t) = self.next_after(at) {
            if t > until_ms || total >= count_cap {
                break;
            }
            total += 1;
            ticks.push_back(t);
            if ticks.len() > max {
                ticks.pop_front();
            }
            at = t;
        }
        (ticks.into(), total)
    }
}

/// The `schedule_trigger` kind.
pub struct ScheduleTrigger;

#[async_trait]
impl StepKind for ScheduleTrigger {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "schedule_trigger",
            title: "Schedule trigger",
            category: Category::Trigger,
            description: "Entry point fired by time: a cron expression in an IANA time zone. \
                          Each tick is claimed once (`<workflow_id>@<scheduled instant>`), \
                          however many schedulers run on the store.",
            trigger: true,
            output: "{scheduled_at, previous_success_at?, missed?}",
            dynamic_ports: false,
            side_effects: false,
        }
    }
    fn config_schema(&self) -> Value {
        schema_of::<Config>()
    }
    fn check(&self, config: &Value) -> Vec<ConfigProblem> {
        match parse_config::<Config>(config) {
            Err(p) => p,
            Ok(c) => Schedule::of(&c).err().unwrap_or_default(),
        }
    }
    fn unrendered_fields(&self) -> &'static [&'static str] {
        &["cron", "timezone"]
    }
    async fn run(&self, cx: &StepContext<'_>, _config: Value) -> Result<StepOutput, StepError> {
        Ok(StepOutput::out(cx.input.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_cron_and_zone_are_named() {
        let p = Schedule::parse("*/5 * * *", "Mars/Olympus").unwrap_err();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].path, "cron");
        assert!(p[0].message.contains("4 fields"), "{}", p[0].message);
        assert_eq!(p[1].path, "timezone");
        let p = Schedule::parse("61 * * * *", "UTC").unwrap_err();
        assert_eq!(p[0].path, "cron");
    }

    #[test]
    fn an_expression_that_never_fires_is_refused() {
        let p = Schedule::parse("0 0 30 2 *", "UTC").unwrap_err();
        assert_eq!(p[0].path, "cron");
        assert!(p[0].message.contains("never fire"), "{}", p[0].message);
        assert!(
            Schedule::parse("0 0 29 2 *", "UTC").is_ok(),
            "leap days fire"
        );
    }

    #[test]
    fn six_fields_have_seconds_first() {
        let s = Schedule::parse("*/10 * * * * *", "UTC").unwrap();
        assert_eq!(s.next_after(1_767_225_600_000), Some(1_767_225_610_000));
    }
}
