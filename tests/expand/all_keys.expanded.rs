#[inline]
fn score(
    order: &Order,
) -> impl ::breaker::__private::Future<Output = Result<Score, FraudError>> {
    ::breaker::__private::fall_back(
        ::breaker::__private::call::<
            Result<Score, FraudError>,
            _,
            _,
            _,
            _,
        >(
            ::breaker::__private::host({
                fn __breaker_init() -> ::breaker::Breaker {
                    ::breaker::__private::breaker(
                        ::breaker::Name::from_static(&"fraud::score"),
                        true,
                        {
                            const __CONFIG: ::breaker::Config = ::breaker::Config::DEFAULT
                                .threshold(3)
                                .failure_rate(50)
                                .window_calls(20)
                                .min_calls(10)
                                .slow_call(::breaker::__private::Duration::from_secs(2))
                                .cool_off(::breaker::__private::Duration::from_secs(30))
                                .max_cool_off(
                                    ::breaker::__private::Duration::from_secs(300),
                                )
                                .jitter(::breaker::__private::Duration::from_millis(250))
                                .probes(3)
                                .success_threshold(2)
                                .timeout(::breaker::__private::Duration::from_secs(90))
                                .max_concurrent(16);
                            __CONFIG.on_state_change(page_on_call)
                        },
                    )
                }
                static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(
                    __breaker_init,
                );
                &__BREAKER
            }),
            ::breaker::__private::AsFn::<
                ::breaker::__private::IsFailure<Result<Score, FraudError>>,
            > {
                f: is_transient,
            }
                .f,
            async move {
                if false {
                    return ::breaker::__private::returns::<Result<Score, FraudError>>();
                }
                let score = vendor.score(order).await?;
                Ok(score)
            },
        ),
        {
            #[allow(dead_code)]
            fn __breaker_err() {}
            move |__breaker_err| {
                #[allow(unused_imports)]
                use ::breaker::__private::{AsyncFits2 as _, AsyncMisfits as _};
                ::breaker::__private::FallbackProbe::<
                    _,
                    _,
                    Result<Score, FraudError>,
                >::new(cached_score, (order, __breaker_err))
                    .__fallback()
            }
        },
    )
}
