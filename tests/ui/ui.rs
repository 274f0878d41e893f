//! Compile-pass and compile-fail cases of `#[circuit_breaker]`. Regenerate the `.stderr`
//! goldens with `TRYBUILD=overwrite cargo test -p breaker-ui-tests`, then read every one.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("pass/*.rs");
    t.compile_fail("fail/*.rs");
}
