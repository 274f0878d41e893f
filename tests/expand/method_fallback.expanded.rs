impl Gateway {
    async fn charge(&self, card: &Card, cents: u64) -> Result<Receipt, GatewayError> {
        let __breaker: &'static ::breaker::Breaker = {
            static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(||
            ::breaker::__private::breaker(
                ::breaker::__private::concat!(
                    ::breaker::__private::module_path!(), "::", "charge"
                ),
                false,
                ::breaker::Config::default()
                    .threshold(2)
                    .cool_off(::breaker::__private::Duration::from_secs(5)),
            ));
            &__BREAKER
        };
        match ::breaker::__private::call::<
            Result<Receipt, GatewayError>,
            _,
            _,
        >(
                __breaker,
                ::breaker::__private::every_error,
                async { self.client.charge(card, cents).await },
            )
            .await
        {
            ::breaker::__private::Ok(__breaker_ok) => __breaker_ok,
            ::breaker::__private::Err(__breaker_err) => {
                ::breaker::__private::async_fallback(
                        (Self::queue_payment
                            as fn(_, _, _, _) -> _)(self, card, cents, __breaker_err),
                    )
                    .await
            }
        }
    }
}
