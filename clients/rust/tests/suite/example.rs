//! examples/axum.rs, run as a program against a real server, over real HTTP.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, Server};

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cargo test` builds the examples next to the test binaries (target/<profile>/examples).
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("axum")
}

fn get(port: u16) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

#[test]
fn axum_example_limits_over_http() {
    let server = Server::start();
    let port = free_port(0);
    let _app = Running(
        Command::new(example_binary())
            .env("REDIS_URL", server.url())
            .env("RL_SECRET", crate::common::SECRET)
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .spawn()
            .expect("examples/axum was not built"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        match get(port) {
            Ok(response) => break response,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("the example never answered: {e}"),
        }
    };
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
