//! Keyspace notifications: each limiter command fires, per key and in order, the events
//! the equivalent Lua script (lua/) fires on an equivalent fresh key, on both the
//! keyspace and the keyevent channels; RL.GCRA fires what `SET key v PXAT t` fires.
//! Denied calls that write nothing, and PEEK, fire nothing.
mod common;
use common::*;

use std::time::Duration;

const LOG_LUA: &str = include_str!("../lua/sliding_window_log.lua");
const COUNTER_LUA: &str = include_str!("../lua/sliding_window_counter.lua");
const FIXED_LUA: &str = include_str!("../lua/fixed_window.lua");

/// Keys of the module's side hold `{m}`, the script's (or reference command's) `{l}`;
/// events are compared with both written `{*}`.
const MODULE: &str = "{m}";
const SCRIPT: &str = "{l}";

/// One notification: (event, key), after checking it came on both channels.
type Event = (String, String);

/// A subscriber to every keyspace and keyevent notification of db 0.
struct Watch<'a> {
    sub: redis::PubSub<'a>,
    markers: u64,
}

impl<'a> Watch<'a> {
    fn new(conn: &'a mut Connection) -> Watch<'a> {
        let mut sub = conn.as_pubsub();
        sub.psubscribe("__keyspace@0__:*").expect("PSUBSCRIBE");
        sub.psubscribe("__keyevent@0__:*").expect("PSUBSCRIBE");
        sub.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        Watch { sub, markers: 0 }
    }

    /// The events fired by whatever `act` runs on `c`. A marker key written after it
    /// on the same connection ends the list: its event arrives after all of them, so
    /// nothing is waited for but that one message, and "no event" is an exact answer.
    fn events<T>(
        &mut self,
        c: &mut Connection,
        act: impl FnOnce(&mut Connection) -> T,
    ) -> (T, Vec<Event>) {
        let result = act(c);
        self.markers += 1;
        let marker = format!("marker:{}", self.markers);
        redis::cmd("SET")
            .arg(&marker)
            .arg(1)
            .query::<()>(c)
            .expect("SET marker");
        let mut raw = Vec::new();
        loop {
            let msg = self
                .sub
                .get_message()
                .unwrap_or_else(|e| panic!("no notification for {marker}: {e}; got {raw:?}"));
            let channel = msg.get_channel_name().to_string();
            let payload: String = msg.get_payload().expect("payload");
            let (kind, event, key) = if let Some(key) = channel.strip_prefix("__keyspace@0__:") {
                ("keyspace", payload, key.to_string())
            } else if let Some(event) = channel.strip_prefix("__keyevent@0__:") {
                ("keyevent", event.to_string(), payload)
            } else {
                panic!("unexpected channel {channel}");
            };
            if key == marker {
                if kind == "keyevent" {
                    break;
                }
                continue;
            }
            raw.push((kind, event, key));
        }
        // Each event comes on the keyspace channel, then on the keyevent channel.
        assert!(
            raw.len() % 2 == 0
                && raw.chunks(2).all(|p| p[0].0 == "keyspace"
                    && p[1].0 == "keyevent"
                    && p[0].1 == p[1].1
                    && p[0].2 == p[1].2),
            "events not paired keyspace/keyevent: {raw:?}"
        );
        let events = raw
            .chunks(2)
            .map(|p| (p[0].1.clone(), p[0].2.clone()))
            .collect();
        (result, events)
    }
}

fn normalized(events: &[Event]) -> Vec<Event> {
    events
        .iter()
        .map(|(e, k)| (e.clone(), k.replace(MODULE, "{*}").replace(SCRIPT, "{*}")))
        .collect()
}

fn names(events: &[Event]) -> Vec<&str> {
    events.iter().map(|(e, _)| e.as_str()).collect()
}

fn eval(c: &mut Connection, script: &str, keys: &[&str], args: &[String]) -> Vec<i64> {
    redis::cmd("EVAL")
        .arg(script)
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query(c)
        .unwrap_or_else(|e| panic!("EVAL {keys:?} {args:?}: {e}"))
}

/// Asserts the module's events equal the script's (keys mapped) and the names expected.
fn same(what: &str, module: &[Event], script: &[Event], expected: &[&str]) {
    assert_eq!(
        normalized(module),
        normalized(script),
        "{what}: the module and the script fired different events"
    );
    assert_eq!(names(module), expected, "{what}: {module:?}");
}

fn server() -> Server {
    Server::start_with(&["--notify-keyspace-events", "KEA"])
}

#[test]
fn slidelog_fires_what_the_script_fires() {
    let s = server();
    let mut c = s.conn();
    let mut sub_conn = s.conn();
    let mut w = Watch::new(&mut sub_conn);
    let (mkey, lkey) = ("rl:{m}:log", "rl:{l}:log");
    let window_us = 60_000_000u64;
    let mut serial = 0;
    let mut step =
        |w: &mut Watch, c: &mut Connection, now: u64, allowed: i64, expected: &[&str]| {
            let (reply, module) =
                w.events(c, |c| rl(c, &format!("RL.SLIDELOG {mkey} 2 60s NOW {now}")));
            serial += 1;
            let member = format!("{now}:{serial:08x}");
            let args = [now.to_string(), window_us.to_string(), "2".into(), member];
            let (answer, script) = w.events(c, |c| eval(c, LOG_LUA, &[lkey], &args));
            assert_eq!((reply.0, answer[0]), (allowed, allowed), "NOW {now}");
            same(
                &format!("RL.SLIDELOG NOW {now}"),
                &module,
                &script,
                expected,
            );
        };
    let t = T0;
    // A new log: ZADD then PEXPIRE (the script's trim of a missing key fires nothing).
    step(&mut w, &mut c, t, 1, &["zadd", "expire"]);
    step(&mut w, &mut c, t + 1, 1, &["zadd", "expire"]);
    // Denied: only the TTL refresh.
    step(&mut w, &mut c, t + 2, 0, &["expire"]);
    // The first entry has left the window: trimmed first.
    step(
        &mut w,
        &mut c,
        t + window_us,
        1,
        &["zremrangebyscore", "zadd", "expire"],
    );
    // Everything has left: the trim empties (deletes) the key, the add creates it again.
    step(
        &mut w,
        &mut c,
        t + 5 * window_us,
        1,
        &["zremrangebyscore", "del", "zadd", "expire"],
    );

    // PEEK fires nothing, even where the real call would trim.
    let (_, events) = w.events(&mut c, |c| {
        rl(
            c,
            &format!("RL.SLIDELOG {mkey} 2 60s NOW {} PEEK", t + 9 * window_us),
        )
    });
    assert_eq!(events, vec![]);
    // COST n adds n members with one ZADD: one zadd event.
    let (reply, events) = w.events(&mut c, |c| {
        rl(
            c,
            &format!("RL.SLIDELOG rl:{{m}}:log2 3 60s NOW {t} COST 2"),
        )
    });
    assert_eq!(reply.0, 1);
    assert_eq!(names(&events), ["zadd", "expire"]);
    assert!(events.iter().all(|(_, k)| k == "rl:{m}:log2"), "{events:?}");
    // A cost that can never pass: the trim still happens (and deletes the emptied
    // key); there is then no key to expire.
    let (reply, events) = w.events(&mut c, |c| {
        rl(
            c,
            &format!(
                "RL.SLIDELOG rl:{{m}}:log2 3 60s NOW {} COST 4",
                t + 2 * window_us
            ),
        )
    });
    assert_eq!((reply.0, reply.2), (0, -1));
    assert_eq!(names(&events), ["zremrangebyscore", "del"]);
    // The same on a log that does not exist: nothing at all.
    let (_, events) = w.events(&mut c, |c| {
        rl(
            c,
            &format!("RL.SLIDELOG rl:{{m}}:log3 3 60s NOW {t} COST 4"),
        )
    });
    assert_eq!(events, vec![]);
}

/// Longer trims (which Redis's own ZREMRANGEBYSCORE does inside the call) fire the
/// same events as the script's: one zremrangebyscore, and del when the log empties.
#[test]
fn slidelog_long_trims_fire_what_the_script_fires() {
    let s = server();
    let mut c = s.conn();
    let mut sub_conn = s.conn();
    let mut w = Watch::new(&mut sub_conn);
    let (mkey, lkey) = ("rl:{m}:long", "rl:{l}:long");
    let window_us = 60_000_000u64;
    let t = T0;
    // The same 30 old and 14 newer members in both logs (their events drained here).
    w.events(&mut c, |c| {
        for key in [mkey, lkey] {
            let mut zadd = redis::cmd("ZADD");
            zadd.arg(key);
            for i in 0..44u64 {
                let score = if i < 30 { t + i } else { t + 30_000_000 + i };
                zadd.arg(score).arg(format!("{score}:{i:08x}"));
            }
            zadd.query::<()>(c).expect("ZADD");
        }
    });
    let step = |w: &mut Watch, c: &mut Connection, now: u64, expected: &[&str]| {
        let (reply, module) = w.events(c, |c| {
            rl(c, &format!("RL.SLIDELOG {mkey} 20 60s NOW {now}"))
        });
        let member = format!("{now}:ffffffff");
        let args = [now.to_string(), window_us.to_string(), "20".into(), member];
        let (answer, script) = w.events(c, |c| eval(c, LOG_LUA, &[lkey], &args));
        assert_eq!((reply.0, reply.1), (1, answer[1]), "NOW {now}");
        same(
            &format!("RL.SLIDELOG NOW {now}"),
            &module,
            &script,
            expected,
        );
        let counts: Vec<u64> = [mkey, lkey]
            .iter()
            .map(|k| redis::cmd("ZCARD").arg(k).query(c).expect("ZCARD"))
            .collect();
        assert_eq!(counts[0], counts[1], "NOW {now}");
        counts[0]
    };
    // 30 expired, 14 in the window: trimmed, then one added.
    let n = step(
        &mut w,
        &mut c,
        t + window_us + 29,
        &["zremrangebyscore", "zadd", "expire"],
    );
    assert_eq!(n, 15);
    // Then all 15 expire too: the trim deletes the key, the add creates it.
    let n = step(
        &mut w,
        &mut c,
        t + 3 * window_us,
        &["zremrangebyscore", "del", "zadd", "expire"],
    );
    assert_eq!(n, 1);
}

#[test]
fn fixed_fires_what_the_script_fires() {
    let s = server();
    let mut c = s.conn();
    let mut sub_conn = s.conn();
    let mut w = Watch::new(&mut sub_conn);
    let (mkey, lkey) = ("rl:{m}:fix", "rl:{l}:fix");
    let step = |w: &mut Watch, c: &mut Connection, now: u64, expected: &[&str]| {
        let (reply, module) = w.events(c, |c| rl(c, &format!("RL.FIXED {mkey} 2 10 NOW {now}")));
        let args = [(now / 1_000_000).to_string(), "10".into(), "2".into()];
        let (answer, script) = w.events(c, |c| eval(c, FIXED_LUA, &[lkey], &args));
        assert_eq!((reply.0, answer[0]), (1, 1), "NOW {now}");
        same(&format!("RL.FIXED NOW {now}"), &module, &script, expected);
        module
    };
    let t = T0;
    // Creating the counter: INCR(BY), then EXPIRE.
    let events = step(&mut w, &mut c, t, &["incrby", "expire"]);
    assert_eq!(events[0].1, format!("{mkey}:{}", t / 1_000_000));
    // An existing counter: INCR(BY) only.
    step(&mut w, &mut c, t + 1_000_000, &["incrby"]);
    // Denied (the script would count the denial, the module writes nothing): nothing.
    for line in [
        format!("RL.FIXED {mkey} 2 10 NOW {}", t + 2_000_000),
        format!("RL.FIXED {mkey} 2 10 NOW {} PEEK", t + 2_000_000),
        format!("RL.FIXED {mkey} 2 10 NOW {} COST 3", t + 10_000_000),
        format!("RL.FIXED {mkey} 2 10 NOW {} PEEK", t + 10_000_000),
    ] {
        let (_, events) = w.events(&mut c, |c| rl(c, &line));
        assert_eq!(events, vec![], "{line}");
    }
    // The next window: a new counter.
    step(&mut w, &mut c, t + 10_000_000, &["incrby", "expire"]);
    // Windows in milliseconds name the counter in milliseconds; same events.
    let (reply, events) = w.events(&mut c, |c| {
        rl(
            c,
            &format!("RL.FIXED rl:{{m}}:fixms 2 1500ms NOW {t} COST 2"),
        )
    });
    assert_eq!(reply.0, 1);
    let counter = format!("rl:{{m}}:fixms:{}", t / 1000);
    assert_eq!(
        events,
        [
            ("incrby".to_string(), counter.clone()),
            ("expire".to_string(), counter)
        ]
    );
}

#[test]
fn slidecount_fires_what_the_script_fires() {
    let s = server();
    let mut c = s.conn();
    let mut sub_conn = s.conn();
    let mut w = Watch::new(&mut sub_conn);
    let window_us = 10_000_000u64;
    // `elapsed` is the script's ratio, chosen where its float estimate and the
    // module's integer one agree.
    let step = |w: &mut Watch,
                c: &mut Connection,
                now: u64,
                elapsed: &str,
                allowed: i64,
                expected: &[&str]| {
        let (reply, module) = w.events(c, |c| {
            rl(c, &format!("RL.SLIDECOUNT rl:{{m}}:cnt 3 10 NOW {now}"))
        });
        let i = now / window_us;
        let cur = format!("rl:{{l}}:cnt:{i}");
        let prev = format!("rl:{{l}}:cnt:{}", i - 1);
        let args = ["3".to_string(), elapsed.to_string(), "10".into()];
        let (answer, script) = w.events(c, |c| eval(c, COUNTER_LUA, &[&cur, &prev], &args));
        assert_eq!((reply.0, answer[0]), (allowed, allowed), "NOW {now}");
        same(
            &format!("RL.SLIDECOUNT NOW {now}"),
            &module,
            &script,
            expected,
        );
        module
    };
    let t = T0;
    let events = step(&mut w, &mut c, t, "0", 1, &["incrby", "expire"]);
    assert_eq!(events[0].1, format!("rl:{{m}}:cnt:{}", t / window_us));
    step(&mut w, &mut c, t + 1_000_000, "0.1", 1, &["incrby"]);
    step(&mut w, &mut c, t + 2_000_000, "0.2", 1, &["incrby"]);
    // Full: neither writes, neither fires anything.
    step(&mut w, &mut c, t + 3_000_000, "0.3", 0, &[]);
    // Half-way through the next window the previous one weighs 3 × 0.5 → 1: allowed,
    // creating the new counter (reading the previous one fires nothing).
    step(
        &mut w,
        &mut c,
        t + 15_000_000,
        "0.5",
        1,
        &["incrby", "expire"],
    );
    step(&mut w, &mut c, t + 16_000_000, "0.6", 1, &["incrby"]);
    // 2 + floor(3 × 0.35) = 3: denied.
    step(&mut w, &mut c, t + 16_500_000, "0.65", 0, &[]);
    for line in [
        format!(
            "RL.SLIDECOUNT rl:{{m}}:cnt 3 10 NOW {} PEEK",
            t + 16_500_000
        ),
        format!(
            "RL.SLIDECOUNT rl:{{m}}:cnt 3 10 NOW {} PEEK",
            t + 40_000_000
        ),
        format!(
            "RL.SLIDECOUNT rl:{{m}}:cnt 3 10 NOW {} COST 4",
            t + 40_000_000
        ),
    ] {
        let (_, events) = w.events(&mut c, |c| rl(c, &line));
        assert_eq!(events, vec![], "{line}");
    }
}

#[test]
fn gcra_fires_what_set_pxat_fires() {
    let s = server();
    let mut c = s.conn();
    let mut sub_conn = s.conn();
    let mut w = Watch::new(&mut sub_conn);
    let (mkey, lkey) = ("rl:{m}:gcra", "rl:{l}:gcra");
    let t = T0;
    for now in [t, t + 1] {
        let (reply, module) = w.events(&mut c, |c| {
            rl(c, &format!("RL.GCRA {mkey} 2 10s NOW {now}"))
        });
        assert_eq!(reply.0, 1, "NOW {now}");
        // The equivalent core command, as replicas get it: SET <tat> PXAT <expiry>.
        let value: String = redis::cmd("GET").arg(mkey).query(&mut c).unwrap();
        let at: i64 = redis::cmd("PEXPIRETIME").arg(mkey).query(&mut c).unwrap();
        assert!(at > 0, "{mkey} has no expiry");
        let ((), reference) = w.events(&mut c, |c| {
            redis::cmd("SET")
                .arg(lkey)
                .arg(&value)
                .arg("PXAT")
                .arg(at)
                .query(c)
                .unwrap()
        });
        same(
            &format!("RL.GCRA NOW {now}"),
            &module,
            &reference,
            &["set", "expire"],
        );
    }
    // Denied, PEEK, never: nothing.
    for line in [
        format!("RL.GCRA {mkey} 2 10s NOW {}", t + 2),
        format!("RL.GCRA {mkey} 2 10s NOW {} PEEK", t + 2),
        format!("RL.GCRA {mkey} 2 10s NOW {} PEEK", t + 60_000_000),
        format!("RL.GCRA {mkey} 2 10s NOW {} COST 3", t + 60_000_000),
        format!("RL.GCRA rl:{{m}}:gcra2 2 10s NOW {t} COST 3"),
    ] {
        let (reply, events) = w.events(&mut c, |c| rl(c, &line));
        assert_eq!(events, vec![], "{line} -> {reply:?}");
    }
}
