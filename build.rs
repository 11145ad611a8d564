//! Bakes the build id (a hash of the sources, see tools/source_hash.rs) into the module
//! as RL_BUILD_ID: `INFO rl` shows it, and the integration tests refuse to run against
//! a module built from other sources than the ones they were compiled with.

include!("tools/source_hash.rs");

fn main() {
    for input in ["src", "Cargo.toml", "Cargo.lock", "tools/source_hash.rs"] {
        println!("cargo:rerun-if-changed={input}");
    }
    let root = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| ".".into()),
    );
    match source_hash(&root) {
        Ok(id) => println!("cargo:rustc-env=RL_BUILD_ID={id}"),
        Err(e) => {
            eprintln!(
                "build.rs: cannot hash the sources under {}: {e}",
                root.display()
            );
            std::process::exit(1);
        }
    }
}
