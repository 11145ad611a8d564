//! The module's layers: which files of `src/` import which, read from the source
//! (`use crate::…`, `use super::…`, a child module's name in its parent, and paths such
//! as `crate::args::parse_u64(…)` inline), leaving out test code (`#[cfg(test)]` items
//! and src/fuzz.rs). No two modules may import each other, and no longer circle may
//! close: every import points down. `cargo test --test layers -- --nocapture` prints
//! the edges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path from the crate root: `[]` for lib.rs, `["server", "engine"]`.
type Module = Vec<String>;

fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// Every `.rs` file under `dir` and the module it is.
fn modules(root: &Path, dir: &Path, out: &mut BTreeMap<Module, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            modules(root, &path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(root).expect("under src");
        let mut m: Module = rel
            .with_extension("")
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        if m.last().is_some_and(|l| l == "mod" || l == "lib") {
            m.pop();
        }
        // Test code, compiled only under `cargo test`.
        if m == ["fuzz"] {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read source");
        out.insert(m, text);
    }
}

/// The source with comments, string and character literals blanked out (so that
/// neither a path in a doc comment nor a `'{'` counts).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(b.len(), |n| i + n);
            i = end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(b.len(), |n| i + n + 2);
            i = end;
            out.push(' ');
        } else if let Some(hashes) = raw_string_start(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let open = rest.find('"').expect("raw string quote") + 1;
            let end = rest[open..]
                .find(&close)
                .map_or(b.len(), |n| i + open + n + close.len());
            i = end;
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{..}'), else a lifetime.
            let lit = if rest.starts_with("'\\") {
                rest.get(3..).and_then(|r| r.find('\'')).map(|n| n + 4)
            } else {
                rest[1..]
                    .char_indices()
                    .nth(1)
                    .filter(|&(_, c)| c == '\'')
                    .map(|(n, _)| n + 2)
            };
            match lit {
                Some(len) => {
                    i += len;
                    out.push_str("' '");
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = rest.chars().next().expect("a char");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `r"`, `r#"`, `br"`…: the number of hashes of a raw string starting here.
fn raw_string_start(s: &str) -> Option<usize> {
    let s = s.strip_prefix('b').unwrap_or(s);
    let s = s.strip_prefix('r')?;
    let hashes = s.len() - s.trim_start_matches('#').len();
    s[hashes..].starts_with('"').then_some(hashes)
}

/// The index just past the item starting at `from`: its `;`, or its `{ … }` block.
fn item_end(code: &str, from: usize) -> usize {
    let b = code.as_bytes();
    let mut i = from;
    while i < b.len() && b[i] != b';' && b[i] != b'{' {
        i += 1;
    }
    if i < b.len() && b[i] == b'{' {
        let mut depth = 0;
        while i < b.len() {
            match b[i] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    i + 1
}

/// The code without the items marked `#[cfg(test)]` (test modules, test-only
/// constants and imports).
fn production(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = at + "#[cfg(test)]".len();
        let end = item_end(rest, after).min(rest.len());
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The paths a `use` tree names, expanded: `super::{a, b::{c, D}}` gives
/// `super::a`, `super::b::c`, `super::b::D`.
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let mut base = prefix.to_vec();
        base.extend(head);
        let inner = &tree[open + 1..tree.rfind('}').expect("closing brace")];
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..i], &base, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], &base, out);
        return;
    }
    let path = tree.split(" as ").next().unwrap_or(tree);
    let mut full = prefix.to_vec();
    full.extend(path.split("::").map(|s| s.trim().to_string()));
    out.push(full);
}

/// Every path the code names: from its `use` items, and inline `crate::`, `super::`
/// and `self::` paths elsewhere.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code.to_string();
    // `use` items (`pub use`, `pub(crate) use` too), cut out once read.
    loop {
        let found = rest
            .match_indices("use ")
            .find(|&(at, _)| at == 0 || !is_word(rest.as_bytes()[at - 1]))
            .map(|(at, _)| at);
        let Some(at) = found else { break };
        let end = rest[at..].find(';').map_or(rest.len(), |n| at + n);
        expand(&rest[at + 4..end], &[], &mut out);
        rest.replace_range(at..(end + 1).min(rest.len()), " ");
    }
    let b = rest.as_bytes();
    for word in ["crate::", "super::", "self::"] {
        for (at, _) in rest.match_indices(word) {
            if at > 0 && (is_word(b[at - 1]) || b[at - 1] == b':') {
                continue;
            }
            let len = rest[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len() - at);
            let path: Vec<String> = rest[at..at + len]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            out.push(path);
        }
    }
    out
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The module a path from module `from` lands in (the longest module prefix), or
/// `None` for another crate's path.
fn resolve(from: &Module, path: &[String], known: &BTreeSet<Module>) -> Option<Module> {
    let (first, rest) = path.split_first()?;
    let (mut at, rest) = match first.as_str() {
        "crate" => (vec![], rest),
        "self" => (from.clone(), rest),
        "super" => (from[..from.len().saturating_sub(1)].to_vec(), rest),
        // A child module named from its parent; else another crate.
        child => {
            let mut m = from.clone();
            m.push(child.to_string());
            if !known.contains(&m) {
                return None;
            }
            (from.clone(), path)
        }
    };
    for s in rest {
        if s == "super" {
            at.pop();
            continue;
        }
        let mut next = at.clone();
        next.push(s.clone());
        if !known.contains(&next) {
            break;
        }
        at = next;
    }
    Some(at)
}

fn edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    modules(&src, &src, &mut files);
    let known: BTreeSet<Module> = files.keys().cloned().collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in &files {
        let targets = graph.entry(name(m)).or_default();
        for path in paths(&production(&code_only(text))) {
            if let Some(to) = resolve(m, &path, &known) {
                if to != *m {
                    targets.insert(name(&to));
                }
            }
        }
    }
    graph
}

