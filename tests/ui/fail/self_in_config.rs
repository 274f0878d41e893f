use breaker::{circuit_breaker, BreakerError, Config, Transition};

struct Client;

impl Client {
    fn config() -> Config {
        Config::default()
    }
    fn log(_t: &Transition) {}

    #[circuit_breaker(config = Self::config())]
    async fn get(&self) -> Result<u32, BreakerError> {
        Ok(1)
    }

    #[circuit_breaker(on_state_change = Self::log)]
    async fn put(&self) -> Result<u32, BreakerError> {
        Ok(1)
    }
}

fn config_for<T>() -> Config {
    Config::default()
}

#[circuit_breaker(config = config_for::<T>())]
async fn generic<T>(t: T) -> Result<T, BreakerError> {
    Ok(t)
}

fn main() {
    let _ = Client.get();
    let _ = Client.put();
    let _ = generic(1);
}
