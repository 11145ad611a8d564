//! A real three-primary Redis Cluster on loopback ports, built with
//! `redis-cli --cluster create`, driven by a small cluster-aware client written here
//! (CRC16 key slots, `CLUSTER SLOTS`, MOVED and ASK redirections).
//!
//! - Every limiter command declares its key, so the cluster routes it: sent to the
//!   wrong node it gets MOVED to the slot's owner, and there it decides, with every
//!   derived `<key>:<n>` counter written on that same node.
//! - RL.SLIDECOUNT and RL.FIXED refuse a key without a {hash tag} in cluster mode
//!   (an `ERR` that names the hash tag, nothing written), and accept it on a server
//!   that is not a cluster; RL.SLIDELOG and RL.GCRA (one key each) need no tag.
//! - RL.PSEUDONYM is keyless: every node answers, and all give the same pseudonym
//!   (the HMAC the spec defines), with the secret from RL_SECRET or rl.secret-file.
//! - A slot moved to another node while limiter calls keep arriving (IMPORTING /
//!   MIGRATING, MIGRATE key by key, SETSLOT NODE) carries the limiter state with it:
//!   nothing is reset before, during or after the move.
mod common;
use common::cluster::*;
use common::*;

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use redis::{ErrorKind, FromRedisValue, RedisResult};
use sha2::Sha256;

/// The decision time of every call: T0 is a multiple of 10 s and of 60 s.
const NOW: u64 = T0;

#[test]
fn key_slots_match_the_published_values() {
    // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
    assert_eq!(crc16(b"123456789"), 0x31c3);
    assert_eq!(key_slot(b"foo"), 12182);
    assert_eq!(key_slot(b"bar"), 5061);
    assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
    assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
    assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
}

// ---------------------------------------------------------------------------------
// The cluster.

/// Sends each command to the node serving its key's slot, follows MOVED (refreshing
/// the slot map) and ASK (with ASKING, for that one command), and counts both.
struct Router {
    conns: HashMap<u16, Connection>,
    map: Vec<(u16, u16, u16)>,
    seed: u16,
    moved: usize,
    asked: usize,
}

impl Router {
    fn new(cluster: &Cluster) -> Router {
        let mut router = Router {
            conns: HashMap::new(),
            map: Vec::new(),
            seed: cluster.nodes[0].port,
            moved: 0,
            asked: 0,
        };
        router.refresh();
        router
    }

    fn conn(&mut self, port: u16) -> &mut Connection {
        self.conns.entry(port).or_insert_with(|| {
            redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
                .expect("connect")
        })
    }

    fn refresh(&mut self) {
        let seed = self.seed;
        self.map = slot_map(self.conn(seed)).expect("CLUSTER SLOTS");
    }

    fn owner(&self, slot: u16) -> u16 {
        self.map
            .iter()
            .find(|r| (r.0..=r.1).contains(&slot))
            .map(|r| r.2)
            .unwrap_or_else(|| panic!("slot {slot} has no owner"))
    }

    /// Runs `cmd`, whose key is `key`, wherever the cluster says it belongs.
    fn query<T: FromRedisValue>(&mut self, cmd: &redis::Cmd, key: &[u8]) -> RedisResult<T> {
        let mut port = self.owner(key_slot(key));
        let mut asking = false;
        for _ in 0..5 {
            let conn = self.conn(port);
            if asking {
                redis::cmd("ASKING").query::<()>(conn)?;
            }
            match cmd.query::<T>(conn) {
                Err(e) if matches!(e.kind(), ErrorKind::Moved | ErrorKind::Ask) => {
                    let (addr, _) = e.redirect_node().expect("redirect target");
                    port = addr
                        .rsplit(':')
                        .next()
                        .and_then(|p| p.parse().ok())
                        .unwrap_or_else(|| panic!("bad redirect {addr}"));
                    asking = e.kind() == ErrorKind::Ask;
                    if asking {
                        self.asked += 1;
                    } else {
                        self.moved += 1;
                        self.refresh();
                    }
                }
                other => return other,
            }
        }
        panic!(
            "too many redirections for {:?}",
            String::from_utf8_lossy(key)
        );
    }

    /// A limiter command given as words; its key is the second word.
    fn try_rl(&mut self, line: &str) -> RedisResult<Reply> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut cmd = redis::Cmd::new();
        for w in &words {
            cmd.arg(*w);
        }
        self.query(&cmd, words[1].as_bytes())
    }

    fn rl(&mut self, line: &str) -> Reply {
        self.try_rl(line).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    /// A plain single-key command, e.g. `GET k`, routed by its key.
    fn run<T: FromRedisValue>(&mut self, words: &[&str]) -> T {
        let mut cmd = redis::Cmd::new();
        for w in words {
            cmd.arg(*w);
        }
        self.query(&cmd, words[1].as_bytes())
            .unwrap_or_else(|e| panic!("{words:?}: {e}"))
    }
}

/// `RL.THROTTLE <key> 1 1 60 NOW <NOW>` through the router (its reply has five
/// integers).
fn query_throttle(router: &mut Router, key: &str) -> Value {
    let mut cmd = redis::Cmd::new();
    for w in ["RL.THROTTLE", key, "1", "1", "60", "NOW", &NOW.to_string()] {
        cmd.arg(w);
    }
    router.query(&cmd, key.as_bytes()).expect("RL.THROTTLE")
}

