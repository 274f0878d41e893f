use breaker::circuit_breaker;

#[circuit_breaker(probes = 1001)]
fn too_many_probes() -> Result<(), std::io::Error> {
    Ok(())
}

#[circuit_breaker(failure_rate = 50, window = 4000000000)]
fn too_long_a_window() -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
