use breaker::{circuit_breaker, BreakerError};

struct Client {
    sent: u32,
}

impl Client {
    #[circuit_breaker(hedge = 1)]
    async fn send(&mut self) -> Result<u32, BreakerError> {
        self.sent += 1;
        Ok(self.sent)
    }

    #[circuit_breaker(hedge = 1)]
    async fn into_reply(self) -> Result<u32, BreakerError> {
        Ok(self.sent)
    }
}

fn main() {
    let mut c = Client { sent: 0 };
    let _ = c.send();
}
