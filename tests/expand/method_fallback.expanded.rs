impl Gateway {
    #[inline]
    fn charge(
        &self,
        card: &Card,
        cents: u64,
    ) -> impl ::breaker::__private::Future<Output = Result<Receipt, GatewayError>> {
        ::breaker::__private::fall_back(
            ::breaker::__private::call::<
                Result<Receipt, GatewayError>,
                _,
                _,
                _,
                _,
            >(
                ::breaker::__private::host({
                    #[allow(dead_code)]
                    fn __name() {}
                    fn __breaker_init(__name: ::breaker::Name) -> ::breaker::Breaker {
                        ::breaker::__private::named_breaker_of(
                            __name,
                            &[
                                ::breaker::__private::Set::threshold(2),
                                ::breaker::__private::Set::cool_off(
                                    ::breaker::__private::Dur::Secs(5),
                                ),
                            ],
                        )
                    }
                    static __BREAKER: ::breaker::__private::InImpl<::breaker::Breaker> = ::breaker::__private::InImpl::new(
                        ::breaker::__private::module_path!(),
                        "charge",
                        __breaker_init,
                    );
                    __BREAKER.of::<Self>()
                }),
                ::breaker::__private::every_error,
                async move {
                    if false {
                        return ::breaker::__private::returns::<
                            Result<Receipt, GatewayError>,
                        >();
                    }
                    self.client.charge(card, cents).await
                },
            ),
            {
                #[allow(dead_code)]
                fn __breaker_err() {}
                move |__breaker_err| {
                    #[allow(unused_imports)]
                    use ::breaker::__private::{AsyncFits4 as _, AsyncMisfits as _};
                    ::breaker::__private::FallbackProbe::<
                        _,
                        _,
                        Result<Receipt, GatewayError>,
                    >::new(Self::queue_payment, (self, card, cents, __breaker_err))
                        .__fallback()
                }
            },
        )
    }
}
