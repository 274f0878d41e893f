fn count<'a, T>(items: &'a [T]) -> Result<usize, CountError>
where
    T: Clone,
{
    {
        #[allow(dead_code)]
        fn __breaker_err() {}
        #[allow(dead_code)]
        fn __breaker_ok() {}
        match ::breaker::__private::call_sync::<
            Result<usize, CountError>,
            _,
            _,
        >(
            {
                fn __breaker_init() -> ::breaker::Breaker {
                    ::breaker::__private::breaker_of(
                        &::breaker::__private::concat!(
                            ::breaker::__private::module_path!(), "::", "count"
                        ),
                        false,
                        &[::breaker::__private::Set::threshold(2)],
                    )
                }
                static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(
                    __breaker_init,
                );
                &__BREAKER
            },
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
}