/// One hash tag per node: `{tagN}` for the first N that lands on each node.
fn tag_per_node(cluster: &Cluster) -> Vec<String> {
    let mut found: Vec<Option<String>> = vec![None; cluster.nodes.len()];
    for n in 0.. {
        let tag = format!("tag{n}");
        let node = cluster.owner(key_slot(tag.as_bytes()));
        if found[node].is_none() {
            found[node] = Some(tag);
        }
        if found.iter().all(Option::is_some) {
            break;
        }
    }
    found.into_iter().map(Option::unwrap).collect()
}

/// Which limiter decisions a series of replies made: (allowed, remaining) pairs.
fn decisions(replies: &[Reply]) -> Vec<(i64, i64)> {
    replies.iter().map(|r| (r.0, r.1)).collect()
}

// ---------------------------------------------------------------------------------
// Routing.

#[test]
fn tagged_keys_route_to_their_slot_and_all_four_limiters_work_there() {
    let cluster = Cluster::start();
    let mut router = Router::new(&cluster);
    let tags = tag_per_node(&cluster);
    let w_us = 10_000_000u64;

    for (node, tag) in tags.iter().enumerate() {
        let base = format!("rl:{{{tag}}}");
        let slot = key_slot(base.as_bytes());
        // Our slot function agrees with the server's.
        let server_slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&base)
            .query(&mut cluster.conn(0))
            .unwrap();
        assert_eq!(slot, server_slot, "{base}");
        assert_eq!(cluster.owner(slot), node);

        // Sent straight to another node, every limiter command is redirected to the
        // slot's owner: the key at position 1 is declared, so the cluster sees it.
        let other = (node + 1) % 3;
        for cmd in ["RL.SLIDELOG", "RL.SLIDECOUNT", "RL.FIXED", "RL.GCRA"] {
            let line = format!("{cmd} {base}:x 2 10 NOW {NOW}");
            let mut words = redis::Cmd::new();
            for w in line.split_whitespace() {
                words.arg(w);
            }
            let err = words
                .query::<Reply>(&mut cluster.conn(other))
                .expect_err(&line);
            assert_eq!(err.kind(), ErrorKind::Moved, "{line}: {err}");
            let (addr, moved_slot) = err.redirect_node().unwrap();
            assert_eq!(moved_slot, slot, "{line}");
            assert_eq!(addr, format!("127.0.0.1:{}", cluster.nodes[node].port));
        }
        // The commands of other shapes too: their key is argument 1 as well.
        for line in [
            format!("RL.CONCURRENCY {base}:x 2 10 ACQUIRE a NOW {NOW}"),
            format!("RL.THROTTLE {base}:x 2 10 60 NOW {NOW}"),
            format!("RL.ALL 2 CONCURRENCY {base}:c 2 10 FIXED {base}:f 2 10 LEASE a NOW {NOW}"),
        ] {
            let mut words = redis::Cmd::new();
            for w in line.split_whitespace() {
                words.arg(w);
            }
            let err = words
                .query::<Value>(&mut cluster.conn(other))
                .expect_err(&line);
            assert_eq!(err.kind(), ErrorKind::Moved, "{line}: {err}");
            assert_eq!(err.redirect_node().unwrap().1, slot, "{line}");
        }
        let lease = router.rl(&format!(
            "RL.CONCURRENCY {base}:lease 1 10 ACQUIRE a NOW {NOW}"
        ));
        assert_eq!(lease, (1, 0, 0, 10_000), "on node {node}");
        let full = router.rl(&format!(
            "RL.CONCURRENCY {base}:lease 1 10 ACQUIRE b NOW {NOW}"
        ));
        assert_eq!(full.0, 0, "on node {node}");
        let on_node: Vec<(String, u64)> = redis::cmd("ZRANGE")
            .arg(format!("{base}:lease"))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(&mut cluster.conn(node))
            .unwrap();
        assert_eq!(on_node, vec![("a".to_string(), NOW + 10_000_000)]);
        let _: i64 = router.run(&["DEL", &format!("{base}:lease")]);
        let cell = format!("{base}:throttle");
        let replies: Vec<Value> = (0..3).map(|_| query_throttle(&mut router, &cell)).collect();
        let limited: Vec<i64> = replies
            .iter()
            .map(|v| match v {
                Value::Array(items) => redis::from_redis_value(&items[0]).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(limited, [0, 0, 1], "RL.THROTTLE on node {node}");
        let tat: String = redis::cmd("GET")
            .arg(&cell)
            .query(&mut cluster.conn(node))
            .unwrap();
        assert_eq!(
            tat,
            (u128::from(NOW) * 1000 + 2 * 60_000_000_000).to_string()
        );
        let _: i64 = router.run(&["DEL", &cell]);
        let written: Vec<String> = cluster
            .keys_on(other)
            .into_iter()
            .filter(|k| k.starts_with(&base))
            .collect();
        assert!(
            written.is_empty(),
            "a redirected call wrote {written:?} on node {other}"
        );

        let fixed = format!("{base}:fixed");
        let count = format!("{base}:count");
        let log = format!("{base}:log");
        let gcra = format!("{base}:gcra");
        for (key, cmd) in [
            (&fixed, "RL.FIXED"),
            (&count, "RL.SLIDECOUNT"),
            (&log, "RL.SLIDELOG"),
            (&gcra, "RL.GCRA"),
        ] {
            let replies: Vec<Reply> = (0..3)
                .map(|_| router.rl(&format!("{cmd} {key} 2 10 NOW {NOW}")))
                .collect();
            assert_eq!(
                decisions(&replies),
                [(1, 1), (1, 0), (0, 0)],
                "{cmd} {key} on node {node}: {replies:?}"
            );
            assert!(replies[2].2 > 0, "{cmd}: denied without a retry time");
        }

        // The state, derived counters included, is on the slot's node and nowhere else.
        let fixed_counter = format!("{fixed}:{}", NOW / 1_000_000);
        let count_counter = format!("{count}:{}", NOW / w_us);
        let expected: BTreeSet<String> = [&fixed_counter, &count_counter, &log, &gcra]
            .into_iter()
            .cloned()
            .collect();
        let tagged = |keys: BTreeSet<String>| -> BTreeSet<String> {
            keys.into_iter().filter(|k| k.starts_with(&base)).collect()
        };
        assert_eq!(tagged(cluster.keys_on(node)), expected, "node {node}");
        for n in (0..3).filter(|&n| n != node) {
            assert!(tagged(cluster.keys_on(n)).is_empty(), "{base} keys on {n}");
        }
        let mut c = cluster.conn(node);
        for k in &expected {
            let s: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(k)
                .query(&mut c)
                .unwrap();
            assert_eq!(s, slot, "{k} is not in {base}'s slot");
        }
        let get =
            |c: &mut Connection, k: &str| -> u64 { redis::cmd("GET").arg(k).query(c).unwrap() };
        assert_eq!(get(&mut c, &fixed_counter), 2);
        assert_eq!(get(&mut c, &count_counter), 2);
        assert_eq!(get(&mut c, &gcra), NOW + w_us);
        let zcard: u64 = redis::cmd("ZCARD").arg(&log).query(&mut c).unwrap();
        assert_eq!(zcard, 2);
        let cslot: u64 = redis::cmd("CLUSTER")
            .arg("COUNTKEYSINSLOT")
            .arg(slot)
            .query(&mut c)
            .unwrap();
        assert_eq!(cslot, 4);
    }
    assert!(router.moved == 0, "the slot map was stale");
}

// ---------------------------------------------------------------------------------
// Hash tags.

#[test]
fn window_counters_refuse_keys_without_a_hash_tag_in_cluster_mode_only() {
    let cluster = Cluster::start();
    let mut router = Router::new(&cluster);

    for key in ["rl:plain:user1", "rl:{}:user1", "rl:}user1{", "rl:{user1"] {
        let owner = cluster.owner(key_slot(key.as_bytes()));
        for cmd in ["RL.FIXED", "RL.SLIDECOUNT"] {
            for peek in ["", " PEEK"] {
                let line = format!("{cmd} {key} 5 10 NOW {NOW}{peek}");
                let err = router.try_rl(&line).expect_err(&line);
                assert_eq!(err.code(), Some("ERR"), "{line}: {err}");
                let detail = err.detail().unwrap_or_default();
                assert!(detail.contains("hash tag"), "{line}: {err}");
                assert!(
                    detail.contains(key),
                    "{line}: the error should name the key"
                );
            }
        }
        // Refused before anything is written, on the node that owns the key.
        let left: Vec<String> = cluster
            .keys_on(owner)
            .into_iter()
            .filter(|k| k.starts_with(key))
            .collect();
        assert!(left.is_empty(), "{key}: refused call left {left:?}");
    }
    assert_eq!(router.moved + router.asked, 0);

    // The same commands and keys on a server that is not a cluster: no tag needed.
    let single = Server::start();
    let mut c = single.conn();
    for key in ["rl:plain:user1", "rl:{}:user1"] {
        assert_eq!(
            rl(&mut c, &format!("RL.FIXED {key} 5 10 NOW {NOW}")),
            (1, 4, 0, 10_000)
        );
        assert_eq!(
            rl(&mut c, &format!("RL.SLIDECOUNT {key} 5 10 NOW {NOW}")).0,
            1
        );
        let fixed: u64 = redis::cmd("GET")
            .arg(format!("{key}:{}", NOW / 1_000_000))
            .query(&mut c)
            .unwrap();
        assert_eq!(fixed, 1);
        let count: u64 = redis::cmd("GET")
            .arg(format!("{key}:{}", NOW / 10_000_000))
            .query(&mut c)
            .unwrap();
        assert_eq!(count, 1);
    }
}

#[test]
fn slidelog_and_gcra_need_no_hash_tag() {
    let cluster = Cluster::start();
    let mut router = Router::new(&cluster);
    for (key, cmd) in [
        ("rl:log:user1", "RL.SLIDELOG"),
        ("rl:gcra:user1", "RL.GCRA"),
    ] {
        let replies: Vec<Reply> = (0..3)
            .map(|_| router.rl(&format!("{cmd} {key} 2 10 NOW {NOW}")))
            .collect();
        assert_eq!(decisions(&replies), [(1, 1), (1, 0), (0, 0)], "{cmd}");
        let owner = cluster.owner(key_slot(key.as_bytes()));
        assert!(cluster.keys_on(owner).contains(key), "{key} not on {owner}");
    }
    let zcard: u64 = router.run(&["ZCARD", "rl:log:user1"]);
    assert_eq!(zcard, 2);
    let tat: u64 = router.run(&["GET", "rl:gcra:user1"]);
    assert_eq!(tat, NOW + 10_000_000);
    let all: usize = (0..3).map(|n| cluster.keys_on(n).len()).sum();
    assert_eq!(all, 2, "only the two limiter keys exist");
}

// ---------------------------------------------------------------------------------
// RL.PSEUDONYM.

/// The spec's pseudonym: the first 24 hex chars of HMAC-SHA256(secret, id|YYYY-MM-DD).
fn expected_pseudonym(secret: &[u8], identity: &str, day: &str, scope: Option<&str>) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
    mac.update(format!("{identity}|{day}").as_bytes());
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    match scope {
        Some(s) => format!("{}:{s}", &hex[..24]),
        None => hex[..24].to_string(),
    }
}

