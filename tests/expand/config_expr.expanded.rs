fn get_tax(
    cart: &Cart,
) -> impl ::breaker::__private::Future<Output = Result<Tax, TaxError>> {
    async move {
        ::breaker::__private::run::<
            Result<Tax, TaxError>,
            _,
            _,
            _,
            _,
        >(
                ::breaker::__private::host({
                    fn __breaker_init() -> ::breaker::Breaker {
                        ::breaker::__private::breaker(
                            ::breaker::Name::from_static(&"shop::tax"),
                            true,
                            ::breaker::__private::config(config_from_env("TAX"))
                                .on_state_change(log_transition),
                        )
                    }
                    static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> = ::breaker::__private::Lazy::new(
                        __breaker_init,
                    );
                    &__BREAKER
                }),
                ::breaker::__private::every_error,
                async move {
                    if false {
                        return ::breaker::__private::returns::<Result<Tax, TaxError>>();
                    }
                    tax_api.post(cart).await
                },
            )
            .await
    }
}
