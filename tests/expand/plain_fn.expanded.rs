fn load_profile(id: UserId) -> Result<Profile, DbError> {
    ::breaker::__private::run_sync::<
        Result<Profile, DbError>,
        _,
        _,
        _,
        _,
    >(
        {
            fn __breaker_init() -> ::breaker::Breaker {
                ::breaker::__private::breaker_of(
                    &::breaker::__private::concat!(
                        ::breaker::__private::module_path!(), "::", "load_profile"
                    ),
                    false,
                    &[
                        ::breaker::__private::Set::threshold(5),
                        ::breaker::__private::Set::slow_call(
                            ::breaker::__private::Dur::Millis(500),
                        ),
                    ],
                )
            }
            static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(
                __breaker_init,
            );
            &__BREAKER
        },
        ::breaker::__private::is_failure::<
            Result<Profile, DbError>,
            _,
        >(|e: &DbError| e.is_transient()),
        move || {
            if id.is_guest() {
                return Ok(Profile::guest());
            }
            db.query_profile(id)
        },
    )
}
