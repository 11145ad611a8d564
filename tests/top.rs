//! RL.TOP: the keys a server denied most, from a Space-Saving summary of rl.top-size
//! entries. A heavy hitter among 100,000 light identities comes first within the stated
//! bound; memory stops growing at a million distinct denied keys; RESET, COUNT,
//! ALGORITHM, rl.top-size (0 and resizing at runtime); RL.ALL counts the limit that
//! denied; RL.PSEUDONYM identities show as pseudonyms; a replica's summary is its own;
//! in a cluster each primary has its own.
mod common;
use common::cluster::*;
use common::*;

use std::collections::BTreeMap;

/// 2023-11-14 22:13:20 UTC in µs: every call names its NOW.
const NOW: u64 = 1_700_000_000_000_000;

#[derive(Debug, Clone, PartialEq)]
struct Row {
    key: String,
    denied: i64,
    admitted: i64,
    error: i64,
    last_denied_ms: i64,
    command: String,
    algorithm: String,
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("not text: {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// One RL.TOP row: a flat field/value array (RESP2) or a map (RESP3).
fn row(v: &Value) -> Row {
    let fields: BTreeMap<String, Value> = match v {
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        Value::Array(a) => {
            assert_eq!(a.len(), 14, "seven fields: {a:?}");
            a.chunks(2).map(|p| (text(&p[0]), p[1].clone())).collect()
        }
        other => panic!("not a row: {other:?}"),
    };
    Row {
        key: text(&fields["key"]),
        denied: int(&fields["denied"]),
        admitted: int(&fields["admitted"]),
        error: int(&fields["error"]),
        last_denied_ms: int(&fields["last_denied_ms"]),
        command: text(&fields["command"]),
        algorithm: text(&fields["algorithm"]),
    }
}

fn top(c: &mut Connection, args: &str) -> Vec<Row> {
    let mut cmd = redis::cmd("RL.TOP");
    for a in args.split_whitespace() {
        cmd.arg(a);
    }
    let v: Value = cmd
        .query(c)
        .unwrap_or_else(|e| panic!("RL.TOP {args}: {e}"));
    match v {
        Value::Array(rows) => rows.iter().map(row).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn info_field(c: &mut Connection, name: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("rl").query(c).unwrap();
    info.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO rl:\n{info}"))
        .parse()
        .unwrap()
}

fn used_memory(c: &mut Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
    info.lines()
        .find_map(|l| l.trim().strip_prefix("used_memory:"))
        .unwrap()
        .parse()
        .unwrap()
}

fn set_size(c: &mut Connection, n: i64) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rl.top-size")
        .arg(n)
        .query(c)
        .unwrap();
}

/// Runs `lines` (space-separated words) in pipelined batches, ignoring the replies.
fn pipelined(c: &mut Connection, lines: impl Iterator<Item = String>) {
    let mut pipe = redis::pipe();
    let mut n = 0;
    for line in lines {
        let mut words = line.split(' ');
        let mut cmd = redis::cmd(words.next().unwrap());
        for w in words {
            cmd.arg(w);
        }
        pipe.add_command(cmd).ignore();
        n += 1;
        if n == 10_000 {
            let _: () = pipe.query(c).unwrap();
            pipe = redis::pipe();
            n = 0;
        }
    }
    if n > 0 {
        let _: () = pipe.query(c).unwrap();
    }
}

#[test]
fn a_heavy_hitter_among_100k_light_identities_is_first_within_the_bound() {
    let s = Server::start();
    let mut c = s.conn();
    // Each light identity is allowed once then denied once; the heavy one is denied
    // 3,000 times, spread through the stream.
    let lights = 100_000u64;
    let heavy_denials = 3_000u64;
    // It starts once the summary is full of light keys, so it enters with an error.
    let start = 5_000;
    let every = (lights - start) / heavy_denials;
    let lines = (0..lights).flat_map(move |i| {
        let light = format!("RL.FIXED {{ip}}:light:{i} 1 60 NOW {NOW}");
        let mut v = vec![light.clone(), light];
        if i >= start && (i - start) % every == 0 {
            v.push(format!("RL.FIXED {{ip}}:heavy 1 60 NOW {NOW}"));
        }
        v.into_iter()
    });
    pipelined(&mut c, lines);
    let heavy_calls = (lights - start).div_ceil(every);
    let true_denials = heavy_calls - 1;
    let total_denials = lights + true_denials;
    let rows = top(&mut c, "COUNT 3");
    let first = &rows[0];
    assert_eq!(first.key, "{ip}:heavy", "{rows:?}");
    // Space-Saving: count - error <= true <= count, and error <= total / size.
    let (count, error) = (first.denied as u64, first.error as u64);
    assert!(
        count - error <= true_denials && true_denials <= count,
        "count {count}, error {error}, true {true_denials}"
    );
    assert!(error <= total_denials / 1024, "error {error}");
    assert_eq!(first.command, "rl.fixed");
    assert_eq!(first.algorithm, "fixed");
    assert_eq!(first.last_denied_ms, (NOW / 1000) as i64);
    println!(
        "heavy hitter: true {true_denials} denials, reported {count} (error bound {error}) among {total_denials} denials of {} keys",
        lights + 1
    );
    assert_eq!(info_field(&mut c, "rl_top_entries"), 1024);
}

#[test]
fn memory_stays_bounded_at_a_million_distinct_denied_keys() {
    let s = Server::start();
    let mut c = s.conn();
    // A limit of 1 with COST 2 denies every first call, and a denial writes nothing,
    // so the keyspace stays empty: only the summary could grow.
    let batch = |from: u64, to: u64| {
        (from..to).map(|i| format!("RL.GCRA user:{i:09} 1 1s COST 2 NOW {NOW}"))
    };
    let used_empty = used_memory(&mut c);
    pipelined(&mut c, batch(0, 2_000));
    let full_bytes = info_field(&mut c, "rl_top_bytes");
    let used_at_full = used_memory(&mut c);
    // rl_top_bytes is most of what filling the summary took from the server (the rest:
    // the pipeline's buffers, the allocator's rounding), and no more.
    let took = used_at_full - used_empty;
    assert!(
        full_bytes <= took && full_bytes * 2 > took,
        "rl_top_bytes {full_bytes}, used_memory grew {took}"
    );
    pipelined(&mut c, batch(2_000, 1_000_000));
    let bytes = info_field(&mut c, "rl_top_bytes");
    let used = used_memory(&mut c);
    let dbsize: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(dbsize, 0);
    assert_eq!(info_field(&mut c, "rl_top_entries"), 1024);
    assert_eq!(bytes, full_bytes, "the summary grew past its bound");
    assert!(
        used < used_at_full + 256 * 1024,
        "used_memory grew from {used_at_full} to {used}"
    );
    assert_eq!(info_field(&mut c, "rl_gcra_denied"), 1_000_000);
    println!("a million distinct denied keys: rl_top_bytes {bytes} (filling it took {took} of used_memory), used_memory {used_at_full} -> {used}");
}

#[test]
fn count_algorithm_reset_and_admissions() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(top(&mut c, ""), vec![]);
    for _ in 0..5 {
        rl(&mut c, &format!("RL.FIXED f 1 60 NOW {NOW}"));
    }
    for _ in 0..3 {
        rl(&mut c, &format!("RL.GCRA g 1 1s NOW {NOW}"));
    }
    // Two more for g, each admitted a second later: "admitted since it entered".
    for i in 1..=2u64 {
        let reply = rl(
            &mut c,
            &format!("RL.GCRA g 1 1s NOW {}", NOW + i * 1_000_000),
        );
        assert_eq!(reply.0, 1);
    }
    // PEEK, REFUND and RESET are not requests: not counted.
    rl(&mut c, &format!("RL.FIXED f 1 60 NOW {NOW} PEEK"));
    rl(&mut c, &format!("RL.FIXED f 1 60 NOW {NOW} REFUND"));
    let rows = top(&mut c, "");
    let shape: Vec<(&str, i64, i64, i64)> = rows
        .iter()
        .map(|r| (r.key.as_str(), r.denied, r.admitted, r.error))
        .collect();
    assert_eq!(shape, vec![("f", 4, 0, 0), ("g", 2, 2, 0)]);
    assert_eq!(top(&mut c, "COUNT 1").len(), 1);
    let g = top(&mut c, "ALGORITHM GCRA");
    assert_eq!(g.len(), 1);
    assert_eq!((g[0].key.as_str(), g[0].command.as_str()), ("g", "rl.gcra"));
    assert_eq!(top(&mut c, "algorithm slidelog"), vec![]);
    // RESP3 clients get each row as a map.
    let client = redis::Client::open(format!("{}?protocol=resp3", s.url())).unwrap();
    let mut c3 = client.get_connection().unwrap();
    let v: Value = redis::cmd("RL.TOP").query(&mut c3).unwrap();
    let Value::Array(rows3) = v else {
        panic!("{v:?}")
    };
    assert!(matches!(rows3[0], Value::Map(_)), "{rows3:?}");
    assert_eq!(rows3.iter().map(row).collect::<Vec<_>>(), rows);
    // RESET answers what it clears.
    assert_eq!(top(&mut c, "RESET"), rows);
    assert_eq!(top(&mut c, ""), vec![]);
    assert_eq!(info_field(&mut c, "rl_top_entries"), 0);
    assert_eq!(info_field(&mut c, "rl_top_bytes"), 0);
    // Bad input: a clear error, nothing changed.
    rl(&mut c, &format!("RL.FIXED g 1 60 NOW {NOW}"));
    rl(&mut c, &format!("RL.FIXED g 1 60 NOW {NOW}"));
    for (args, want) in [
        ("COUNT", "ERR syntax error: COUNT needs a value"),
        ("COUNT 0", "ERR COUNT must be a positive integer"),
        ("COUNT -1", "ERR COUNT must be a positive integer"),
        ("COUNT x", "ERR COUNT must be a positive integer"),
        (
            "COUNT 1 COUNT 2",
            "ERR syntax error: COUNT given more than once",
        ),
        // Every limiter the table has, once each.
        (
            "ALGORITHM nope",
            "ERR RL.TOP: unknown algorithm 'nope' (one of slidelog, slidecount, slidewindow, fixed, counter, gcra, tokenbucket, concurrency, throttle)",
        ),
        ("ALGORITHM", "ERR syntax error: ALGORITHM needs a value"),
        (
            "RESET RESET",
            "ERR syntax error: RESET given more than once",
        ),
        ("BOGUS", "ERR syntax error: unknown option 'BOGUS'"),
    ] {
        let e = err_line(&mut c, &format!("RL.TOP {args}"));
        assert!(e.starts_with(want), "RL.TOP {args}: {e}");
    }
    assert_eq!(top(&mut c, "").len(), 1, "an invalid RESET cleared it");
}

#[test]
fn rl_all_counts_the_limit_that_denied() {
    let s = Server::start();
    let mut c = s.conn();
    let call = format!("RL.ALL 2 FIXED {{u}}:minute 10 60 GCRA {{u}}:second 1 1s NOW {NOW}");
    for _ in 0..3 {
        query_line(&mut c, &call).unwrap();
    }
    let rows = top(&mut c, "");
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(
        (
            r.key.as_str(),
            r.denied,
            r.command.as_str(),
            r.algorithm.as_str()
        ),
        ("{u}:second", 2, "rl.all", "gcra")
    );
    // An admitted RL.ALL counts an admission for each of its limits that is tracked.
    let later = format!(
        "RL.ALL 2 FIXED {{u}}:minute 10 60 GCRA {{u}}:second 1 1s NOW {}",
        NOW + 1_000_000
    );
    query_line(&mut c, &later).unwrap();
    assert_eq!(top(&mut c, "")[0].admitted, 1);
}

#[test]
fn pseudonymized_identities_appear_as_pseudonyms_never_as_the_ip() {
    let s = Server::start_with_env(&[], &[("RL_SECRET", "top test secret")]);
    let mut c = s.conn();
    let ips = ["203.0.113.77", "2001:db8::7"];
    let mut keys = Vec::new();
    for ip in ips {
        let pseudonym: String = redis::cmd("RL.PSEUDONYM")
            .arg(ip)
            .arg("NOW")
            .arg(NOW)
            .query(&mut c)
            .unwrap();
        let key = format!("rl:{{{pseudonym}}}:api");
        for _ in 0..3 {
            rl(&mut c, &format!("RL.FIXED {key} 1 60 NOW {NOW}"));
        }
        keys.push(key);
    }
    let rows = top(&mut c, "");
    let mut got: Vec<(String, i64)> = rows.iter().map(|r| (r.key.clone(), r.denied)).collect();
    got.sort();
    keys.sort();
    assert_eq!(got, keys.iter().map(|k| (k.clone(), 2)).collect::<Vec<_>>());
    // Nowhere in the reply, in any field, in either protocol (whose text shows the keys).
    let client = redis::Client::open(format!("{}?protocol=resp3", s.url())).unwrap();
    let resp3: Value = redis::cmd("RL.TOP")
        .query(&mut client.get_connection().unwrap())
        .unwrap();
    let resp2: Value = redis::cmd("RL.TOP").query(&mut c).unwrap();
    for reply in [format!("{resp2:?}"), format!("{resp3:?}")] {
        assert!(keys.iter().all(|k| reply.contains(k.as_str())), "{reply}");
        for ip in ips {
            assert!(!reply.contains(ip), "{ip} in {reply}");
        }
    }
}

#[test]
fn top_size_zero_turns_it_off_and_resizing_keeps_the_worst() {
    let s = Server::start_with(&["--rl.top-size", "0"]);
    let mut c = s.conn();
    rl(&mut c, &format!("RL.FIXED off 1 60 NOW {NOW}"));
    rl(&mut c, &format!("RL.FIXED off 1 60 NOW {NOW}"));
    assert_eq!(top(&mut c, ""), vec![]);
    assert_eq!(info_field(&mut c, "rl_top_bytes"), 0);
    set_size(&mut c, 4);
    for (key, n) in [("a", 5), ("b", 4), ("c", 3), ("d", 2)] {
        for _ in 0..=n {
            rl(&mut c, &format!("RL.FIXED {key} 1 60 NOW {NOW}"));
        }
    }
    let keys = |c: &mut Connection| -> Vec<(String, i64, i64)> {
        top(c, "")
            .into_iter()
            .map(|r| (r.key, r.denied, r.error))
            .collect()
    };
    assert_eq!(keys(&mut c).len(), 4);
    set_size(&mut c, 2);
    assert_eq!(
        keys(&mut c),
        vec![("a".into(), 5, 0), ("b".into(), 4, 0)],
        "shrinking keeps the worst entries with their counts"
    );
    // Back up: "c" was dropped with 3 denials, so it returns with that as its error.
    set_size(&mut c, 8);
    rl(&mut c, &format!("RL.FIXED c 1 60 NOW {NOW}"));
    assert!(
        keys(&mut c).contains(&("c".into(), 4, 3)),
        "{:?}",
        keys(&mut c)
    );
    set_size(&mut c, 0);
    assert_eq!(top(&mut c, ""), vec![]);
    assert_eq!(info_field(&mut c, "rl_top_entries"), 0);
    assert_eq!(
        info_field(&mut c, "rl_top_bytes"),
        0,
        "off frees the memory"
    );
    rl(&mut c, &format!("RL.FIXED c 1 60 NOW {NOW}"));
    assert_eq!(top(&mut c, ""), vec![], "off counts nothing");
    let e = err_line(&mut c, "CONFIG SET rl.top-size -1");
    assert!(e.starts_with("ERR"), "{e}");
}

#[test]
fn a_replicas_summary_is_its_own() {
    let primary = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = primary.port.to_string();
    let replica = Server::start_with(&["--replicaof", "127.0.0.1", &port]);
    wait_link(&primary, &replica);
    let mut p = primary.conn();
    let mut r = replica.conn();
    for _ in 0..3 {
        rl(&mut p, &format!("RL.FIXED seen-on-primary 1 60 NOW {NOW}"));
    }
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut p).unwrap();
    assert_eq!(acked, 1);
    assert_eq!(top(&mut p, "").len(), 1);
    assert_eq!(
        top(&mut r, ""),
        vec![],
        "the replica got the primary's denials"
    );
    // A replica answers RL.TOP (and RESET) even though it refuses writes.
    assert_eq!(top(&mut r, "RESET"), vec![]);
    assert_eq!(top(&mut p, "").len(), 1);
}

#[test]
fn in_a_cluster_each_primary_answers_for_its_own_denials() {
    let cluster = Cluster::start();
    let keys = ["{a}:rl", "{b}:rl", "{c}:rl", "{d}:rl", "{e}:rl", "{f}:rl"];
    let mut expected: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for key in keys {
        let owner = cluster.owner(key_slot(key.as_bytes()));
        let mut c = cluster.conn(owner);
        for _ in 0..2 {
            rl(&mut c, &format!("RL.FIXED {key} 1 60 NOW {NOW}"));
        }
        expected.entry(owner).or_default().push(key.to_string());
    }
    let mut merged: Vec<String> = Vec::new();
    for node in 0..cluster.nodes.len() {
        let mut c = cluster.conn(node);
        let mut got: Vec<String> = top(&mut c, "").into_iter().map(|r| r.key).collect();
        got.sort();
        let mut want = expected.get(&node).cloned().unwrap_or_default();
        want.sort();
        assert_eq!(got, want, "node {node}");
        merged.extend(got);
    }
    merged.sort();
    assert_eq!(merged.len(), keys.len());
}

#[test]
fn make_top_prints_the_rates_and_the_heavy_hitter() {
    let s = Server::start();
    let mut c = s.conn();
    for i in 0..20 {
        rl(&mut c, &format!("RL.GCRA light:{i} 1 1s NOW {NOW}"));
        rl(&mut c, &format!("RL.GCRA light:{i} 1 1s NOW {NOW}"));
    }
    for _ in 0..50 {
        rl(&mut c, &format!("RL.GCRA heavy\x07hitter 1 1s NOW {NOW}"));
    }
    let tool = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/top.py");
    let out = match std::process::Command::new("python3")
        .arg(tool)
        .args(["--once", "--count", "3", "-p", &s.port.to_string()])
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            skipped(&format!("python3 could not run: {e}"));
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    let gcra = lines.iter().find(|l| l.starts_with("gcra")).unwrap();
    let cols: Vec<&str> = gcra.split_whitespace().collect();
    // calls, denied: 40 + 50 calls, 20 + 49 denials.
    assert_eq!(&cols[cols.len() - 2..], ["90", "69"], "{text}");
    let first = lines
        .iter()
        .position(|l| l.contains("last denial"))
        .map(|i| lines[i + 1])
        .unwrap();
    assert!(first.trim_start().starts_with("1 "), "{text}");
    // The control character is shown escaped, never sent to the terminal.
    assert!(first.ends_with("heavy\\x07hitter"), "{text}");
    assert!(
        first.contains(" 49 ") && first.contains("2023-11-14 22:13:20"),
        "{text}"
    );
    assert!(text.contains("the 3 most denied of 21 tracked"), "{text}");
}
