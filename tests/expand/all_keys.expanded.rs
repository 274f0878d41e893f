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
                        ::breaker::__private::config_of(
                                &[
                                    ::breaker::__private::Set::threshold(3),
                                    ::breaker::__private::Set::failure_rate(50),
                                    ::breaker::__private::Set::window_calls(20),
                                    ::breaker::__private::Set::min_calls(10),
                                    ::breaker::__private::Set::slow_call(
                                        ::breaker::__private::Dur::Secs(2),
                                    ),
                                    ::breaker::__private::Set::cool_off(
                                        ::breaker::__private::Dur::Secs(30),
                                    ),
                                    ::breaker::__private::Set::max_cool_off(
                                        ::breaker::__private::Dur::Secs(300),
                                    ),
                                    ::breaker::__private::Set::jitter(
                                        ::breaker::__private::Dur::Millis(250),
                                    ),
                                    ::breaker::__private::Set::probes(3),
                                    ::breaker::__private::Set::success_threshold(2),
                                    ::breaker::__private::Set::timeout(
                                        ::breaker::__private::Dur::Secs(90),
                                    ),
                                    ::breaker::__private::Set::max_concurrent(16),
                                ],
                            )
                            .on_state_change(page_on_call),
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