#[test]
fn pseudonym_runs_on_every_node_and_agrees() {
    let env_secret = "cluster-wide secret from the environment";
    let cluster = Cluster::start_with_env(&[("RL_SECRET", env_secret)]);
    // NOW is 2025-11-30 05:20:00 UTC.
    let day = "2025-11-30";
    let cases: [(&str, Option<&str>, &str); 4] = [
        ("203.0.113.7", Some("login"), "203.0.113.7"),
        ("::ffff:203.0.113.7", Some("login"), "203.0.113.7"),
        ("api-key-42", None, "api-key-42"),
        ("user:1001", Some("search"), "user:1001"),
    ];
    let ask = |c: &mut Connection, identity: &str, scope: Option<&str>| -> String {
        let mut cmd = redis::cmd("RL.PSEUDONYM");
        cmd.arg(identity);
        if let Some(s) = scope {
            cmd.arg(s);
        }
        cmd.arg("NOW")
            .arg(NOW)
            .query(c)
            .unwrap_or_else(|e| panic!("RL.PSEUDONYM {identity}: {e}"))
    };

    let mut from_env = Vec::new();
    for (identity, scope, hashed) in cases {
        let want = expected_pseudonym(env_secret.as_bytes(), hashed, day, scope);
        for node in 0..3 {
            // Keyless: any node answers itself, never with MOVED.
            assert_eq!(
                ask(&mut cluster.conn(node), identity, scope),
                want,
                "{identity} on node {node}"
            );
        }
        from_env.push(want);
    }

    // A secret file on each node (each its own copy): CONFIG SET re-reads it at once.
    let file_secret = "rotated secret from a file";
    for (node, server) in cluster.nodes.iter().enumerate() {
        let path = server.dir.path().join("rl.secret");
        std::fs::write(&path, format!("{file_secret}\n")).unwrap();
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("rl.secret-file")
            .arg(path.to_str().unwrap())
            .query(&mut cluster.conn(node))
            .unwrap_or_else(|e| panic!("CONFIG SET on node {node}: {e}"));
    }
    for ((identity, scope, hashed), old) in cases.into_iter().zip(&from_env) {
        let want = expected_pseudonym(file_secret.as_bytes(), hashed, day, scope);
        assert_ne!(&want, old);
        for node in 0..3 {
            assert_eq!(
                ask(&mut cluster.conn(node), identity, scope),
                want,
                "{identity} on node {node} with the file secret"
            );
        }
    }
}

