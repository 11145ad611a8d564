//! A panic inside a command must become an error reply, never an aborted server.
mod common;
use common::*;

#[test]
fn a_panicking_command_replies_with_an_error_and_the_server_lives() {
    let module = module_path();
    let mut s =
        Server::start_without_module(&["--loadmodule", module.to_str().unwrap(), "debug-commands"]);
    let mut c = s.conn();
    assert_eq!(s.panics(), Vec::<String>::new(), "before any panic");
    redis::cmd("SET")
        .arg("kept")
        .arg("1")
        .query::<()>(&mut c)
        .unwrap();
    for _ in 0..3 {
        let err = rl_err(&mut c, &[b"RL.DEBUG-PANIC", b"now"]);
        // The reply says what panicked, and where.
        assert!(err.contains("internal error"), "{err}");
        assert!(err.contains("rl.debug-panic was asked to panic"), "{err}");
        assert!(err.contains("src/server/handlers.rs"), "{err}");
    }
    assert!(s.alive());
    // The check storm.rs makes after its storm sees each of them, in the Redis log
    // (where an operator looks: Redis usually discards stderr) and on stderr.
    let panics = s.panics();
    assert_eq!(panics.len(), 6, "{panics:?}\nstderr:\n{}", s.stderr());
    let logged: Vec<&str> = s
        .log()
        .lines()
        .filter(|l| {
            l.contains("<rl> rl.debug-panic panicked at src/server/handlers.rs")
                && l.contains("asked to panic")
        })
        .map(|_| "")
        .collect();
    assert_eq!(logged.len(), 3, "Redis log:\n{}", s.log());
    let kept: String = redis::cmd("GET").arg("kept").query(&mut c).unwrap();
    assert_eq!(kept, "1");
    assert_eq!(rl(&mut c, &format!("RL.FIXED {{t}}k 1 10 NOW {T0}")).0, 1);
}

#[test]
fn the_debug_command_does_not_exist_without_the_load_argument() {
    let s = Server::start();
    let mut c = s.conn();
    let err = rl_err(&mut c, &[b"RL.DEBUG-PANIC"]);
    assert!(err.to_lowercase().contains("unknown command"), "{err}");
}
