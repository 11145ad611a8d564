//! Every example a user would paste from the documentation, run as shown.
//!
//! - A ```` ```redis-cli ```` block is a session: each `127.0.0.1:6379> COMMAND` line is
//!   sent with `redis-cli --no-raw` to a module-enabled server (one per page, loaded with
//!   `cl-throttle`), and what it prints must be the lines that follow, up to the next
//!   prompt. `<any>` in a shown line stands for any text (a random member suffix).
//! - A ```` ```sh ```` block right after `<!-- doc-test: sh -->` is run with bash before
//!   the sessions that follow it on that page (it creates what they need).
//! - A block right after `<!-- example: PATH -->` must be that file, byte for byte: the
//!   kits' tests run those files, so the docs show what is tested.
//!
//! `RL_DOCS_UPDATE=1 cargo test --release --test docs` rewrites the shown output of every
//! session from what the server printed, for review with `git diff`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::cluster::cli_binary;
use common::Server;

const PROMPT: &str = "127.0.0.1:6379> ";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, every page under docs/, and the kits' READMEs.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root().join("README.md"), root().join("CHANGELOG.md")];
    walk(&root().join("docs"), &mut out);
    for kit in ["node", "php", "python", "rust"] {
        out.push(root().join("clients").join(kit).join("README.md"));
    }
    out.retain(|p| p.exists());
    out.sort();
    out
}

#[derive(Debug)]
enum Block {
    Session {
        start: usize,
        end: usize,
    },
    Shell {
        text: String,
    },
    Example {
        path: String,
        text: String,
        line: usize,
    },
}

/// The testable blocks of a page, with the line range of each session's body.
fn blocks(lines: &[&str]) -> Vec<Block> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut marker: Option<(String, usize)> = None;
    while i < lines.len() {
        let line = lines[i].trim_end();
        if let Some(rest) = line.strip_prefix("<!-- example: ") {
            marker = Some((rest.trim_end_matches("-->").trim().to_string(), i + 1));
        } else if line == "<!-- doc-test: sh -->" {
            marker = Some(("sh".into(), i + 1));
        } else if let Some(lang) = line.trim_start().strip_prefix("```") {
            let open = i;
            let mut close = open + 1;
            while close < lines.len() && lines[close].trim() != "```" {
                close += 1;
            }
            let body = &lines[open + 1..close.min(lines.len())];
            let text: String = body.iter().map(|l| format!("{l}\n")).collect();
            match marker.take() {
                Some((m, _)) if m == "sh" => out.push(Block::Shell { text }),
                Some((path, line)) => out.push(Block::Example { path, text, line }),
                None if lang.trim() == "redis-cli" => out.push(Block::Session {
                    start: open + 1,
                    end: close,
                }),
                None => {}
            }
            i = close;
        } else if !line.is_empty() {
            marker = None;
        }
        i += 1;
    }
    out
}