// ---------------------------------------------------------------------------------
// Slot migration.

/// Moves `slot` from node `from` to node `to` by hand, the way `redis-cli --cluster
/// reshard` does, calling `between` before the first key moves, after each key moves
/// and once the slot belongs to `to` everywhere. Returns the keys that moved.
fn migrate_slot(
    cluster: &Cluster,
    slot: u16,
    from: usize,
    to: usize,
    mut between: impl FnMut(&str),
) -> Vec<String> {
    let setslot = |node: usize, args: &[&str]| {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETSLOT").arg(slot).arg(args);
        let () = cmd
            .query(&mut cluster.conn(node))
            .unwrap_or_else(|e| panic!("CLUSTER SETSLOT {slot} {args:?} on {node}: {e}"));
    };
    setslot(to, &["IMPORTING", &cluster.ids[from]]);
    setslot(from, &["MIGRATING", &cluster.ids[to]]);
    between("slot marked MIGRATING/IMPORTING, no key moved yet");

    let mut moved = Vec::new();
    let mut source = cluster.conn(from);
    loop {
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100)
            .query(&mut source)
            .unwrap();
        if keys.is_empty() {
            break;
        }
        for key in keys {
            // No REPLACE: a key the target already has would be a limiter that was
            // started afresh there, and must fail the test.
            let reply: String = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(cluster.nodes[to].port)
                .arg(&key)
                .arg(0)
                .arg(5000)
                .query(&mut source)
                .unwrap_or_else(|e| panic!("MIGRATE {key}: {e}"));
            assert_eq!(reply, "OK", "MIGRATE {key}");
            between(&format!("after moving {key}"));
            moved.push(key);
        }
    }

    for node in [to, from, 3 - to - from] {
        setslot(node, &["NODE", &cluster.ids[to]]);
    }
    between("slot assigned to the new node everywhere");
    moved
}

/// Sets up a tag's slot for migration: (tag's base key, slot, source, target).
fn migration_slot(cluster: &Cluster, tag: &str) -> (String, u16, usize, usize) {
    let base = format!("rl:{{{tag}}}");
    let slot = key_slot(base.as_bytes());
    let from = cluster.owner(slot);
    (base, slot, from, (from + 1) % 3)
}

/// Remaining TTL of a key (ms), on whichever node serves it.
fn pttl(router: &mut Router, key: &str) -> i64 {
    router.run(&["PTTL", key])
}

