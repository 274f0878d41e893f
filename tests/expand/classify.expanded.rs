#[inline]
fn get(
    uri: &str,
) -> impl ::breaker::__private::Future<Output = Result<Response, HttpError>> {
    ::breaker::__private::run::<
        Result<Response, HttpError>,
        _,
        _,
        _,
        _,
    >(
        ::breaker::__private::host({
            fn __breaker_init() -> ::breaker::Breaker {
                ::breaker::__private::join_fleet(
                    ::breaker::__private::breaker_of(
                        &::breaker::__private::concat!(
                            ::breaker::__private::module_path!(), "::", "get"
                        ),
                        false,
                        &[::breaker::__private::Set::threshold(3)],
                    ),
                )
            }
            static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(
                __breaker_init,
            );
            &__BREAKER
        }),
        {
            #[allow(unused_imports)]
            use ::breaker::__private::{ClassifyFits as _, ClassifyMisfits as _};
            ::breaker::__private::ClassifyProbe::<
                Result<Response, HttpError>,
                _,
            >::new(breaker::http::classify)
                .__classify()
        },
        async move {
            if false {
                return ::breaker::__private::returns::<Result<Response, HttpError>>();
            }
            client.get(uri).await
        },
    )
}
fn read(path: &Path) -> io::Result<Vec<u8>> {
    ::breaker::__private::run_sync::<
        io::Result<Vec<u8>>,
        _,
        _,
        _,
        _,
    >(
        {
            fn __breaker_init() -> ::breaker::Breaker {
                ::breaker::__private::breaker_of(
                    &::breaker::__private::concat!(
                        ::breaker::__private::module_path!(), "::", "read"
                    ),
                    false,
                    &[],
                )
            }
            static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(
                __breaker_init,
            );
            &__BREAKER
        },
        ::breaker::__private::classify::<
            io::Result<Vec<u8>>,
            _,
        >(|r| if r.is_ok() { Verdict::Success } else { Verdict::Failure }),
        move || { fs::read(path) },
    )
}
