#[circuit_breaker(threshold = 2, fallback = |items, _err| Ok(items.len()))]
fn count<'a, T>(items: &'a [T]) -> Result<usize, CountError>
where
    T: Clone,
{
    Ok(items.iter().cloned().count())
}