#[test]
fn slot_migration_keeps_slidelog_members_and_gcra_tat() {
    let cluster = Cluster::start();
    let mut router = Router::new(&cluster);
    let (base, slot, from, to) = migration_slot(&cluster, "mig-single");
    let log = format!("{base}:log");
    let gcra = format!("{base}:gcra");
    // 12 per hour (GCRA: one every 300 s, all 12 at once): nothing refills at NOW.
    const LIMIT: i64 = 12;
    let log_line = format!("RL.SLIDELOG {log} {LIMIT} 3600 NOW {NOW}");
    let gcra_line = format!("RL.GCRA {gcra} {LIMIT} 3600 NOW {NOW}");

    let mut spent = 0;
    for _ in 0..3 {
        spent += 1;
        assert_eq!(router.rl(&log_line), (1, LIMIT - spent, 0, 3_600_000));
        assert_eq!(router.rl(&gcra_line).0, 1);
    }
    let members_before: Vec<String> = router.run(&["ZRANGE", &log, "0", "-1"]);
    assert_eq!(members_before.len(), 3);
    let log_ttl = pttl(&mut router, &log);
    let gcra_ttl = pttl(&mut router, &gcra);
    assert!(log_ttl > 0 && gcra_ttl > 0);

    // One call of each limiter between every step of the move: each continues the
    // count exactly where the last one left it, wherever it is served.
    let mut trace = Vec::new();
    let moved = migrate_slot(&cluster, slot, from, to, |stage| {
        spent += 1;
        let log_reply = router.rl(&log_line);
        let gcra_reply = router.rl(&gcra_line);
        trace.push(format!(
            "{stage}: slidelog {log_reply:?}, gcra {gcra_reply:?}"
        ));
        assert_eq!(
            (log_reply.0, log_reply.1),
            (1, LIMIT - spent),
            "SLIDELOG {stage}:\n{}",
            trace.join("\n")
        );
        assert_eq!(
            (gcra_reply.0, gcra_reply.1),
            (1, LIMIT - spent),
            "GCRA {stage}:\n{}",
            trace.join("\n")
        );
    });
    assert_eq!(
        moved.iter().cloned().collect::<BTreeSet<_>>(),
        [log.clone(), gcra.clone()].into_iter().collect(),
        "the keys that moved"
    );
    assert!(router.asked > 0, "no call was served through ASK");
    assert!(router.moved > 0, "no call followed MOVED after the move");
    assert_eq!(cluster.owner(slot), to);

    // Everything now lives on the new node, nothing is left behind.
    let on_new = cluster.keys_on(to);
    assert!(
        on_new.contains(&log) && on_new.contains(&gcra),
        "{on_new:?}"
    );
    assert!(cluster.keys_on(from).is_empty());
    let members_after: Vec<String> = router.run(&["ZRANGE", &log, "0", "-1"]);
    assert_eq!(members_after.len() as i64, spent);
    for m in &members_before {
        assert!(members_after.contains(m), "SLIDELOG lost member {m}");
    }
    let tat: u64 = router.run(&["GET", &gcra]);
    assert_eq!(tat, NOW + spent as u64 * 300_000_000, "GCRA's TAT");
    assert!(pttl(&mut router, &log) > 0 && pttl(&mut router, &gcra) > 0);

    // Spend the rest on the new node: the budget ends exactly at LIMIT.
    while spent < LIMIT {
        spent += 1;
        assert_eq!(router.rl(&log_line).1, LIMIT - spent);
        assert_eq!(router.rl(&gcra_line).1, LIMIT - spent);
    }
    assert_eq!(router.rl(&log_line).0, 0, "SLIDELOG over its limit");
    assert_eq!(router.rl(&gcra_line).0, 0, "GCRA over its burst");
}

#[test]
fn slot_migration_keeps_fixed_and_slidecount_counters() {
    let cluster = Cluster::start();
    let mut router = Router::new(&cluster);
    let (base, slot, from, to) = migration_slot(&cluster, "mig-counters");
    let fixed = format!("{base}:fixed");
    let count = format!("{base}:count");
    const FIXED_LIMIT: i64 = 3;
    const COUNT_LIMIT: i64 = 12;
    let fixed_line = format!("RL.FIXED {fixed} {FIXED_LIMIT} 60 NOW {NOW}");
    let count_line = format!("RL.SLIDECOUNT {count} {COUNT_LIMIT} 60 NOW {NOW}");
    let fixed_counter = format!("{fixed}:{}", NOW / 1_000_000);
    let count_counter = format!("{count}:{}", NOW / 60_000_000);

    // FIXED at its limit; SLIDECOUNT part-way.
    for spent in 1..=FIXED_LIMIT {
        assert_eq!(router.rl(&fixed_line).1, FIXED_LIMIT - spent);
    }
    assert_eq!(router.rl(&fixed_line).0, 0);
    let mut spent = 0;
    for _ in 0..4 {
        spent += 1;
        assert_eq!(router.rl(&count_line).1, COUNT_LIMIT - spent);
    }

    // While the counters are still on the old node, Redis already sends these calls
    // to the new one (the base key never exists). The module answers TRYAGAIN there
    // until the counters it reads have arrived, as Redis does for a multi-key command
    // whose keys are split; a retrying client then continues from the moved count.
    let is_tryagain = |e: &redis::RedisError| e.kind() == redis::ErrorKind::TryAgain;
    let mut tryagain = 0;
    let mut trace = Vec::new();
    let moved = migrate_slot(&cluster, slot, from, to, |stage| {
        let fixed_reply = router.try_rl(&fixed_line);
        let count_reply = router.try_rl(&count_line);
        trace.push(format!(
            "{stage}: fixed {fixed_reply:?}, slidecount {count_reply:?}"
        ));
        let context = trace.join("\n");
        match fixed_reply {
            Ok(reply) => assert_eq!(
                reply.0, 0,
                "FIXED at its limit was admitted {stage} (its count was reset):\n{context}"
            ),
            Err(e) if is_tryagain(&e) => tryagain += 1,
            Err(e) => panic!("FIXED {stage}: {e}"),
        }
        match count_reply {
            Ok(reply) => {
                spent += 1;
                assert_eq!(
                    (reply.0, reply.1),
                    (1, COUNT_LIMIT - spent),
                    "SLIDECOUNT did not continue its count {stage}:\n{context}"
                );
            }
            Err(e) if is_tryagain(&e) => tryagain += 1,
            Err(e) => panic!("SLIDECOUNT {stage}: {e}"),
        }
    });
    assert!(
        tryagain > 0,
        "no call met the split state:\n{}",
        trace.join("\n")
    );
    assert_eq!(
        moved.iter().cloned().collect::<BTreeSet<_>>(),
        [fixed_counter.clone(), count_counter.clone()]
            .into_iter()
            .collect(),
        "the keys that moved"
    );
    assert!(router.moved > 0, "no call followed MOVED after the move");
    assert_eq!(cluster.owner(slot), to);
    assert!(cluster.keys_on(from).is_empty());

    let fixed_value: i64 = router.run(&["GET", &fixed_counter]);
    assert_eq!(fixed_value, FIXED_LIMIT);
    let count_value: i64 = router.run(&["GET", &count_counter]);
    assert_eq!(count_value, spent);
    assert!(pttl(&mut router, &fixed_counter) > 0);
    assert!(pttl(&mut router, &count_counter) > 0);
    assert_eq!(router.rl(&fixed_line).0, 0, "FIXED on the new node");
    while spent < COUNT_LIMIT {
        spent += 1;
        assert_eq!(router.rl(&count_line).1, COUNT_LIMIT - spent);
    }
    assert_eq!(router.rl(&count_line).0, 0, "SLIDECOUNT over its limit");
}

