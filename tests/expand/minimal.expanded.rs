#[inline]
fn get_rate(
    region: &str,
) -> impl ::breaker::__private::Future<Output = Result<f64, TaxError>> {
    ::breaker::__private::run::<
        Result<f64, TaxError>,
        _,
        _,
        _,
        _,
    >(
        ::breaker::__private::host({
            fn __breaker_init() -> ::breaker::Breaker {
                ::breaker::__private::breaker_of(
                    &::breaker::__private::concat!(
                        ::breaker::__private::module_path!(), "::", "get_rate"
                    ),
                    false,
                    &[],
                )
            }
            static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(
                __breaker_init,
            );
            &__BREAKER
        }),
        ::breaker::__private::every_error,
        async move {
            if false {
                return ::breaker::__private::returns::<Result<f64, TaxError>>();
            }
            tax_api.rate(region).await
        },
    )
}
