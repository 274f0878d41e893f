impl TenantDb {
    #[inline]
    fn query(
        &self,
        sql: &str,
    ) -> impl ::breaker::__private::Future<Output = Result<Rows, DbError>> {
        ::breaker::__private::run_keyed::<
            Result<Rows, DbError>,
            _,
            _,
            _,
            _,
        >(
            ::breaker::__private::breaker_of_key(|| {
                fn __breaker_init() -> (&'static str, ::breaker::Config) {
                    (
                        ::breaker::__private::module_path!(),
                        ::breaker::__private::config_of(
                            &[
                                ::breaker::__private::Set::failure_rate(50),
                                ::breaker::__private::Set::window_calls(20),
                                ::breaker::__private::Set::max_keys(1000),
                                ::breaker::__private::Set::idle(
                                    ::breaker::__private::Dur::Secs(300),
                                ),
                            ],
                        ),
                    )
                }
                static __BREAKER: ::breaker::__private::KeyedStatic = ::breaker::__private::KeyedStatic::new(
                        __breaker_init,
                    )
                    .method("query");
                ::breaker::__private::KeyProbe::new(&(self.tenant_id))
                    .__breaker_lookup(__BREAKER.of::<Self>())
            }),
            ::breaker::__private::every_error,
            async move {
                if false {
                    return ::breaker::__private::returns::<Result<Rows, DbError>>();
                }
                self.pool.query(sql).await
            },
        )
    }
}
#[inline]
fn deliver_webhook(
    url: &Url,
    body: &[u8],
) -> impl ::breaker::__private::Future<Output = Result<(), HookError>> {
    ::breaker::__private::fall_back(
        ::breaker::__private::call_keyed::<
            Result<(), HookError>,
            _,
            _,
            _,
            _,
        >(
            ::breaker::__private::breaker_of_key(|| {
                fn __breaker_init() -> (&'static str, ::breaker::Config) {
                    (
                        ::breaker::__private::concat!(
                            ::breaker::__private::module_path!(), "::", "deliver_webhook"
                        ),
                        ::breaker::__private::config_of(&[]),
                    )
                }
                static __BREAKER: ::breaker::__private::KeyedStatic = ::breaker::__private::KeyedStatic::new(
                        __breaker_init,
                    )
                    .default_name();
                ::breaker::__private::KeyProbe::new(&(url.host_str().unwrap_or("")))
                    .__breaker_lookup(&__BREAKER)
            }),
            ::breaker::__private::every_error,
            async move {
                if false {
                    return ::breaker::__private::returns::<Result<(), HookError>>();
                }
                client.post(url, body).await
            },
        ),
        {
            #[allow(dead_code)]
            fn __breaker_err() {}
            move |__breaker_err| {
                #[allow(unused_imports)]
                use ::breaker::__private::{AsyncFits3 as _, AsyncMisfits as _};
                ::breaker::__private::FallbackProbe::<
                    _,
                    _,
                    Result<(), HookError>,
                >::new(queue_hook, (url, body, __breaker_err))
                    .__fallback()
            }
        },
    )
}