/// The three phases of a slot move, as the traffic below sees them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// The slot is stable on its old node (before CLUSTER SETSLOT IMPORTING).
    Before,
    /// IMPORTING/MIGRATING set, keys moving one MIGRATE at a time.
    InFlight,
    /// CLUSTER SETSLOT NODE sent to every node.
    After,
}

/// One limiter identity and the model of what it has spent: every admitted call must
/// continue exactly from the model's count, never from zero.
struct Identity {
    line: String,
    limit: i64,
    spent: i64,
}

impl Identity {
    fn new(cmd: &str, key: &str, limit: i64) -> Identity {
        Identity {
            line: format!("{cmd} {key} {limit} 60 NOW"),
            limit,
            spent: 0,
        }
    }

    /// One call at `now`; Ok(true) if admitted, Ok(false) if denied, Err if TRYAGAIN.
    /// Panics on any reply that does not continue the model (an over-admission).
    fn call(&mut self, router: &mut Router, now: u64, context: &str) -> Result<bool, ()> {
        let line = format!("{} {now}", self.line);
        match router.try_rl(&line) {
            Ok(reply) => {
                if self.spent < self.limit {
                    self.spent += 1;
                    assert_eq!(
                        (reply.0, reply.1),
                        (1, self.limit - self.spent),
                        "{line} did not continue its count ({context})"
                    );
                    Ok(true)
                } else {
                    assert_eq!(reply.0, 0, "{line} admitted over its limit ({context})");
                    Ok(false)
                }
            }
            Err(e) if e.kind() == ErrorKind::TryAgain => Err(()),
            Err(e) => panic!("{line} ({context}): {e}"),
        }
    }
}

