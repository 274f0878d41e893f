fn count<'a, T>(items: &'a [T]) -> Result<usize, CountError>
where
    T: Clone,
{
    let __breaker: &'static ::breaker::Breaker = {
        static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(||
        ::breaker::__private::breaker(
            ::breaker::Name::from_static(
                &::breaker::__private::concat!(
                    ::breaker::__private::module_path!(), "::", "count"
                ),
            ),
            false,
            ::breaker::Config::default().threshold(2),
        ));
        &__BREAKER
    };
    match ::breaker::__private::call_sync::<
        Result<usize, CountError>,
        _,
        _,
    >(
        __breaker,
        ::breaker::__private::every_error,
        || { Ok(items.iter().cloned().count()) },
    ) {
        ::breaker::__private::Ok(__breaker_ok) => __breaker_ok,
        #[allow(clippy::redundant_closure_call)]
        ::breaker::__private::Err(__breaker_err) => {
            (|items, _err| Ok(items.len()))(items, __breaker_err)
        }
    }
}
