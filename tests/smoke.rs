//! The three limiters answer through a real client, with the spec's reply and layouts.
mod common;
use common::*;

#[test]
fn slidelog_layout_and_reply() {
    let s = Server::start();
    let mut c = s.conn();
    let now = T0 + 123;
    assert_eq!(
        rl(
            &mut c,
            &format!("RL.SLIDELOG rl:log:a 3 10 NOW {now} COST 2")
        ),
        (1, 1, 0, 10_000)
    );
    let members: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg("rl:log:a")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut c)
        .unwrap();
    assert_eq!(members.len(), 2);
    for (m, score) in &members {
        let (ts, hex) = m.split_once(':').unwrap();
        assert_eq!(ts, now.to_string());
        assert_eq!(hex.len(), 8);
        assert!(hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_eq!(*score, now as f64);
    }
    assert_ne!(members[0].0, members[1].0);
    let pttl: i64 = redis::cmd("PTTL").arg("rl:log:a").query(&mut c).unwrap();
    assert!(pttl > 9_000 && pttl <= 10_000, "{pttl}");
}

#[test]
fn fixed_and_slidecount_keys() {
    let s = Server::start();
    let mut c = s.conn();
    let now = T0 + 2_500_000;
    assert_eq!(
        rl(&mut c, &format!("RL.FIXED rl:f 2 10 NOW {now}")),
        (1, 1, 0, 7_500)
    );
    let start = T0 / 1_000_000;
    let v: i64 = redis::cmd("GET")
        .arg(format!("rl:f:{start}"))
        .query(&mut c)
        .unwrap();
    assert_eq!(v, 1);
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!("rl:f:{start}"))
        .query(&mut c)
        .unwrap();
    assert!(ttl > 19_000 && ttl <= 20_000);
    assert_eq!(
        rl(
            &mut c,
            &format!("RL.SLIDECOUNT rl:c 5 1500ms NOW {now} COST 2")
        )
        .0,
        1
    );
    let i = now / 1_500_000;
    let v: i64 = redis::cmd("GET")
        .arg(format!("rl:c:{i}"))
        .query(&mut c)
        .unwrap();
    assert_eq!(v, 2);
}
