fn quote(
    symbol: String,
    at: u64,
) -> impl ::breaker::__private::Future<Output = Result<u64, QuoteError>> {
    async move {
        let _ = &symbol;
        ::breaker::__private::recover(
                ::breaker::__private::retried::<
                    Result<u64, QuoteError>,
                    _,
                    _,
                    _,
                >(
                        {
                            fn __breaker_init() -> ::breaker::Breaker {
                                ::breaker::__private::breaker_of(
                                    &::breaker::__private::concat!(
                                        ::breaker::__private::module_path!(), "::", "quote"
                                    ),
                                    false,
                                    &[
                                        ::breaker::__private::Set::retry(3),
                                        ::breaker::__private::Set::backoff(
                                            ::breaker::__private::Dur::Millis(50),
                                        ),
                                    ],
                                )
                            }
                            static __BREAKER: ::breaker::__private::Lazy<
                                ::breaker::Breaker,
                            > = ::breaker::__private::Lazy::new(__breaker_init);
                            &__BREAKER
                        },
                        ::breaker::__private::every_error,
                        || {
                            let symbol = ::breaker::__private::RetryArg::for_attempt(
                                &symbol,
                            );
                            let at = ::breaker::__private::RetryArg::for_attempt(&at);
                            async move {
                                if false {
                                    return ::breaker::__private::returns::<
                                        Result<u64, QuoteError>,
                                    >();
                                }
                                fetch(&symbol, at).await
                            }
                        },
                    )
                    .await,
                {
                    #[allow(dead_code)]
                    fn __breaker_err() {}
                    #[allow(dead_code)]
                    fn __breaker_recover() {}
                    move |__breaker_err| {
                        #[allow(unused_imports)]
                        use ::breaker::__private::{AsyncFits3 as _, AsyncMisfits as _};
                        ::breaker::__private::FallbackProbe::<
                            _,
                            _,
                            Result<u64, QuoteError>,
                        >::new(cached, (symbol, at, __breaker_err))
                            .__fallback()
                    }
                },
            )
            .await
    }
}
