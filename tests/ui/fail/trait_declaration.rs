use breaker::circuit_breaker;

trait Gateway {
    #[circuit_breaker(threshold = 2)]
    fn charge(&self) -> Result<u32, std::io::Error>;
}

fn main() {}
