//! RL.PSEUDONYM against vectors computed independently of the module (Python's hmac
//! and ipaddress), its secret from a file named by `rl.secret-file` or from the
//! server's RL_SECRET, and that secret never readable through Redis: not in CONFIG GET,
//! MODULE LIST, INFO, SLOWLOG, MONITOR or the server log.
mod common;
use common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SECRET_A: &str = "rl-test-secret-ALPHA-7f3q";
const SECRET_B: &str = "rl-test-secret-BRAVO-9k2x";

// The expected pseudonyms, computed once with Python 3.11, independently of the module:
//
//   import hmac, hashlib, ipaddress
//   def p(secret, ident, day):
//       return hmac.new(secret, (ident + "|" + day).encode(), hashlib.sha256).hexdigest()[:24]
//   A = b"rl-test-secret-ALPHA-7f3q"; B = b"rl-test-secret-BRAVO-9k2x"
//
// and the canonical identities with ipaddress:
//
//   str(ipaddress.ip_address("2001:0DB8:0000:0000:0008:0800:200C:417A"))
//       == "2001:db8::8:800:200c:417a"
//   str(ipaddress.ip_address("::FFFF:C000:0201").ipv4_mapped) == "192.0.2.1"
//   str(ipaddress.ip_network("2001:DB8:1:2:3:4:5:6/64", strict=False)) == "2001:db8:1:2::/64"
//   str(ipaddress.ip_network("2001:DB8:1:2:3:4:5:6/48", strict=False)) == "2001:db8:1::/48"
//   str(ipaddress.ip_address("2001:DB8:1:2:3:4:5:6")) == "2001:db8:1:2:3:4:5:6"

/// p(A, "192.0.2.1", "2025-11-30")
const A_V4_1130: &str = "b6cbb014199c5c1f47759b7d";
/// p(A, "192.0.2.1", "2025-12-01")
const A_V4_1201: &str = "3bb5906cc9ec4f075e889cf7";
/// p(B, "192.0.2.1", "2025-11-30")
const B_V4_1130: &str = "2e872b0c809c4605a57f0e6e";
/// p(A, "2001:db8::8:800:200c:417a", "2025-11-30")
const A_V6_1130: &str = "f1642589889995ec8a035f07";
/// p(A, "ak_live_3f9a7c", "2025-11-30")
const A_KEY_1130: &str = "0c2d2e6a9ea8df5eee89ebd1";
/// p(A, " 192.0.2.1", "2025-11-30"): not an IP address (leading space), hashed as given.
const A_SPACED_1130: &str = "b8245c8f4cd96b2754e6957a";
/// p(A, "2001:db8:1:2::/64", "2025-11-30")
const A_NET64_1130: &str = "af1ec6f445008449d7fb5453";
/// p(A, "2001:db8:1::/48", "2025-11-30")
const A_NET48_1130: &str = "9d8306349c971d3e8788ef7e";
/// p(A, "2001:db8:1:2:3:4:5:6", "2025-11-30")
const A_V6FULL_1130: &str = "8a302135fc1af2722d6be18d";

/// 2025-11-30T05:20:00Z (T0) and the following UTC midnight, 2025-12-01T00:00:00Z, in µs.
const MIDNIGHT: u64 = 1_764_547_200_000_000;

fn pseudonym(c: &mut Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd("RL.PSEUDONYM");
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(c)
        .unwrap_or_else(|e| panic!("RL.PSEUDONYM {args:?}: {e}"))
}

fn pseudonym_err(c: &mut Connection, args: &[&str]) -> String {
    let mut all: Vec<&[u8]> = vec![b"RL.PSEUDONYM"];
    all.extend(args.iter().map(|a| a.as_bytes()));
    rl_err(c, &all)
}

/// The pseudonym of 192.0.2.1 at T0 (2025-11-30).
fn v4(c: &mut Connection) -> String {
    pseudonym(c, &["192.0.2.1", "NOW", &T0.to_string()])
}

