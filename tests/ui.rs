//! Compile-pass and compile-fail cases of `#[circuit_breaker]`. Regenerate the `.stderr`
//! goldens with `TRYBUILD=overwrite cargo test --test ui`, then read every one.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
