//! `INFO rl`: per command, calls, allowed, denied and errors (`rl_<cmd>_<counter>`),
//! moving exactly as calls are made; and INFO (default, everything, the section
//! alone) stays well-formed RESP with the section where Redis puts module sections.
mod common;
use common::*;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const COMMANDS: [&str; 11] = [
    "slidelog",
    "slidecount",
    "slidewindow",
    "fixed",
    "counter",
    "gcra",
    "tokenbucket",
    "concurrency",
    "throttle",
    "all",
    "pseudonym",
];
const COUNTERS: [&str; 4] = ["calls", "allowed", "denied", "errors"];

/// The `rl` section's fields, by name.
fn counters(c: &mut Connection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("rl").query(c).unwrap();
    let section = rl_section(&info);
    section
        .iter()
        // RL.TOP's size fields are gauges, checked on their own below.
        .filter(|line| !line.starts_with("rl_build:") && !line.starts_with("rl_top_"))
        .map(|line| {
            let (name, value) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("not a field: {line:?}"));
            (name.to_string(), value.parse().unwrap())
        })
        .collect()
}

/// The lines of the `# rl` section (without the header).
fn rl_section(info: &str) -> Vec<&str> {
    let mut lines = info.split("\r\n").skip_while(|l| *l != "# rl");
    assert_eq!(lines.next(), Some("# rl"), "no # rl section in:\n{info}");
    lines.take_while(|l| !l.is_empty()).collect()
}

/// Every field in the order INFO shows them: the build id, then the counters.
fn field_names() -> Vec<String> {
    std::iter::once("rl_build".to_string())
        .chain(
            COMMANDS
                .iter()
                .flat_map(|cmd| COUNTERS.iter().map(move |n| format!("rl_{cmd}_{n}"))),
        )
        .chain(["rl_top_entries".to_string(), "rl_top_bytes".to_string()])
        .collect()
}

/// Runs `f`, then checks that exactly the fields in `moved` grew by the given amounts
/// and nothing else changed.
fn expect_moves(
    c: &mut Connection,
    what: &str,
    moved: &[(&str, u64)],
    f: impl FnOnce(&mut Connection),
) {
    let before = counters(c);
    f(c);
    let after = counters(c);
    let mut want = before.clone();
    for (field, n) in moved {
        *want
            .get_mut(&format!("rl_{field}"))
            .unwrap_or_else(|| panic!("no field rl_{field}")) += n;
    }
    assert_eq!(after, want, "{what}");
}

