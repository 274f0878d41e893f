#[circuit_breaker(classify = breaker::http::classify, threshold = 3, fleet = true)]
async fn get(uri: &str) -> Result<Response, HttpError> {
    client.get(uri).await
}

#[circuit_breaker(classify = |r| if r.is_ok() { Verdict::Success } else { Verdict::Failure })]
fn read(path: &Path) -> io::Result<Vec<u8>> {
    fs::read(path)
}
