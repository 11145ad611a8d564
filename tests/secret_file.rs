//! `CONFIG SET rl.secret-file` runs on the server's main thread, so the file it names
//! must not be able to stall the server or exhaust its memory: a FIFO (opening one for
//! reading waits for a writer), `/dev/zero` (endless), a directory, a huge file, and
//! anything past the 4 KiB cap are refused at once with a clear error, the previous
//! secret stays in force, and the server keeps answering.
mod common;
use common::*;

use std::path::Path;
use std::time::{Duration, Instant};

const SECRET_A: &str = "rl-test-secret-ALPHA-7f3q";
/// p(A, "192.0.2.1", "2025-11-30"), as in tests/pseudonym.rs (computed with Python).
const A_V4_1130: &str = "b6cbb014199c5c1f47759b7d";
/// The cap documented in README.md.
const CAP: usize = 4096;
/// A CONFIG SET that takes longer than this has blocked the server: the client gives
/// up (and the test fails) instead of hanging with it.
const TIMEOUT: Duration = Duration::from_secs(5);

fn text(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A server whose secret is SECRET_A, from a file, and a connection to it whose reads
/// give up after TIMEOUT.
fn server() -> (Server, Connection, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let a = dir.path().join("secret-a");
    std::fs::write(&a, format!("{SECRET_A}\n")).expect("write secret");
    let s = Server::start_with(&["--rl.secret-file", text(&a)]);
    let c = s.conn();
    c.set_read_timeout(Some(TIMEOUT)).expect("read timeout");
    c.set_write_timeout(Some(TIMEOUT)).expect("write timeout");
    let mut c = c;
    assert_eq!(pseudonym(&mut c), A_V4_1130);
    (s, c, dir)
}

fn pseudonym(c: &mut Connection) -> String {
    redis::cmd("RL.PSEUDONYM")
        .arg("192.0.2.1")
        .arg("NOW")
        .arg(T0)
        .query(c)
        .unwrap_or_else(|e| panic!("RL.PSEUDONYM: {e}"))
}

fn ping(s: &Server) {
    let mut fresh = s.conn();
    fresh.set_read_timeout(Some(TIMEOUT)).expect("read timeout");
    let pong: String = redis::cmd("PING").query(&mut fresh).expect("PING");
    assert_eq!(pong, "PONG");
}

/// Points the config at `path`, which must be refused promptly with an error that
/// contains `expected`; the server still answers and the old secret is in force.
fn refused(s: &mut Server, c: &mut Connection, path: &Path, expected: &str) {
    let old = secret_file_config(c);
    let started = Instant::now();
    let result = set_secret_file(c, text(path));
    let took = started.elapsed();
    let err = match result {
        Ok(()) => panic!("CONFIG SET rl.secret-file {} succeeded", path.display()),
        Err(e) => e,
    };
    assert!(
        !err.is_timeout() && !err.is_io_error(),
        "CONFIG SET rl.secret-file {} did not answer within {TIMEOUT:?} \
         (the server is blocked): {err}",
        path.display()
    );
    let message = err.to_string();
    assert!(
        message.contains(expected) && message.contains(text(path)),
        "CONFIG SET rl.secret-file {}: {message:?} does not say {expected:?}",
        path.display()
    );
    assert!(took < TIMEOUT, "took {took:?}");
    assert!(s.alive());
    ping(s);
    assert_eq!(secret_file_config(c), old, "the config changed");
    assert_eq!(
        pseudonym(c),
        A_V4_1130,
        "the old secret is no longer in force"
    );
    // The connection that got the error still works too.
    let pong: String = redis::cmd("PING").query(c).expect("PING");
    assert_eq!(pong, "PONG");
}

#[test]
fn a_fifo_is_refused_without_waiting_for_a_writer() {
    let (mut s, mut c, tmp) = server();
    let dir = tmp.path();
    let fifo = dir.join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(status.success(), "mkfifo {}", fifo.display());
    refused(&mut s, &mut c, &fifo, "is not a regular file");
    // Twice: nothing was left half-open.
    refused(&mut s, &mut c, &fifo, "is not a regular file");
}

#[test]
fn dev_zero_is_refused_without_reading_it() {
    let (mut s, mut c, tmp) = server();
    let dir = tmp.path();
    refused(
        &mut s,
        &mut c,
        Path::new("/dev/zero"),
        "is not a regular file",
    );
    // Through a symbolic link as well: what counts is what was opened.
    let link = dir.join("link-to-zero");
    std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
    refused(&mut s, &mut c, &link, "is not a regular file");
    assert!(s.alive());
}

#[test]
fn a_directory_is_refused() {
    let (mut s, mut c, tmp) = server();
    let dir = tmp.path();
    refused(&mut s, &mut c, dir, "is not a regular file");
    refused(&mut s, &mut c, Path::new("/"), "is not a regular file");
}

#[test]
fn a_huge_file_is_refused_without_reading_it() {
    let (mut s, mut c, tmp) = server();
    let dir = tmp.path();
    // 10 MB, sparse: no disk space, but that much to read.
    let huge = dir.join("huge");
    let file = std::fs::File::create(&huge).expect("create");
    file.set_len(10_000_000).expect("set_len");
    drop(file);
    refused(&mut s, &mut c, &huge, "is longer than 4096 bytes");
    // Still refused when it holds a plausible secret followed by the rest.
    std::fs::write(&huge, "x".repeat(10_000_000)).expect("write");
    refused(&mut s, &mut c, &huge, "is longer than 4096 bytes");
}

#[test]
fn the_cap_is_4096_bytes_of_file() {
    let (mut s, mut c, tmp) = server();
    let dir = tmp.path();
    // One byte over: refused, even when the extra byte is the trailing newline that
    // would be stripped (the cap is on the file, not the secret).
    let over = dir.join("over");
    std::fs::write(&over, "y".repeat(CAP + 1)).expect("write");
    refused(&mut s, &mut c, &over, "is longer than 4096 bytes");
    let over_nl = dir.join("over-nl");
    std::fs::write(&over_nl, format!("{}\n", "y".repeat(CAP))).expect("write");
    refused(&mut s, &mut c, &over_nl, "is longer than 4096 bytes");
    // Exactly at the cap: accepted, and the new secret is in force at once.
    let exact = dir.join("exact");
    std::fs::write(&exact, "z".repeat(CAP)).expect("write");
    set_secret_file(&mut c, text(&exact)).expect("a 4096-byte secret file");
    assert_eq!(secret_file_config(&mut c), text(&exact));
    let p = pseudonym(&mut c);
    assert_ne!(p, A_V4_1130);
    // And an ordinary file after the refusals: back to A.
    let a = dir.join("secret-a-again");
    std::fs::write(&a, SECRET_A).expect("write");
    set_secret_file(&mut c, text(&a)).expect("secret A");
    assert_eq!(pseudonym(&mut c), A_V4_1130);
    assert!(s.alive());
}
