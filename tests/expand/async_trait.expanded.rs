impl Store for Remote {
    fn put<'life0, 'async_trait>(
        &'life0 self,
        key: String,
        mut value: Vec<u8>,
    ) -> ::core::pin::Pin<
        Box<
            dyn ::core::future::Future<
                Output = Result<usize, StoreError>,
            > + ::core::marker::Send + 'async_trait,
        >,
    >
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            ::breaker::__private::recover(
                    ::breaker::__private::call::<
                        Result<usize, StoreError>,
                        _,
                        _,
                        _,
                        _,
                    >(
                            ::breaker::__private::host({
                                #[allow(dead_code)]
                                fn __name() {}
                                fn __breaker_init(
                                    __name: ::breaker::Name,
                                ) -> ::breaker::Breaker {
                                    ::breaker::__private::named_breaker_of(
                                        __name,
                                        &[::breaker::__private::Set::threshold(2)],
                                    )
                                }
                                static __BREAKER: ::breaker::__private::InImpl<
                                    ::breaker::Breaker,
                                > = ::breaker::__private::InImpl::new(
                                    ::breaker::__private::module_path!(),
                                    "put",
                                    __breaker_init,
                                );
                                __BREAKER.of::<Self>()
                            }),
                            ::breaker::__private::every_error,
                            async {
                                if false {
                                    return ::breaker::__private::returns::<
                                        Result<usize, StoreError>,
                                    >();
                                }
                                if let ::core::option::Option::Some(__ret) = ::core::option::Option::None::<
                                    Result<usize, StoreError>,
                                > {
                                    #[allow(unreachable_code)] return __ret;
                                }
                                let __self = self;
                                let __ret: Result<usize, StoreError> = {
                                    value.push(0);
                                    __self.client.put(&key, &value).await
                                };
                                #[allow(unreachable_code)] __ret
                            },
                        )
                        .await,
                    {
                        #[allow(dead_code)]
                        fn __breaker_err() {}
                        move |__breaker_err| {
                            #[allow(unused_imports)]
                            use ::breaker::__private::{
                                AsyncFits4 as _, AsyncMisfits as _,
                            };
                            ::breaker::__private::FallbackProbe::<
                                _,
                                _,
                                Result<usize, StoreError>,
                            >::new(Self::put_later, (self, key, value, __breaker_err))
                                .__fallback()
                        }
                    },
                )
                .await
        })
    }
}
