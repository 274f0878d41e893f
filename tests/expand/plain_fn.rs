#[circuit_breaker(threshold = 5, slow_call = "500ms", is_failure = |e: &DbError| e.is_transient())]
fn load_profile(id: UserId) -> Result<Profile, DbError> {
    if id.is_guest() {
        return Ok(Profile::guest());
    }
    db.query_profile(id)
}
