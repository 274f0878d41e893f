async fn get(uri: &str) -> Result<Response, HttpError> {
    let __breaker: &'static ::breaker::Breaker = {
        static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(||
        ::breaker::__private::join_fleet(
            ::breaker::__private::breaker(
                ::breaker::Name::from_static(
                    &::breaker::__private::concat!(
                        ::breaker::__private::module_path!(), "::", "get"
                    ),
                ),
                false,
                ::breaker::Config::default().threshold(3),
            ),
        ));
        &__BREAKER
    };
    ::breaker::__private::run_classified::<
        Result<Response, HttpError>,
        _,
        _,
        _,
        _,
    >(
            __breaker,
            breaker::http::classify
                as fn(
                    &::breaker::__private::Result<
                        <Result<
                            Response,
                            HttpError,
                        > as ::breaker::__private::Fallible>::Ok,
                        <Result<
                            Response,
                            HttpError,
                        > as ::breaker::__private::Fallible>::Err,
                    >,
                ) -> ::breaker::Verdict,
            async move {
                if false {
                    return ::breaker::__private::returns::<
                        Result<Response, HttpError>,
                    >();
                }
                client.get(uri).await
            },
        )
        .await
}
fn read(path: &Path) -> io::Result<Vec<u8>> {
    let __breaker: &'static ::breaker::Breaker = {
        static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(||
        ::breaker::__private::breaker(
            ::breaker::Name::from_static(
                &::breaker::__private::concat!(
                    ::breaker::__private::module_path!(), "::", "read"
                ),
            ),
            false,
            ::breaker::Config::default(),
        ));
        &__BREAKER
    };
    ::breaker::__private::run_sync_classified::<
        io::Result<Vec<u8>>,
        _,
        _,
        _,
        _,
    >(
        __breaker,
        |r| if r.is_ok() { Verdict::Success } else { Verdict::Failure },
        move || { fs::read(path) },
    )
}
