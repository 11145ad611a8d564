//! The Grafana dashboard (docs/grafana/redis-rl.json) against the metric names in
//! docs/metrics.md (tools/check_dashboard.py), and its server panels against what a
//! real server gives redis_exporter through docs/grafana/rl-info.lua.
mod common;
use common::*;

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the checker; None when python3 is not installed.
fn check(args: &[&str]) -> Option<(bool, String)> {
    let out = Command::new("python3")
        .arg(root().join("tools/check_dashboard.py"))
        .args(args)
        .output()
        .ok()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Some((out.status.success(), text))
}

#[test]
fn the_dashboard_uses_only_the_documented_metrics_and_real_info_fields() {
    let s = Server::start();
    let mut c = s.conn();
    // A denial, so that the RL.TOP fields have something in them.
    for _ in 0..2 {
        rl(&mut c, &format!("RL.FIXED k 1 10 NOW {T0}"));
    }
    let script = std::fs::read_to_string(root().join("docs/grafana/rl-info.lua")).unwrap();
    let pairs: Vec<String> = redis::cmd("EVAL")
        .arg(&script)
        .arg(0)
        .query(&mut c)
        .unwrap();
    let from_lua: Vec<(String, String)> = pairs
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    // Every numeric INFO rl field, as redis_exporter will export it.
    let info: String = redis::cmd("INFO").arg("rl").query(&mut c).unwrap();
    let numeric: Vec<(String, String)> = info
        .lines()
        .filter_map(|l| l.trim().split_once(':'))
        .filter(|(k, v)| k.starts_with("rl_") && v.bytes().all(|b| b.is_ascii_digit()))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(from_lua, numeric);
    assert!(from_lua.contains(&("rl_fixed_denied".into(), "1".into())));
    assert!(from_lua.contains(&("rl_top_entries".into(), "1".into())));

    let fields: Vec<&str> = from_lua.iter().map(|(k, _)| k.as_str()).collect();
    let Some((ok, text)) = check(&["--fields", &fields.join(",")]) else {
        println!("skipped: python3 is not installed");
        return;
    };
    assert!(ok, "{text}");
    // And the checker does fail: fields the dashboard's keys match none of.
    let (ok, text) = check(&["--fields", "rl_nothing"]).unwrap();
    assert!(!ok && text.contains("matches no INFO rl field"), "{text}");
}