/// Secret files live in their own directory, so no path contains a secret.
fn write_secret(dir: &Path, name: &str, content: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

fn text(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn matches_independent_vectors() {
    let s = Server::start_with_env(&[], &[("RL_SECRET", SECRET_A)]);
    let mut c = s.conn();
    let t0 = T0.to_string();
    let cases: [(&[&str], &str); 12] = [
        (&["192.0.2.1"], A_V4_1130),
        // IPv6 in a non-canonical form: uppercase, leading zeros, zero groups.
        (&["2001:0DB8:0000:0000:0008:0800:200C:417A"], A_V6_1130),
        (&["2001:db8::8:800:200c:417a"], A_V6_1130),
        // IPv4-mapped IPv6 hashes as the plain IPv4.
        (&["::ffff:192.0.2.1"], A_V4_1130),
        (&["::FFFF:C000:0201"], A_V4_1130),
        // Not an IP: hashed byte for byte.
        (&["ak_live_3f9a7c"], A_KEY_1130),
        (&[" 192.0.2.1"], A_SPACED_1130),
        // PREFIX6: the canonical network and prefix length.
        (&["2001:DB8:1:2:3:4:5:6"], A_V6FULL_1130),
        (&["2001:DB8:1:2:3:4:5:6", "PREFIX6", "64"], A_NET64_1130),
        (
            &["2001:db8:1:2:ffff:ffff:ffff:ffff", "PREFIX6", "64"],
            A_NET64_1130,
        ),
        (&["2001:DB8:1:2:3:4:5:6", "PREFIX6", "48"], A_NET48_1130),
        // PREFIX6 leaves an IPv4 address (mapped or not) as it is.
        (&["::ffff:192.0.2.1", "PREFIX6", "64"], A_V4_1130),
    ];
    for (args, want) in cases {
        let mut with_now = args.to_vec();
        with_now.extend(["NOW", &t0]);
        assert_eq!(pseudonym(&mut c, &with_now), want, "{args:?}");
        // NOW before PREFIX6 is the same request.
        let mut now_first = vec![args[0], "NOW", &t0];
        now_first.extend(&args[1..]);
        assert_eq!(pseudonym(&mut c, &now_first), want, "{now_first:?}");
    }
    assert_eq!(
        pseudonym(&mut c, &["192.0.2.1", "NOW", &t0, "PREFIX6", "64"]),
        A_V4_1130
    );

    // With a scope: "<24 hex>:<scope>".
    assert_eq!(
        pseudonym(&mut c, &["192.0.2.1", "trending", "NOW", &t0]),
        format!("{A_V4_1130}:trending")
    );
    assert_eq!(
        pseudonym(&mut c, &["::FFFF:C000:0201", "login", "NOW", &t0]),
        format!("{A_V4_1130}:login")
    );
    assert_eq!(
        pseudonym(
            &mut c,
            &[
                "2001:DB8:1:2:3:4:5:6",
                "trending",
                "PREFIX6",
                "64",
                "NOW",
                &t0
            ]
        ),
        format!("{A_NET64_1130}:trending")
    );

    // The day rolls over exactly at UTC midnight.
    let last = (MIDNIGHT - 1).to_string();
    let first = MIDNIGHT.to_string();
    assert_eq!(pseudonym(&mut c, &["192.0.2.1", "NOW", &last]), A_V4_1130);
    assert_eq!(pseudonym(&mut c, &["192.0.2.1", "NOW", &first]), A_V4_1201);
    assert_eq!(
        pseudonym(&mut c, &["192.0.2.1", "api", "NOW", &first]),
        format!("{A_V4_1201}:api")
    );

    // Without NOW: the server's day (today, by the server clock).
    let (secs, _): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    let today = pseudonym(&mut c, &["192.0.2.1"]);
    let (secs_after, _): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    let mut at = |s: u64| pseudonym(&mut c, &["192.0.2.1", "NOW", &(s * 1_000_000).to_string()]);
    assert!(today == at(secs) || today == at(secs_after), "{today}");
    assert_eq!(today.len(), 24);
    assert!(today
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
}

#[test]
fn secret_file_at_load_and_config_set_take_effect_at_once() {
    let secrets = tempfile::tempdir().unwrap();
    let a = write_secret(secrets.path(), "a.secret", &format!("{SECRET_A}\n"));
    let b = write_secret(secrets.path(), "b.secret", SECRET_B);
    let s = Server::start_with(&["--rl.secret-file", text(&a)]);
    let mut c = s.conn();
    // The trailing newline is not part of the secret.
    assert_eq!(v4(&mut c), A_V4_1130);
    assert_eq!(secret_file_config(&mut c), text(&a));

    set_secret_file(&mut c, text(&b)).unwrap();
    assert_eq!(v4(&mut c), B_V4_1130);
    assert_eq!(secret_file_config(&mut c), text(&b));

    // The file is read when the config is set, not at each call.
    std::fs::write(&b, format!("{SECRET_A}\n")).unwrap();
    assert_eq!(v4(&mut c), B_V4_1130);
    set_secret_file(&mut c, text(&a)).unwrap();
    assert_eq!(v4(&mut c), A_V4_1130);
}

/// Rotating the secret as the README says: Redis skips CONFIG SET when the value is
/// unchanged, so a new secret goes into a new file (or the path is cleared and set
/// again); either way the new secret is in force at once.
#[test]
fn rotating_the_secret_takes_effect_at_once() {
    let secrets = tempfile::tempdir().unwrap();
    let a = write_secret(secrets.path(), "a.secret", &format!("{SECRET_A}\n"));
    let s = Server::start_with(&["--rl.secret-file", text(&a)]);
    let mut c = s.conn();
    assert_eq!(v4(&mut c), A_V4_1130);
    let b = write_secret(secrets.path(), "b.secret", &format!("{SECRET_B}\n"));
    set_secret_file(&mut c, text(&b)).unwrap();
    assert_eq!(v4(&mut c), B_V4_1130, "a new file's secret");
    std::fs::write(&b, format!("{SECRET_A}\n")).unwrap();
    set_secret_file(&mut c, "").unwrap();
    set_secret_file(&mut c, text(&b)).unwrap();
    assert_eq!(v4(&mut c), A_V4_1130, "the same path cleared and set again");
}

#[test]
fn config_set_file_overrides_the_environment_and_empty_path_returns_to_it() {
    let secrets = tempfile::tempdir().unwrap();
    let b = write_secret(secrets.path(), "b.secret", &format!("{SECRET_B}\n"));
    let s = Server::start_with_env(&[], &[("RL_SECRET", SECRET_A)]);
    let mut c = s.conn();
    assert_eq!(v4(&mut c), A_V4_1130);
    set_secret_file(&mut c, text(&b)).unwrap();
    assert_eq!(v4(&mut c), B_V4_1130);
    set_secret_file(&mut c, "").unwrap();
    assert_eq!(v4(&mut c), A_V4_1130);
}

#[test]
fn bad_secret_files_are_refused_and_the_old_secret_stays() {
    let secrets = tempfile::tempdir().unwrap();
    let a = write_secret(secrets.path(), "a.secret", &format!("{SECRET_A}\n"));
    let empty = write_secret(secrets.path(), "empty.secret", "");
    let newline = write_secret(secrets.path(), "newline.secret", "\n");
    let missing = secrets.path().join("missing.secret");
    let directory = secrets.path().join("a-directory");
    std::fs::create_dir(&directory).unwrap();
    let locked = write_secret(secrets.path(), "locked.secret", SECRET_B);
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    // Root reads a mode-000 file anyway; then only the directory is unreadable.
    let locked_is_unreadable = std::fs::read(&locked).is_err();

    for (s, source) in [
        (Server::start_with(&["--rl.secret-file", text(&a)]), "file"),
        (
            Server::start_with_env(&[], &[("RL_SECRET", SECRET_A)]),
            "RL_SECRET",
        ),
    ] {
        let mut c = s.conn();
        let path_before = secret_file_config(&mut c);
        let mut bad: Vec<(&Path, &[&str])> = vec![
            (&missing, &["missing.secret", "No such file"]),
            (&empty, &["empty.secret", "empty"]),
            (&newline, &["newline.secret", "empty"]),
            (&directory, &["a-directory"]),
        ];
        if locked_is_unreadable {
            bad.push((&locked, &["locked.secret", "ermission"]));
        }
        for (path, words) in bad {
            let e = set_secret_file(&mut c, text(path)).expect_err(text(path));
            let e = e.to_string();
            assert!(e.contains("rl.secret-file"), "{source}: {e}");
            for w in words {
                assert!(e.contains(w), "{source}: {e} should mention {w}");
            }
            // Nothing changed: same path, same secret.
            assert_eq!(secret_file_config(&mut c), path_before, "{source}");
            assert_eq!(v4(&mut c), A_V4_1130, "{source}: after {e}");
        }
    }
}

#[test]
fn no_secret_is_an_error_never_a_fallback() {
    let t0 = T0.to_string();
    for s in [
        Server::start(),
        Server::start_with_env(&[], &[("RL_SECRET", "")]),
    ] {
        let mut c = s.conn();
        for args in [
            &["192.0.2.1", "NOW", t0.as_str()][..],
            &["192.0.2.1"][..],
            &["ak_live_3f9a7c", "scope"][..],
        ] {
            let e = pseudonym_err(&mut c, args);
            assert!(e.contains("no secret"), "{e}");
            assert!(
                e.contains("rl.secret-file") && e.contains("RL_SECRET"),
                "{e}"
            );
        }
        // A refused file does not leave a fallback either.
        let e = set_secret_file(&mut c, "/nonexistent/rl.secret").unwrap_err();
        assert!(e.to_string().contains("No such file"), "{e}");
        let e = pseudonym_err(&mut c, &["192.0.2.1"]);
        assert!(e.contains("no secret"), "{e}");
        // And once a secret is given, the pseudonym is the vector's.
        let secrets = tempfile::tempdir().unwrap();
        let a = write_secret(secrets.path(), "a.secret", SECRET_A);
        set_secret_file(&mut c, text(&a)).unwrap();
        assert_eq!(v4(&mut c), A_V4_1130);
    }
}

// ---------------------------------------------------------------------------------
// The secret is never readable through Redis.

/// Every string inside a reply, one per line.
fn flatten(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::BulkString(b) => out.extend_from_slice(b),
        Value::SimpleString(s) => out.extend_from_slice(s.as_bytes()),
        Value::Int(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Array(items) | Value::Set(items) | Value::Push { data: items, .. } => {
            items.iter().for_each(|i| flatten(i, out))
        }
        Value::Map(pairs) => pairs.iter().for_each(|(k, v)| {
            flatten(k, out);
            flatten(v, out);
        }),
        Value::VerbatimString { text, .. } => out.extend_from_slice(text.as_bytes()),
        other => out.extend_from_slice(format!("{other:?}").as_bytes()),
    }
    out.push(b'\n');
}

fn reply_text(c: &mut Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let v: Value = cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let mut out = vec![];
    flatten(&v, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [SECRET_A, SECRET_B] {
        assert!(
            !text.contains(secret),
            "{what} shows the secret {secret}:\n{text}"
        );
    }
}

/// A raw MONITOR connection; everything it receives is kept.
struct Monitor {
    stream: TcpStream,
    seen: Vec<u8>,
}

impl Monitor {
    fn open(s: &Server) -> Monitor {
        let stream = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut m = Monitor {
            stream,
            seen: vec![],
        };
        m.stream.write_all(b"MONITOR\r\n").unwrap();
        m.read_until("+OK\r\n");
        m
    }

    /// Reads until `marker` has arrived (at most 5 s).
    fn read_until(&mut self, marker: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut buf = [0u8; 65536];
        while !String::from_utf8_lossy(&self.seen).contains(marker) {
            assert!(
                Instant::now() < deadline,
                "MONITOR never showed {marker:?}: {}",
                String::from_utf8_lossy(&self.seen)
            );
            match self.stream.read(&mut buf) {
                Ok(0) => panic!("MONITOR connection closed"),
                Ok(n) => self.seen.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("MONITOR: {e}"),
            }
        }
    }
}

/// Uses the secret in force (`first`), switches to file `b` with CONFIG SET (after a
/// refused switch), uses it, and then looks for either secret everywhere Redis shows
/// anything: MONITOR, SLOWLOG, CONFIG GET *, MODULE LIST, INFO everything, the log.
fn assert_secret_never_shown(s: &Server, first: &str, b: &Path) {
    let mut c = s.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(0)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut c).unwrap();
    let mut monitor = Monitor::open(s);

    assert_eq!(v4(&mut c), first);
    assert_eq!(
        pseudonym(&mut c, &["192.0.2.1", "scope", "NOW", &T0.to_string()]),
        format!("{first}:scope")
    );
    set_secret_file(&mut c, "/nonexistent/rl.secret").unwrap_err();
    set_secret_file(&mut c, text(b)).unwrap();
    assert_eq!(v4(&mut c), B_V4_1130);
    let _: String = redis::cmd("ECHO")
        .arg("end-of-secret-check")
        .query(&mut c)
        .unwrap();

    monitor.read_until("end-of-secret-check");
    let monitored = String::from_utf8_lossy(&monitor.seen).into_owned();
    assert!(
        monitored.to_ascii_uppercase().contains("RL.PSEUDONYM"),
        "MONITOR did not show the calls: {monitored}"
    );
    assert_no_secret("MONITOR", &monitored);

    let slowlog = reply_text(&mut c, &["SLOWLOG", "GET", "1000"]);
    assert!(
        slowlog.to_ascii_uppercase().contains("RL.PSEUDONYM"),
        "SLOWLOG did not record the calls: {slowlog}"
    );
    assert_no_secret("SLOWLOG GET", &slowlog);

    let config = reply_text(&mut c, &["CONFIG", "GET", "*"]);
    assert!(config.contains("rl.secret-file"), "{config}");
    assert!(
        config.contains(text(b)),
        "CONFIG GET shows the path: {config}"
    );
    assert_no_secret("CONFIG GET *", &config);
    assert_no_secret(
        "CONFIG GET rl.*",
        &reply_text(&mut c, &["CONFIG", "GET", "rl.*"]),
    );

    let modules = reply_text(&mut c, &["MODULE", "LIST"]);
    assert!(modules.contains("rl"), "{modules}");
    assert_no_secret("MODULE LIST", &modules);

    let info = reply_text(&mut c, &["INFO", "everything"]);
    assert!(info.contains("# rl"), "{info}");
    assert_no_secret("INFO everything", &info);

    assert_no_secret("CLIENT LIST", &reply_text(&mut c, &["CLIENT", "LIST"]));

    let log = s.log();
    assert!(
        log.contains("Module 'rl' loaded"),
        "not the server log: {log}"
    );
    assert_no_secret("the server log", &log);
}

#[test]
fn file_secret_is_never_shown() {
    let secrets = tempfile::tempdir().unwrap();
    let a = write_secret(secrets.path(), "a.secret", &format!("{SECRET_A}\n"));
    let b = write_secret(secrets.path(), "b.secret", &format!("{SECRET_B}\n"));
    let s = Server::start_with(&["--loglevel", "debug", "--rl.secret-file", text(&a)]);
    assert_secret_never_shown(&s, A_V4_1130, &b);
}

#[test]
fn environment_secret_is_never_shown() {
    let secrets = tempfile::tempdir().unwrap();
    let b = write_secret(secrets.path(), "b.secret", &format!("{SECRET_B}\n"));
    let s = Server::start_with_env(&["--loglevel", "debug"], &[("RL_SECRET", SECRET_A)]);
    assert_secret_never_shown(&s, A_V4_1130, &b);
}
