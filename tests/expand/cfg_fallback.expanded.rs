fn lookup(
    id: u32,
    #[cfg(feature = "trace")]
    trace: &Trace,
) -> impl ::breaker::__private::Future<Output = Result<Row, DbError>> {
    async move {
        ::breaker::__private::recover(
                ::breaker::__private::call::<
                    Result<Row, DbError>,
                    _,
                    _,
                    _,
                    _,
                >(
                        ::breaker::__private::host({
                            fn __breaker_init() -> ::breaker::Breaker {
                                ::breaker::__private::breaker_of(
                                    &::breaker::__private::concat!(
                                        ::breaker::__private::module_path!(), "::", "lookup"
                                    ),
                                    false,
                                    &[],
                                )
                            }
                            static __BREAKER: ::breaker::__private::Lazy<
                                ::breaker::Breaker,
                            > = ::breaker::__private::Lazy::new(__breaker_init);
                            &__BREAKER
                        }),
                        ::breaker::__private::every_error,
                        async {
                            if false {
                                return ::breaker::__private::returns::<
                                    Result<Row, DbError>,
                                >();
                            }
                            db.get(id).await
                        },
                    )
                    .await,
                {
                    #[allow(dead_code)]
                    fn __breaker_err() {}
                    #[allow(dead_code)]
                    fn __breaker_recover() {}
                    move |__breaker_err| {
                        #[cfg(all(not(all(feature = "trace"))))]
                        let __breaker_recover = {
                            #[allow(unused_imports)]
                            use ::breaker::__private::{
                                AsyncFits2 as _, AsyncMisfits as _,
                            };
                            ::breaker::__private::FallbackProbe::<
                                _,
                                _,
                                Result<Row, DbError>,
                            >::new(cached, (id, __breaker_err))
                                .__fallback()
                        };
                        #[cfg(all(all(feature = "trace")))]
                        let __breaker_recover = {
                            #[allow(unused_imports)]
                            use ::breaker::__private::{
                                AsyncFits3 as _, AsyncMisfits as _,
                            };
                            ::breaker::__private::FallbackProbe::<
                                _,
                                _,
                                Result<Row, DbError>,
                            >::new(cached, (id, trace, __breaker_err))
                                .__fallback()
                        };
                        __breaker_recover
                    }
                },
            )
            .await
    }
}
