async fn lookup(
    id: u32,
    #[cfg(feature = "trace")]
    trace: &Trace,
) -> Result<Row, DbError> {
    let __breaker: &'static ::breaker::Breaker = {
        static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(||
        ::breaker::__private::breaker(
            ::breaker::Name::from_static(
                &::breaker::__private::concat!(
                    ::breaker::__private::module_path!(), "::", "lookup"
                ),
            ),
            false,
            ::breaker::Config::default(),
        ));
        &__BREAKER
    };
    match ::breaker::__private::call::<
        Result<Row, DbError>,
        _,
        _,
    >(
            __breaker,
            ::breaker::__private::every_error,
            async {
                if false {
                    return ::breaker::__private::returns::<Result<Row, DbError>>();
                }
                db.get(id).await
            },
        )
        .await
    {
        ::breaker::__private::Ok(__breaker_ok) => __breaker_ok,
        ::breaker::__private::Err(__breaker_err) => {
            #[cfg(all(not(all(feature = "trace"))))]
            let __breaker_recover = {
                #[allow(unused_imports)]
                use ::breaker::__private::{AsyncFits2 as _, AsyncMisfits as _};
                ::breaker::__private::FallbackProbe::<
                    _,
                    _,
                    Result<Row, DbError>,
                >::new(cached, (id, __breaker_err))
                    .__fallback()
                    .await
            };
            #[cfg(all(all(feature = "trace")))]
            let __breaker_recover = {
                #[allow(unused_imports)]
                use ::breaker::__private::{AsyncFits3 as _, AsyncMisfits as _};
                ::breaker::__private::FallbackProbe::<
                    _,
                    _,
                    Result<Row, DbError>,
                >::new(cached, (id, trace, __breaker_err))
                    .__fallback()
                    .await
            };
            __breaker_recover
        }
    }
}
