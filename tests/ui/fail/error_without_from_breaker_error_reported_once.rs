// An error type without `From<BreakerError>`, with a body that never names it: still one
// error, on the return type, not a second one at the `.await` of the generated code.
use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyErr;

#[circuit_breaker(threshold = 3)]
async fn f() -> Result<(), MyErr> {
    Ok(())
}

fn main() {
    let _ = f();
}
