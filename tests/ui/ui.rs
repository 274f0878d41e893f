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
/// trybuild case (trybuild's manifest is this package's): `renamed/` is a crate of its own,
/// checked here. Without `crate = "…"` its function gets one error, saying to add it, and the
/// function with `crate = "::brk"` none.
#[test]
fn renamed_dependency_without_crate_is_one_error_saying_so() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("../../target"))
        .join("tests/renamed");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["check", "--offline", "--quiet", "--message-format=short"])
        .current_dir(dir.join("renamed"))
        .env("CARGO_TARGET_DIR", target)
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
            "src/main.rs:3:1: error: this crate depends on `breaker` under the name `brk`: add \
             `crate = \"::brk\"` to the attribute (`#[circuit_breaker(crate = \"::brk\", …)]`), \
             so that the generated code finds it"
        ],
        "{stderr}"
    );
}
