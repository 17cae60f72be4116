//! The schedule previews (issue 12, the editor's cron field and the workflow list's next run):
//! `GET /api/v1/schedules/preview` and `GET /api/v1/schedules`, on a real server (port 0) with
//! the engine's manual clock.

mod common;

use common::server::Setup;
use reqwest::Method;
use serde_json::json;

/// 2026-03-27T12:00:00Z, a Friday, two days before Berlin's switch to summer time.
const FRI_NOON: i64 = 1_774_612_800_000;

fn scheduled(id: &str, cron: &str, tz: &str) -> serde_json::Value {
    json!({
        "id": id, "name": id, "version": 1,
        "steps": [
            {"id": "tick", "kind": "schedule_trigger", "config": {"cron": cron, "timezone": tz}},
            {"id": "shape", "kind": "transform", "config": {"fields": {"at": "{{ input.scheduled_at }}"}}}
        ],
        "edges": [{"from": "tick", "to": "shape"}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_lists_the_next_ticks_on_the_zones_wall_clock_across_dst() {
    let s = Setup::new().start().await;
    s.clock.set(FRI_NOON);
    let a = s
        .api(
            Method::GET,
            "/schedules/preview?cron=30%202%20*%20*%20*&timezone=Europe/Berlin&count=3",
            &[],
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    let v = a.json();
    // 02:30 every day: Saturday at 02:30 CET; Sunday's 02:30 does not exist (clocks jump
    // from 02:00 to 03:00), croner fires at the first instant after the gap; Monday CEST.
    assert_eq!(
        v["next_local"],
        json!([
            "2026-03-28T02:30:00+01:00",
            "2026-03-29T03:00:00+02:00",
            "2026-03-30T02:30:00+02:00"
        ]),
        "{v}"
    );
    assert_eq!(v["next"][0], json!("2026-03-28T01:30:00.000Z"));
    assert_eq!(v["timezone"], json!("Europe/Berlin"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_expression_or_zone_is_a_problem_naming_its_field() {
    let s = Setup::new().start().await;
    let a = s
        .api(
            Method::GET,
            "/schedules/preview?cron=61%20*%20*%20*%20*",
            &[],
            None,
        )
        .await;
    a.problem(400, "invalid_schedule");
    assert_eq!(a.json()["problems"][0]["path"], json!("cron"));
    let a = s
        .api(
            Method::GET,
            "/schedules/preview?cron=*%20*%20*%20*%20*&timezone=Mars/Olympus",
            &[],
            None,
        )
        .await;
    a.problem(400, "invalid_schedule");
    assert_eq!(a.json()["problems"][0]["path"], json!("timezone"));
    // Without the token: 401, like every API route.
    let r = reqwest::Client::new()
        .get(format!("{}/api/v1/schedules/preview?cron=*", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_gives_each_scheduled_workflow_its_next_tick() {
    let s = Setup::new()
        .workflow(scheduled("nightly", "0 2 * * *", "UTC"))
        .workflow(common::server::api_workflow("manual"))
        .start()
        .await;
    s.clock.set(FRI_NOON);
    let v = s.get_json("/schedules").await;
    assert_eq!(
        v,
        json!([{
            "workflow_id": "nightly", "cron": "0 2 * * *", "timezone": "UTC",
            "next_at": "2026-03-28T02:00:00.000Z"
        }])
    );
}