/// TRYAGAIN replies seen in one phase, and when the first and last came.
#[derive(Default)]
struct Refusals {
    existing: usize,
    new: usize,
    other_slots: usize,
    served: usize,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Refusals {
    fn count(&mut self, kind: &str) {
        let now = Instant::now();
        self.first.get_or_insert(now);
        self.last = Some(now);
        match kind {
            "existing" => self.existing += 1,
            "new" => self.new += 1,
            _ => self.other_slots += 1,
        }
    }

    fn total(&self) -> usize {
        self.existing + self.new + self.other_slots
    }

    fn lasted_ms(&self) -> f64 {
        match (self.first, self.last) {
            (Some(a), Some(b)) => (b - a).as_secs_f64() * 1000.0,
            _ => 0.0,
        }
    }
}

/// A slot moved key by key under traffic of RL.FIXED and RL.SLIDECOUNT, for
/// identities whose counters exist (some at their limit) and for new ones, with
/// traffic on the other nodes' slots too. Time advances through NOW (10 ms per round,
/// inside one window). TRYAGAIN is only ever answered while the slot is in flight,
/// and only in that slot; no call is ever admitted beyond what its counter allows.
#[test]
fn slot_moved_under_traffic_refuses_only_in_flight_and_never_over_admits() {
    let cluster = Cluster::start();
    let mut router = Router::new(&cluster);
    let (base, slot, from, to) = migration_slot(&cluster, "mig-traffic");
    // New identities in slots that stay where they are, one on each node: the target's
    // first limiter calls read (and cache) its importing slots before the move starts.
    let others: Vec<String> = tag_per_node(&cluster)
        .into_iter()
        .map(|tag| format!("rl:{{{tag}}}"))
        .collect();
    const FIXED_LIMIT: i64 = 3;
    const COUNT_LIMIT: i64 = 50;

    // Identities whose counters exist before the move: two FIXED at their limit, two
    // part-way, and four SLIDECOUNT part-way.
    let mut existing: Vec<Identity> = Vec::new();
    for n in 0..4 {
        existing.push(Identity::new(
            "RL.FIXED",
            &format!("{base}:fixed:{n}"),
            FIXED_LIMIT,
        ));
        existing.push(Identity::new(
            "RL.SLIDECOUNT",
            &format!("{base}:count:{n}"),
            COUNT_LIMIT,
        ));
    }
    for (i, id) in existing.iter_mut().enumerate() {
        let calls = match i {
            0 | 2 => FIXED_LIMIT + 1,
            _ => 1 + i as i64 % 3,
        };
        for _ in 0..calls {
            id.call(&mut router, NOW, "setting up")
                .expect("no TRYAGAIN before the move");
        }
    }
    assert_eq!(existing[0].spent, FIXED_LIMIT);
    assert_eq!(existing[2].spent, FIXED_LIMIT);

    let mut refusals: HashMap<&'static str, Refusals> = HashMap::new();
    let mut refused_new: Vec<Identity> = Vec::new();
    let mut round = 0u64;
    let mut fresh = 0usize;
    // One round of traffic: every existing identity once, a new FIXED and a new
    // SLIDECOUNT identity in the moving slot, and a new one in each other slot.
    let mut traffic = |router: &mut Router,
                       phase: Phase,
                       stage: &str,
                       existing: &mut Vec<Identity>,
                       refusals: &mut HashMap<&'static str, Refusals>,
                       refused_new: &mut Vec<Identity>| {
        round += 1;
        let now = NOW + round * 10_000;
        let context = format!("{phase:?}, {stage}");
        let tally = refusals
            .entry(match phase {
                Phase::Before => "before",
                Phase::InFlight => "in flight",
                Phase::After => "after",
            })
            .or_default();
        for id in existing.iter_mut() {
            match id.call(router, now, &context) {
                Ok(_) => tally.served += 1,
                Err(()) => tally.count("existing"),
            }
        }
        fresh += 1;
        for mut id in [
            Identity::new("RL.FIXED", &format!("{base}:fixed:new{fresh}"), FIXED_LIMIT),
            Identity::new(
                "RL.SLIDECOUNT",
                &format!("{base}:count:new{fresh}"),
                COUNT_LIMIT,
            ),
        ] {
            match id.call(router, now, &context) {
                Ok(_) => tally.served += 1,
                Err(()) => {
                    tally.count("new");
                    refused_new.push(id);
                }
            }
        }
        for other in &others {
            for cmd in ["RL.FIXED", "RL.SLIDECOUNT"] {
                let mut id = Identity::new(cmd, &format!("{other}:new{fresh}"), FIXED_LIMIT);
                match id.call(router, now, &context) {
                    Ok(_) => tally.served += 1,
                    Err(()) => tally.count("other"),
                }
            }
        }
    };

    for _ in 0..3 {
        traffic(
            &mut router,
            Phase::Before,
            "slot stable on the old node",
            &mut existing,
            &mut refusals,
            &mut refused_new,
        );
    }
    let moved = migrate_slot(&cluster, slot, from, to, |stage| {
        let phase = if stage.starts_with("slot assigned") {
            Phase::After
        } else {
            Phase::InFlight
        };
        traffic(
            &mut router,
            phase,
            stage,
            &mut existing,
            &mut refusals,
            &mut refused_new,
        );
    });
    for _ in 0..3 {
        traffic(
            &mut router,
            Phase::After,
            "slot on the new node",
            &mut existing,
            &mut refusals,
            &mut refused_new,
        );
    }
    // The new identities refused in flight wrote nothing anywhere: they start afresh.
    for id in &mut refused_new {
        assert_eq!(id.spent, 0);
        let admitted = id
            .call(
                &mut router,
                NOW + (round + 1) * 10_000,
                "refused in flight, retried after",
            )
            .expect("TRYAGAIN after the move");
        assert!(admitted);
    }

    let get = |phase: &str| {
        refusals.get(phase).map_or((0, 0, 0, 0, 0.0), |r| {
            (r.total(), r.existing, r.new, r.served, r.lasted_ms())
        })
    };
    for phase in ["before", "in flight", "after"] {
        let (total, old, new, served, ms) = get(phase);
        println!(
            "{phase:>9}: {total} TRYAGAIN ({old} for existing counters, {new} for new \
             identities, {} in other slots), {served} served, refusals spanning {ms:.1} ms",
            refusals.get(phase).map_or(0, |r| r.other_slots)
        );
    }
    println!("{} keys moved: {moved:?}", moved.len());
    assert_eq!(get("before").0, 0, "TRYAGAIN before the move");
    assert_eq!(get("after").0, 0, "TRYAGAIN after the move");
    let in_flight = refusals.get("in flight").expect("no in-flight traffic");
    assert_eq!(
        in_flight.other_slots, 0,
        "TRYAGAIN in a slot that was not moving"
    );
    // While keys move, an existing identity is served as soon as its counter arrived.
    assert!(in_flight.served > 0, "nothing was served in flight");
    assert!(router.asked > 0, "no call was served through ASK");
    assert_eq!(cluster.owner(slot), to);
    assert!(cluster.keys_on(from).iter().all(|k| !k.starts_with(&base)));

    // The counters on the new node hold exactly what the model admitted.
    for id in &existing {
        let key = id.line.split(' ').nth(1).unwrap();
        let start = if id.line.starts_with("RL.FIXED") {
            NOW / 1_000_000
        } else {
            NOW / 60_000_000
        };
        let value: i64 = router.run(&["GET", &format!("{key}:{start}")]);
        assert_eq!(value, id.spent, "{key}");
        assert!(pttl(&mut router, &format!("{key}:{start}")) > 0);
    }
}

/// A CLUSTER SETSLOT IMPORTING queued in MULTI runs at EXEC, after the command filter
/// saw it: a limiter call in between, from another client or earlier in the same
/// transaction, must not leave a cache that says the slot is not importing.
#[test]
fn setslot_importing_queued_in_multi_is_seen_after_exec() {
    let cluster = Cluster::start();
    let mut router = Router::new(&cluster);
    let others = tag_per_node(&cluster);
    for (variant, tag) in ["another client", "same transaction"]
        .iter()
        .zip(["multi-a", "multi-b"])
    {
        let (base, slot, from, to) = migration_slot(&cluster, tag);
        let key = format!("{base}:fixed");
        let line = format!("RL.FIXED {key} 2 60 NOW {NOW}");
        for _ in 0..2 {
            assert_eq!(router.rl(&line).0, 1);
        }
        assert_eq!(router.rl(&line).0, 0, "at its limit");
        // A missing counter on the target, in a slot it owns: reads its importing slots.
        let owned = &others[to];
        let mut target = cluster.conn(to);
        let warm = |c: &mut Connection, n: &str| {
            rl(
                c,
                &format!("RL.FIXED rl:{{{owned}}}:{tag}:{n} 2 60 NOW {NOW}"),
            )
        };
        assert_eq!(warm(&mut target, "warm").0, 1);

        let mut admin = cluster.conn(to);
        let () = redis::cmd("MULTI").query(&mut admin).unwrap();
        if *variant == "same transaction" {
            let queued: String = redis::cmd("RL.FIXED")
                .arg(format!("rl:{{{owned}}}:{tag}:in-multi"))
                .arg(2)
                .arg(60)
                .arg("NOW")
                .arg(NOW)
                .query(&mut admin)
                .unwrap();
            assert_eq!(queued, "QUEUED");
        }
        let queued: String = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("IMPORTING")
            .arg(&cluster.ids[from])
            .query(&mut admin)
            .unwrap();
        assert_eq!(queued, "QUEUED");
        if *variant == "another client" {
            assert_eq!(warm(&mut target, "between").0, 1);
        }
        let _: Value = redis::cmd("EXEC").query(&mut admin).unwrap();
        let () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("MIGRATING")
            .arg(&cluster.ids[to])
            .query(&mut cluster.conn(from))
            .unwrap();

        // The counter is still on the old node: the new one must not start from zero.
        match router.try_rl(&line) {
            Ok(reply) => assert_eq!(reply.0, 0, "{variant}: admitted over its limit"),
            Err(e) => assert_eq!(e.kind(), ErrorKind::TryAgain, "{variant}: {e}"),
        }
        assert!(
            router.asked > 0,
            "{variant}: the call was not sent to the new node"
        );
        for node in [to, from] {
            let () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("STABLE")
                .query(&mut cluster.conn(node))
                .unwrap();
        }
        assert_eq!(
            router.rl(&line).0,
            0,
            "{variant}: after the slot went stable"
        );
    }
}

// ---------------------------------------------------------------------------------
// BLOCK: the block key lives in the base key's slot.

#[test]
fn block_keys_stay_in_the_slot_and_need_a_hash_tag_for_every_limiter() {
    let cluster = Cluster::start();
    let mut router = Router::new(&cluster);
    let tags = tag_per_node(&cluster);

    // Without a tag `<key>:block` could hash anywhere: refused for every algorithm,
    // also for the ones whose own key is the base key, and nothing is written.
    for cmd in ["RL.GCRA", "RL.SLIDELOG", "RL.FIXED", "RL.SLIDECOUNT"] {
        let key = "rl:plain:blocked";
        for mode in ["", " PEEK", " RESET", " IMPOSE"] {
            let line = format!("{cmd} {key} 1 10 BLOCK 60 NOW {NOW}{mode}");
            let err = router.try_rl(&line).expect_err(&line);
            let detail = err.detail().unwrap_or_default();
            assert!(detail.contains("hash tag"), "{line}: {err}");
        }
        let owner = cluster.owner(key_slot(key.as_bytes()));
        assert!(cluster.keys_on(owner).iter().all(|k| !k.starts_with(key)));
    }
    // Without BLOCK those two keep working untagged, as before.
    assert_eq!(
        router.rl(&format!("RL.GCRA rl:plain:g 1 10 NOW {NOW}")).0,
        1
    );

    for (node, tag) in tags.iter().enumerate() {
        let base = format!("rl:{{{tag}}}:b");
        for i in 0..2 {
            router.rl(&format!("RL.GCRA {base} 1 10 BLOCK 60 NOW {}", NOW + i));
        }
        let block = format!("{base}:block");
        let keys = cluster.keys_on(node);
        assert!(
            keys.contains(&block),
            "{block} not on node {node}: {keys:?}"
        );
        let slot: u16 = router.run(&["CLUSTER", "KEYSLOT", &block]);
        assert_eq!(slot, key_slot(base.as_bytes()));
        let r = router.rl(&format!(
            "RL.GCRA {base} 1 10 BLOCK 60 NOW {}",
            NOW + 1_000_001
        ));
        assert_eq!(r, (0, 0, 59_000, 59_000));
    }
    // RL.ALL over two slots: CROSSSLOT, with BLOCK as without.
    let line = format!(
        "RL.ALL 2 GCRA {{{}}}:x 5 10 BLOCK 5 FIXED {{{}}}:y 5 10 BLOCK 5 NOW {NOW}",
        tags[0], tags[1]
    );
    for node in 0..3 {
        let e = err_line(&mut cluster.nodes[node].conn(), &line);
        assert!(e.starts_with("CROSSSLOT"), "node {node}: {e}");
    }
    assert_eq!(router.moved + router.asked, 0);
}
