use breaker::{circuit_breaker, CallError};

#[derive(Debug)]
struct DbError;

struct Users;

impl Users {
    // Forgets `&self`: a bare name in a method is a method of `Self`, receiving `self` first.
    fn cached(id: u64, err: CallError<DbError>) -> Result<String, DbError> {
        let _ = (id, err);
        Ok(String::new())
    }

    #[circuit_breaker(fallback = cached)]
    async fn fetch(&self, id: u64) -> Result<String, DbError> {
        let _ = id;
        Err(DbError)
    }
}

fn main() {
    let _ = Users.fetch(1);
}
