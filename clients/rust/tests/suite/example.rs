//! examples/axum.rs, run as a program against a real server, over real HTTP.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, scripts_backend, Server};
use crate::metrics::sample;

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cargo test` builds the examples next to the test binaries (target/<profile>/examples).
fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name)
}

fn get_path(port: u16, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

fn get(port: u16) -> std::io::Result<String> {
    get_path(port, "/")
}

/// Starts the example `name` against `server` and returns it with its first answer to `/`.
fn start(name: &str, server: &Server, port: u16) -> (Running, String) {
    let app = Running(
        Command::new(example_binary(name))
            .env("REDIS_URL", server.url())
            .env("RL_SECRET", crate::common::SECRET)
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("examples/{name} was not built: {e}")),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match get(port) {
            Ok(response) => return (app, response),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("examples/{name} never answered: {e}"),
        }
    }
}

#[test]
fn axum_example_limits_over_http() {
    let server = Server::start();
    let port = free_port(0);
    let (_app, first) = start("axum", &server, port);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(
        first.contains("ratelimit-policy: \"burst\";q=10;w=1, \"minute\";q=100;w=60"),
        "{first}"
    );
    assert!(
        first.contains("ratelimit: \"burst\";r=1;t=1, \"minute\";r=99;"),
        "{first}"
    );
    assert!(first.ends_with("hello, 1 left\n"), "{first}");
    // 10 a second with a burst of 2: 20 requests in a row (a few ms each on loopback,
    // far under the 1.8 s they would need to all pass) meet a 429.
    let refused = (0..20)
        .map(|_| get(port).unwrap())
        .find(|r| r.starts_with("HTTP/1.1 429"))
        .expect("no request was refused");
    assert!(refused.contains("retry-after: 1"), "{refused}");
    assert!(
        refused.ends_with(r#"{"error":"rate_limited"}"#),
        "{refused}"
    );
}

#[test]
fn axum_metrics_example_serves_exact_counts() {
    let server = Server::start();
    let port = free_port(0);
    // 5 at once: the first 5 of 8 requests in a row pass, 3 are refused (the next slot
    // frees 36 s later, far beyond this test).
    let (_app, first) = start("axum_metrics", &server, port);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let statuses: Vec<String> = (1..8)
        .map(|_| get(port).unwrap()[..12].to_string())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| *s == "HTTP/1.1 429").count(),
        3,
        "{statuses:?}"
    );
    // Scraped twice: `/metrics` itself is outside the limiter, and counts nothing.
    get_path(port, "/metrics").unwrap();
    let text = get_path(port, "/metrics").unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let backend = if scripts_backend() {
        "scripts"
    } else {
        "module"
    };
    let count = |outcome: &str| {
        sample(
            &text,
            "redis_rl_decisions_total",
            &[("limit", "api"), ("outcome", outcome), ("backend", backend)],
        )
    };
    assert_eq!(count("allowed"), 5.0, "{text}");
    assert_eq!(count("denied"), 3.0, "{text}");
    let calls = sample(
        &text,
        "redis_rl_call_duration_seconds_count",
        &[("limit", "api")],
    );
    assert_eq!(calls, 8.0, "{text}");
    // The kit's buckets, not the exporter's defaults (which would make it a summary).
    assert!(
        text.contains("redis_rl_call_duration_seconds_bucket{limit=\"api\",le=\"0.00005\"}"),
        "{text}"
    );
}
