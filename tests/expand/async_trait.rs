// What `#[async_trait]` on the impl hands the attribute for
// `async fn put(&self, key: String, mut value: Vec<u8>) -> Result<usize, StoreError>`.
impl Store for Remote {
    #[circuit_breaker(threshold = 2, fallback = put_later)]
    fn put<'life0, 'async_trait>(
        &'life0 self,
        key: String,
        value: Vec<u8>,
    ) -> ::core::pin::Pin<
        Box<dyn ::core::future::Future<Output = Result<usize, StoreError>> + ::core::marker::Send + 'async_trait>,
    >
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            if let ::core::option::Option::Some(__ret) = ::core::option::Option::None::<Result<usize, StoreError>> {
                #[allow(unreachable_code)]
                return __ret;
            }
            let __self = self;
            let key = key;
            let mut value = value;
            let __ret: Result<usize, StoreError> = {
                value.push(0);
                __self.client.put(&key, &value).await
            };
            #[allow(unreachable_code)]
            __ret
        })
    }
}