/// Whether `got` is `shown`, where `<any>` in `shown` stands for any text.
fn matches(shown: &str, got: &str) -> bool {
    let parts: Vec<&str> = shown.split("<any>").collect();
    if parts.len() == 1 {
        return shown == got;
    }
    let Some(rest) = got.strip_prefix(parts[0]) else {
        return false;
    };
    let mut rest = rest;
    for (n, part) in parts.iter().enumerate().skip(1) {
        if n == parts.len() - 1 {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

fn cli(port: u16, command: &str) -> String {
    let out = Command::new(cli_binary())
        .args(["-p", &port.to_string(), "--no-raw"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(format!("{command}\n").as_bytes())?;
            }
            child.wait_with_output()
        })
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_shown_session_and_example_is_what_runs() {
    let update = std::env::var("RL_DOCS_UPDATE").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    let (mut sessions, mut commands, mut examples) = (0, 0, 0);
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("page");
        let lines: Vec<&str> = text.lines().collect();
        let name = page
            .strip_prefix(root())
            .unwrap_or(&page)
            .display()
            .to_string();
        let mut server: Option<Server> = None;
        let mut rewritten: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        // Sessions rewritten from the bottom up keep the line numbers above valid.
        let mut edits: Vec<(usize, usize, Vec<String>)> = Vec::new();
        for block in blocks(&lines) {
            match block {
                Block::Example { path, text, line } => {
                    examples += 1;
                    match std::fs::read_to_string(root().join(&path)) {
                        Ok(file) if file == text => {}
                        Ok(_) => {
                            failures.push(format!("{name}:{line}: the block differs from {path}"))
                        }
                        Err(e) => failures.push(format!("{name}:{line}: {path}: {e}")),
                    }
                }
                Block::Shell { text } => {
                    let ok = Command::new("bash")
                        .args(["-euc", &text])
                        .status()
                        .is_ok_and(|s| s.success());
                    if !ok {
                        failures.push(format!("{name}: a doc-test sh block failed:\n{text}"));
                    }
                }
                Block::Session { start, end } => {
                    sessions += 1;
                    let port = server
                        .get_or_insert_with(|| Server::start_with(&["cl-throttle"]))
                        .port;
                    let mut new_body = Vec::new();
                    let mut i = start;
                    while i < end {
                        let Some(command) = lines[i].strip_prefix(PROMPT) else {
                            failures.push(format!(
                                "{name}:{}: a session line outside any command's output: {}",
                                i + 1,
                                lines[i]
                            ));
                            i += 1;
                            continue;
                        };
                        commands += 1;
                        let mut j = i + 1;
                        while j < end && !lines[j].starts_with(PROMPT) {
                            j += 1;
                        }
                        let shown: Vec<&str> = lines[i + 1..j].to_vec();
                        let got = cli(port, command);
                        let got: Vec<&str> = got.lines().collect();
                        let same = shown.len() == got.len()
                            && shown.iter().zip(&got).all(|(s, g)| matches(s, g));
                        new_body.push(lines[i].to_string());
                        if same {
                            new_body.extend(shown.iter().map(|s| s.to_string()));
                        } else {
                            new_body.extend(got.iter().map(|s| s.to_string()));
                            failures.push(format!(
                                "{name}:{}: {command}\n  shown:\n    {}\n  printed:\n    {}",
                                i + 1,
                                shown.join("\n    "),
                                got.join("\n    ")
                            ));
                        }
                        i = j;
                    }
                    edits.push((start, end, new_body));
                }
            }
        }
        if update && !edits.is_empty() {
            for (start, end, body) in edits.into_iter().rev() {
                rewritten.splice(start..end, body);
            }
            let mut out = rewritten.join("\n");
            out.push('\n');
            if out != text {
                std::fs::write(&page, out).expect("rewrite page");
            }
        }
    }
    println!("docs: {sessions} sessions, {commands} commands, {examples} example files checked");
    assert!(sessions > 0, "no redis-cli session found in the docs");
    assert!(
        failures.is_empty() || update,
        "{} documentation examples differ from what runs:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_mask_stands_for_any_text_and_nothing_else() {
    assert!(matches("1) \"17:<any>\"", "1) \"17:ab12cd34\""));
    assert!(matches("(integer) 5", "(integer) 5"));
    assert!(!matches("(integer) 5", "(integer) 6"));
    assert!(!matches("1) \"17:<any>\"", "1) \"18:ab12cd34\""));
    assert!(matches("<any>:trending", "a26e:trending"));
    assert!(!matches("<any>:trending", "a26e:other"));
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(slug(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_relative_link_leads_to_a_page_and_heading_that_exist() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("page");
        let name = page
            .strip_prefix(root())
            .unwrap_or(&page)
            .display()
            .to_string();
        let dir = page.parent().unwrap_or(&page).to_path_buf();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                dir.join(path)
            };
            if !file.exists() {
                broken.push(format!("{name}: {target}: no such file"));
                continue;
            }
            if !anchor.is_empty() && file.extension().is_some_and(|x| x == "md") {
                let target_text = std::fs::read_to_string(&file).unwrap_or_default();
                if !anchors(&target_text).iter().any(|a| a == anchor) {
                    broken.push(format!("{name}: {target}: no such heading"));
                }
            }
        }
    }
    println!("docs: {checked} relative links checked");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The version a kit's manifest declares (`"version": "x"` or `version = "x"`).
fn kit_version(manifest: &str) -> String {
    let text = std::fs::read_to_string(root().join(manifest)).expect("manifest");
    text.lines()
        .find_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("\"version\": \"")
                .or_else(|| l.strip_prefix("version = \""))?;
            Some(rest.split('"').next()?.to_string())
        })
        .unwrap_or_else(|| panic!("{manifest}: no version"))
}

/// Why one argument of an install line is not a tested form, if it is not. The kits are
/// not on any registry: a kit is installed only as the artifact its package test builds
/// and installs (npm's tarball, the wheel or sdist, Composer's artifact repository).
/// Any other argument is a flag or a library from the registry.
fn untested_install_argument(tool: &str, arg: &str, page: &str) -> Option<String> {
    let arg = arg.trim_matches(|c| c == '\'' || c == '"');
    if arg.starts_with('-') {
        return None;
    }
    let node = kit_version("clients/node/package.json");
    let python = kit_version("clients/python/pyproject.toml");
    let php = kit_version("clients/php/composer.json");
    let names_a_kit = arg.contains("redis-rl") || arg.contains("redis_rl");
    let is_path = arg.starts_with('.') || arg.starts_with('/') || arg.contains("clients/");
    let ok = match tool {
        "npm install" => !(names_a_kit || is_path) || arg == format!("./redis-rl-{node}.tgz"),
        "pip install" => {
            !(names_a_kit || is_path)
                || arg == "requirements.txt"
                || [
                    format!("/redis_rl-{python}-py3-none-any.whl"),
                    format!("/redis_rl-{python}.tar.gz"),
                ]
                .iter()
                .any(|end| arg.ends_with(end.as_str()))
        }
        "composer require" => {
            let minor: String = php.split('.').take(2).collect::<Vec<_>>().join(".");
            !(names_a_kit || is_path)
                || (arg == format!("redis-rl/client:^{minor}")
                    && (page.contains("\"type\": \"artifact\"") || page.contains("php.md#install")))
        }
        _ => unreachable!(),
    };
    (!ok).then(|| format!("`{tool} … {arg}`"))
}

/// Every `npm install`, `pip install` and `composer require` in the docs and in the
/// kits' examples (prose, comments and shell blocks) installs a kit only in the form its
/// package test installs, so a line pasted from the docs works.
#[test]
fn every_install_line_is_a_tested_form() {
    let mut files = pages();
    for kit in ["node", "php", "python", "rust"] {
        let dir = root().join("clients").join(kit).join("examples");
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.path().is_file() {
                files.push(e.path());
            }
        }
    }
    let mut bad = Vec::new();
    let mut checked = 0;
    for file in files {
        let name = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        if name == "CHANGELOG.md" {
            continue; // history, not instructions
        }
        let text = std::fs::read_to_string(&file).expect("file");
        for (n, line) in text.lines().enumerate() {
            for tool in ["npm install", "pip install", "composer require"] {
                let mut rest = line;
                while let Some(at) = rest.find(tool) {
                    rest = &rest[at + tool.len()..];
                    checked += 1;
                    let args = rest
                        .split(['`', ',', '#', ')', ';', '&', '|'])
                        .next()
                        .unwrap_or("");
                    for arg in args.split_whitespace() {
                        if let Some(why) = untested_install_argument(tool, arg, &text) {
                            bad.push(format!("{name}:{}: {why}", n + 1));
                        }
                    }
                }
            }
        }
    }
    println!("docs: {checked} install lines checked");
    assert!(checked > 0, "no install line found");
    assert!(
        bad.is_empty(),
        "install lines that name a kit in a form no test installs (npm: ./redis-rl-VERSION.tgz \
         from npm pack; pip: the built wheel or sdist; composer: redis-rl/client:^MAJOR.MINOR \
         from the artifact repository):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_install_check_refuses_untested_forms() {
    let node = kit_version("clients/node/package.json");
    let python = kit_version("clients/python/pyproject.toml");
    for (tool, arg) in [
        ("npm install", "redis-rl"),
        ("npm install", "./clients/node"),
        ("pip install", "redis-rl"),
        ("pip install", "'redis-rl[metrics]'"),
        ("pip install", "./clients/python"),
        ("composer require", "redis-rl/client"),
    ] {
        assert!(
            untested_install_argument(tool, arg, "php.md#install").is_some(),
            "{tool} {arg}"
        );
    }
    assert!(untested_install_argument("composer require", "redis-rl/client:^0.1", "").is_some());
    for (tool, arg) in [
        ("npm install", format!("./redis-rl-{node}.tgz")),
        ("npm install", "prom-client".to_string()),
        ("npm install", "@fastify/rate-limit".to_string()),
        (
            "pip install",
            format!("dist/redis_rl-{python}-py3-none-any.whl"),
        ),
        ("pip install", "Flask-Limiter".to_string()),
        ("pip install", "-r".to_string()),
        ("composer require", "symfony/rate-limiter:^5.4".to_string()),
    ] {
        assert_eq!(
            untested_install_argument(tool, &arg, ""),
            None,
            "{tool} {arg}"
        );
    }
    assert_eq!(
        untested_install_argument(
            "composer require",
            "redis-rl/client:^0.1",
            "see php.md#install"
        ),
        None
    );
}
