//! Compile-pass and compile-fail cases of `#[circuit_breaker]`. Regenerate the `.stderr`
//! goldens with `TRYBUILD=overwrite cargo test -p breaker-ui-tests`, then read every one.

use std::{path::PathBuf, process::Command};

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("pass/*.rs");
    t.compile_fail("fail/*.rs");
}

/// A dependency renamed in the manifest (`brk = { package = "breaker", … }`) cannot be a
/// trybuild case (trybuild's manifest is this package's): `renamed/main.rs` is built as a
/// crate of its own, made under the target directory with the workspace's `Cargo.lock` (so
/// `--offline` finds every dependency already fetched). Without `crate = "…"` its function
/// gets one error, saying to add it, and the function with `crate = "::brk"` none.
#[test]
fn renamed_dependency_without_crate_is_one_error_saying_so() {
    let ui = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = ui.join("../..").canonicalize().expect("the workspace root");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("tests/renamed");
    let krate = target.join("crate");
    std::fs::create_dir_all(krate.join("src")).expect("the crate's directory");
    let manifest = format!(
        "[package]\nname = \"renamed-breaker\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         publish = false\n\n[workspace]\n\n[dependencies]\n\
         brk = {{ package = \"breaker\", path = {:?} }}\n",
        root.display().to_string()
    );
    std::fs::write(krate.join("Cargo.toml"), manifest).expect("the manifest");
    std::fs::copy(ui.join("renamed/main.rs"), krate.join("src/main.rs")).expect("main.rs");
    std::fs::copy(root.join("Cargo.lock"), krate.join("Cargo.lock")).expect("the lock file");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["check", "--offline", "--quiet", "--message-format=short"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", target.join("target"))
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("error") && !l.contains("could not compile"))
        .collect();
    assert_eq!(
        errors,
        [
            "src/main.rs:4:1: error: this crate depends on `breaker` under the name `brk`: add \
             `crate = \"::brk\"` to the attribute (`#[circuit_breaker(crate = \"::brk\", …)]`), \
             so that the generated code finds it"
        ],
        "{stderr}"
    );
}
