// The module's build id: a hash of the sources that go into it. Shared, through
// `include!`, by build.rs (which bakes it into the module as RL_BUILD_ID, shown in
// `INFO rl` as `rl_build`) and tests/common (which refuses to test a module built from
// other sources). Plain std, no dependencies; the hash is FNV-1a 64, stable across
// Rust versions and machines.

/// The inputs of the build, relative to the crate root with `/` separators, sorted:
/// every file under `src/`, plus `Cargo.toml` and `Cargo.lock`.
pub fn source_files(root: &std::path::Path) -> std::io::Result<Vec<String>> {
    fn walk(
        root: &std::path::Path,
        rel: &str,
        out: &mut Vec<String>,
    ) -> std::io::Result<()> {
        for entry in std::fs::read_dir(root.join(rel))? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{rel}/{name}");
            if entry.path().is_dir() {
                walk(root, &path, out)?;
            } else {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut out = vec!["Cargo.toml".to_string(), "Cargo.lock".to_string()];
    walk(root, "src", &mut out)?;
    out.sort();
    Ok(out)
}

/// FNV-1a 64 over each input in order: its relative path, a NUL, its length (8 bytes,
/// little-endian) and its contents. Written as 16 lowercase hex digits.
pub fn source_hash(root: &std::path::Path) -> std::io::Result<String> {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for rel in source_files(root)? {
        let contents = std::fs::read(root.join(&rel))?;
        feed(rel.as_bytes());
        feed(&[0]);
        feed(&(contents.len() as u64).to_le_bytes());
        feed(&contents);
    }
    Ok(format!("{hash:016x}"))
}