fn call_ok(c: &mut Connection, line: &str) -> Value {
    let mut cmd = redis::Cmd::new();
    for w in line.split_whitespace() {
        cmd.arg(w);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn call_err(c: &mut Connection, line: &str) -> String {
    let words: Vec<&[u8]> = line.split_whitespace().map(str::as_bytes).collect();
    rl_err(c, &words)
}

/// `rl_top_entries` and `rl_top_bytes`: RL.TOP's summary, as it fills and is reset.
#[test]
fn top_fields_show_the_summary_size() {
    let s = Server::start();
    let mut c = s.conn();
    let top = |c: &mut Connection| -> (u64, u64) {
        let info: String = redis::cmd("INFO").arg("rl").query(c).unwrap();
        let field = |name: &str| -> u64 {
            rl_section(&info)
                .iter()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name}"))
                .parse()
                .unwrap()
        };
        (field("rl_top_entries:"), field("rl_top_bytes:"))
    };
    assert_eq!(top(&mut c), (0, 0));
    for (denied, key) in ["a", "b", "c"].iter().enumerate() {
        rl(&mut c, &format!("RL.FIXED {key} 1 10 NOW {T0}"));
        assert_eq!(top(&mut c).0, denied as u64, "an admission is not tracked");
        rl(&mut c, &format!("RL.FIXED {key} 1 10 NOW {T0}"));
    }
    let (entries, bytes) = top(&mut c);
    assert_eq!(entries, 3);
    assert!(bytes > 0);
    let _: Value = redis::cmd("RL.TOP").arg("RESET").query(&mut c).unwrap();
    assert_eq!(top(&mut c), (0, 0));
}

#[test]
fn counters_move_exactly_as_calls_are_made() {
    let s = Server::start_with_env(&[], &[("RL_SECRET", "info-test-secret")]);
    let mut c = s.conn();

    // The build id of these sources (unless RL_MODULE names another module), then
    // every counter, in order, all zero on a fresh server.
    if std::env::var_os("RL_MODULE").is_none() {
        assert_eq!(build_id(&mut c), Some(current_build_id()));
    }
    let info: String = redis::cmd("INFO").arg("rl").query(&mut c).unwrap();
    let names: Vec<&str> = rl_section(&info)
        .iter()
        .map(|l| l.split_once(':').unwrap().0)
        .collect();
    assert_eq!(names, field_names());
    assert!(counters(&mut c).values().all(|&v| v == 0));

    let _: () = redis::cmd("ZADD")
        .arg("a-zset")
        .arg(1)
        .arg("m")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("a-string")
        .arg("x")
        .query(&mut c)
        .unwrap();
    // The counters FIXED (window start in seconds) and SLIDECOUNT (window index) would
    // use for base key `wt` at T0 with a 10 s window, holding the wrong type.
    for derived in ["wt:1764480000", "wt:176448000"] {
        let _: () = redis::cmd("ZADD")
            .arg(derived)
            .arg(1)
            .arg("m")
            .query(&mut c)
            .unwrap();
    }

    // The six limiters: allowed, denied, several kinds of error.
    for (cmd, wrong_key) in [
        ("slidelog", "a-string"),
        ("slidecount", "wt"),
        ("slidewindow", "a-zset"),
        ("fixed", "wt"),
        ("counter", "a-zset"),
        ("gcra", "a-zset"),
        ("tokenbucket", "a-zset"),
    ] {
        let name = cmd.to_ascii_uppercase();
        let call = format!("RL.{name} k:{cmd} 2 10 NOW {T0}");
        let allowed = [
            (&*format!("{cmd}_calls"), 1),
            (&*format!("{cmd}_allowed"), 1),
        ];
        let denied = [
            (&*format!("{cmd}_calls"), 1),
            (&*format!("{cmd}_denied"), 1),
        ];
        let error = [
            (&*format!("{cmd}_calls"), 1),
            (&*format!("{cmd}_errors"), 1),
        ];

        expect_moves(&mut c, &call, &allowed, |c| {
            assert_eq!(rl(c, &call).0, 1);
        });
        let cost2 = format!("{call} COST 2");
        expect_moves(&mut c, &cost2, &denied, |c| {
            assert_eq!(rl(c, &cost2).0, 0);
        });
        expect_moves(&mut c, &call, &allowed, |c| {
            assert_eq!(rl(c, &call).0, 1);
        });
        expect_moves(&mut c, &call, &denied, |c| {
            assert_eq!(rl(c, &call).0, 0);
        });
        // Cost above the limit: denied, never admitted.
        let huge = format!("RL.{name} fresh:{cmd} 2 10 COST 3 NOW {T0}");
        expect_moves(&mut c, &huge, &denied, |c| {
            assert_eq!(rl(c, &huge).0, 0);
        });
        for bad in [
            format!("RL.{name} k:{cmd} 0 10 NOW {T0}"),
            format!("RL.{name} k:{cmd} 2 10 NOW 1764480000"),
            format!("RL.{name} k:{cmd} 2 10 BOGUS"),
            format!("RL.{name} {wrong_key} 2 10 NOW {T0}"),
        ] {
            expect_moves(&mut c, &bad, &error, |c| {
                call_err(c, &bad);
            });
        }
        // Redis refuses a wrong number of arguments itself (the commands declare
        // their arity): the module never sees those calls.
        for short in [format!("RL.{name} k:{cmd} 2"), format!("RL.{name}")] {
            expect_moves(&mut c, &short, &[], |c| {
                assert!(call_err(c, &short).contains("wrong number of arguments"));
            });
        }
        // A PEEK is a call, counted with its decision (here: full, so denied).
        let peek = format!("{call} PEEK");
        expect_moves(&mut c, &peek, &denied, |c| {
            assert_eq!(rl(c, &peek).0, 0);
        });

        // Many at once, pipelined: 3 allowed then 7 denied on a fresh key.
        expect_moves(
            &mut c,
            "pipeline",
            &[
                (&format!("{cmd}_calls"), 10),
                (&format!("{cmd}_allowed"), 3),
                (&format!("{cmd}_denied"), 7),
            ],
            |c| {
                let mut p = redis::pipe();
                for _ in 0..10 {
                    p.cmd(&format!("RL.{name}"))
                        .arg(format!("many:{cmd}"))
                        .arg(3)
                        .arg(60)
                        .arg("NOW")
                        .arg(T0);
                }
                let replies: Vec<Reply> = p.query(c).unwrap();
                assert_eq!(replies.iter().filter(|r| r.0 == 1).count(), 3);
            },
        );
    }

    // The totals: 2 + 3 admitted; 3 + 1 (PEEK) + 7 denied; 4 errors (and the two
    // calls Redis refused for their arity, which never reached the module).
    let all = counters(&mut c);
    for cmd in &COMMANDS[..6] {
        let f = |n: &str| all[&format!("rl_{cmd}_{n}")];
        assert_eq!(
            (f("calls"), f("allowed"), f("denied"), f("errors")),
            (20, 5, 11, 4),
            "{cmd}"
        );
    }

    // RL.PSEUDONYM answers (neither allowed nor denied) or fails.
    expect_moves(&mut c, "pseudonym", &[("pseudonym_calls", 1)], |c| {
        assert!(matches!(
            call_ok(c, "RL.PSEUDONYM 192.0.2.1"),
            Value::BulkString(_)
        ));
    });
    expect_moves(&mut c, "pseudonym scope", &[("pseudonym_calls", 1)], |c| {
        call_ok(c, &format!("RL.PSEUDONYM ak_live_1 login NOW {T0}"));
    });
    for bad in [
        "RL.PSEUDONYM 2001:db8::1 PREFIX6 0",
        "RL.PSEUDONYM 192.0.2.1 NOW 1764480000",
        "RL.PSEUDONYM 192.0.2.1 scope BOGUS 1",
    ] {
        expect_moves(
            &mut c,
            bad,
            &[("pseudonym_calls", 1), ("pseudonym_errors", 1)],
            |c| {
                call_err(c, bad);
            },
        );
    }
    expect_moves(&mut c, "RL.PSEUDONYM", &[], |c| {
        assert!(call_err(c, "RL.PSEUDONYM").contains("wrong number of arguments"));
    });
    // No secret is an error too.
    let s2 = Server::start();
    let mut c2 = s2.conn();
    expect_moves(
        &mut c2,
        "no secret",
        &[("pseudonym_calls", 1), ("pseudonym_errors", 1)],
        |c| {
            assert!(call_err(c, "RL.PSEUDONYM 192.0.2.1").contains("no secret"));
        },
    );

    // Other commands, and commands Redis refuses before the module runs, count nothing.
    expect_moves(&mut c, "core commands", &[], |c| {
        call_ok(c, "GET k:gcra");
        call_ok(c, "PING");
        let _ = call_err(c, "RL.NOSUCH x");
    });
}

/// Reads one RESP bulk string reply from a raw connection, checking its framing
/// byte for byte.
fn raw_bulk(reader: &mut BufReader<TcpStream>) -> Vec<u8> {
    let mut head = String::new();
    reader.read_line(&mut head).unwrap();
    let len: usize = head
        .strip_prefix('$')
        .and_then(|h| h.strip_suffix("\r\n"))
        .unwrap_or_else(|| panic!("not a bulk string header: {head:?}"))
        .parse()
        .unwrap();
    let mut body = vec![0u8; len + 2];
    reader.read_exact(&mut body).unwrap();
    assert_eq!(&body[len..], b"\r\n", "bulk string not terminated");
    body.truncate(len);
    body
}

/// INFO text: `\r\n`-separated lines, each a `# Section` header, a `name:value` field
/// or a blank line between sections.
fn assert_well_formed(what: &str, info: &[u8]) -> String {
    let text = String::from_utf8(info.to_vec()).unwrap_or_else(|_| panic!("{what}: not UTF-8"));
    for line in text.split("\r\n") {
        assert!(
            !line.contains('\n') && !line.contains('\r'),
            "{what}: {line:?}"
        );
        assert!(
            line.is_empty() || line.starts_with("# ") || line.split_once(':').is_some(),
            "{what}: malformed line {line:?}"
        );
    }
    text
}

#[test]
fn info_stays_valid_resp_with_the_section() {
    let s = Server::start();
    let mut c = s.conn();
    rl(&mut c, &format!("RL.GCRA g 10 1 NOW {T0}"));
    rl(&mut c, &format!("RL.FIXED f 1 10 NOW {T0}"));
    rl(&mut c, &format!("RL.FIXED f 1 10 NOW {T0}"));

    // Over a raw socket: the bulk string lengths are exact, and the connection is
    // still in step afterwards (PING answers PONG).
    let stream = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut replies = vec![];
    for request in ["INFO", "INFO everything", "INFO rl", "INFO rl server"] {
        let words: Vec<&str> = request.split(' ').collect();
        let mut wire = format!("*{}\r\n", words.len());
        for w in &words {
            wire.push_str(&format!("${}\r\n{w}\r\n", w.len()));
        }
        writer.write_all(wire.as_bytes()).unwrap();
        let body = raw_bulk(&mut reader);
        replies.push(assert_well_formed(request, &body));
        writer.write_all(b"PING\r\n").unwrap();
        let mut pong = String::new();
        reader.read_line(&mut pong).unwrap();
        assert_eq!(pong, "+PONG\r\n", "after {request}");
    }
    let [default, everything, alone, two] = &replies[..] else {
        unreachable!()
    };

    // The default INFO lists the module (Redis leaves module sections to
    // `everything` and to asking for them by name).
    // (Valkey lists its Lua engine as a module too, so `rl` need not come first.)
    let modules = default
        .split("# Modules\r\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no Modules section: {default}"));
    assert!(
        modules
            .split("\r\n\r\n")
            .next()
            .is_some_and(|m| m.contains("module:name=rl,")),
        "{default}"
    );
    // `everything` has the section, fields in order, with the counts so far.
    for text in [everything, alone, two] {
        let section = rl_section(text);
        let names: Vec<&str> = section
            .iter()
            .map(|l| l.split_once(':').unwrap().0)
            .collect();
        assert_eq!(names, field_names());
        for line in &section[1..] {
            let value = line.split_once(':').unwrap().1;
            assert!(value.parse::<u64>().is_ok(), "{line}");
        }
        let build = section[0].strip_prefix("rl_build:").unwrap();
        assert!(
            build.len() == 16 && build.bytes().all(|b| b.is_ascii_hexdigit()),
            "{build}"
        );
        for field in [
            "rl_gcra_calls:1",
            "rl_gcra_allowed:1",
            "rl_fixed_calls:2",
            "rl_fixed_allowed:1",
            "rl_fixed_denied:1",
            "rl_slidelog_calls:0",
        ] {
            assert!(section.contains(&field), "{field} in {section:?}");
        }
    }
    assert!(everything.contains("# Server\r\n") && everything.contains("# Keyspace\r\n"));
    // The section alone is just the section.
    assert_eq!(
        alone.trim_end(),
        format!("# rl\r\n{}", rl_section(alone).join("\r\n"))
    );
    assert!(two.contains("# Server\r\n"), "{two}");
    // And through a client library.
    let via_client: String = redis::cmd("INFO").arg("everything").query(&mut c).unwrap();
    assert!(via_client.contains("# rl\r\n"));
}