/// The circles of `graph` (its strongly connected components of more than one).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reaches = |from: &str, to: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(n) = stack.pop() {
            for next in graph.get(&n).into_iter().flatten() {
                if next == to {
                    return true;
                }
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        false
    };
    let mut placed = BTreeSet::new();
    let mut out = Vec::new();
    for a in graph.keys() {
        if placed.contains(a) || !reaches(a, a) {
            continue;
        }
        let circle: Vec<String> = graph
            .keys()
            .filter(|b| *b == a || (reaches(a, b) && reaches(b, a)))
            .cloned()
            .collect();
        placed.extend(circle.iter().cloned());
        out.push(circle);
    }
    out
}

#[test]
fn every_import_points_down() {
    let graph = edges();
    println!("imports in src/ (test code left out):");
    for (from, to) in &graph {
        let to: Vec<&str> = to.iter().map(String::as_str).collect();
        println!("  {from} -> {}", to.join(", "));
    }
    // The reading itself: these imports exist, so a parser that found none would fail.
    let has = |from: &str, to: &str| graph.get(from).is_some_and(|t| t.contains(to));
    assert!(has("server::engine", "server::slot"), "{graph:?}");
    assert!(has("algo::block", "algo::state"), "{graph:?}");
    assert!(has("algo", "algo::state"), "{graph:?}");
    assert!(
        has("algo::state", "args"),
        "inline crate::args:: path: {graph:?}"
    );
    let mutual: Vec<(String, String)> = graph
        .iter()
        .flat_map(|(a, to)| to.iter().map(move |b| (a.clone(), b.clone())))
        .filter(|(a, b)| a < b && has(b, a))
        .collect();
    assert!(
        mutual.is_empty(),
        "modules importing each other: {mutual:?}"
    );
    let circles = circles(&graph);
    assert!(circles.is_empty(), "import circles: {circles:?}");
}

#[test]
fn the_reader_sees_through_comments_literals_and_test_code() {
    let code = code_only(
        "use a::b; // crate::x::y\n/* super::z */ let c = '{'; let s = \"crate::q\";\n\
         fn f<'a>(x: &'a str) { crate::real::f(); }\n\
         #[cfg(test)]\nmod tests { use super::*; fn g() { crate::hidden::h() } }\n\
         #[cfg(test)]\nuse crate::also_hidden;\nuse super::{m, n::{o, P as Q}};",
    );
    let found: Vec<String> = paths(&production(&code))
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        found,
        [
            "a::b",
            "super::m",
            "super::n::o",
            "super::n::P",
            "crate::real::f"
        ]
    );
}
