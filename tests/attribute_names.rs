//! Default names of `#[circuit_breaker]`: a method with a `self` receiver is
//! `{module}::{Type}::{method}`, everything else `{module}::{fn}`; two functions that still
//! share a default name log one `WARN`. In a test binary of its own: `tracing` caches each
//! callsite's interest globally, and the `WARN` test installs a scoped subscriber.

use std::sync::{Arc, Mutex};

use breaker::{circuit_breaker, registry, BreakerError, State};

#[derive(Debug)]
enum Error {
    Down,
    Breaker(BreakerError),
}

impl From<BreakerError> for Error {
    fn from(e: BreakerError) -> Self {
        Error::Breaker(e)
    }
}

fn down_if(fail: bool) -> Result<u32, Error> {
    if fail {
        Err(Error::Down)
    } else {
        Ok(1)
    }
}

fn name(rest: &str) -> String {
    format!("{}::{rest}", module_path!())
}

fn state(name: &str) -> State {
    registry()
        .get(name)
        .unwrap_or_else(|| panic!("`{name}` is listed"))
        .state()
}

struct Users;
struct Orders;

impl Users {
    #[circuit_breaker(threshold = 1)]
    async fn fetch(&self, fail: bool) -> Result<u32, Error> {
        down_if(fail)
    }
}

impl Orders {
    #[circuit_breaker(threshold = 1)]
    async fn fetch(&self, fail: bool) -> Result<u32, Error> {
        down_if(fail)
    }
}

#[tokio::test]
async fn same_named_methods_of_two_types_get_two_names() {
    Users.fetch(false).await.unwrap();
    Orders.fetch(false).await.unwrap();
    let (users, orders) = (name("Users::fetch"), name("Orders::fetch"));
    let listed: Vec<String> = registry()
        .snapshot()
        .into_iter()
        .map(|s| s.name.to_string())
        .collect();
    assert!(listed.contains(&users), "{listed:?}");
    assert!(listed.contains(&orders), "{listed:?}");
    assert!(!listed.contains(&name("fetch")), "{listed:?}");

    // Each name finds its own breaker: opening one leaves the other closed.
    Orders.fetch(true).await.unwrap_err();
    assert_eq!(state(&orders), State::Open);
    assert_eq!(state(&users), State::Closed);
    assert!(matches!(Orders.fetch(false).await, Err(Error::Breaker(e)) if e.is_open()));
    assert_eq!(Users.fetch(false).await.unwrap(), 1);
}

struct Repo<T>(std::marker::PhantomData<T>);

trait Source {
    fn load(&self, fail: bool) -> Result<u32, Error>;
}

impl<T> Repo<T> {
    // The type's last path segment, without its generics: `Repo`, for every `T`.
    #[circuit_breaker]
    fn count(&self, fail: bool) -> Result<u32, Error> {
        down_if(fail)
    }
}

impl Source for Users {
    // In a trait impl, the type the trait is implemented for.
    #[circuit_breaker]
    fn load(&self, fail: bool) -> Result<u32, Error> {
        down_if(fail)
    }
}

impl Orders {
    // Without `self` the attribute cannot tell an associated fn from a free one:
    // `{module}::{fn}`.
    #[circuit_breaker]
    fn open_connection(fail: bool) -> Result<u32, Error> {
        down_if(fail)
    }

    // With `key`, the map is named after the type too, and each key's breaker after it.
    #[circuit_breaker(key = tenant)]
    fn by_tenant(self: std::sync::Arc<Self>, tenant: &str, fail: bool) -> Result<u32, Error> {
        down_if(fail)
    }

    // An explicit `name` is kept as written.
    #[circuit_breaker(name = "names::orders_explicit")]
    fn explicit(&self) -> Result<u32, Error> {
        down_if(false)
    }
}

#[test]
fn generic_types_trait_impls_keys_and_associated_fns() {
    Repo::<u8>(Default::default()).count(false).unwrap();
    Repo::<&str>(Default::default()).count(false).unwrap();
    Users.load(false).unwrap();
    Orders::open_connection(false).unwrap();
    Arc::new(Orders).by_tenant("acme", false).unwrap();
    Orders.explicit().unwrap();
    for listed in [
        name("Repo::count"),
        name("Users::load"),
        name("open_connection"),
        name("Orders::by_tenant[acme]"),
        "names::orders_explicit".to_owned(),
    ] {
        assert_eq!(state(&listed), State::Closed, "{listed}");
    }
}

/// One recorded `WARN`: its message and its `name` field.
#[derive(Debug, Default)]
struct Warned {
    message: String,
    name: String,
}

/// Records the `WARN`s of target `breaker`.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Warned>>>);

impl tracing::field::Visit for Warned {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "name" => self.name = format!("{value:?}"),
            _ => {}
        }
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            "name" => self.name = value.to_owned(),
            _ => {}
        }
    }
}

impl tracing::Subscriber for Recorder {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let meta = event.metadata();
        if *meta.level() == tracing::Level::WARN && meta.target() == "breaker" {
            let mut warned = Warned::default();
            event.record(&mut warned);
            self.0.lock().unwrap().push(warned);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Three associated fns without `self`, in three `impl` blocks of one module: one default
/// name, `{module}::connect`.
mod clash {
    use super::{down_if, Error};
    use breaker::circuit_breaker;

    pub struct Users;
    pub struct Orders;
    pub struct Invoices;

    impl Users {
        #[circuit_breaker]
        pub fn connect() -> Result<u32, Error> {
            down_if(false)
        }
    }

    impl Orders {
        #[circuit_breaker]
        pub fn connect() -> Result<u32, Error> {
            down_if(false)
        }
    }

    impl Invoices {
        #[circuit_breaker]
        pub fn connect() -> Result<u32, Error> {
            down_if(false)
        }
    }

    // Keyed: the map's default name, `{module}::by_region`, clashes the same way.
    impl Users {
        #[circuit_breaker(key = region)]
        pub fn by_region(region: &str) -> Result<u32, Error> {
            down_if(region.is_empty())
        }
    }

    impl Orders {
        #[circuit_breaker(key = region)]
        pub fn by_region(region: &str) -> Result<u32, Error> {
            down_if(region.is_empty())
        }
    }
}

#[test]
fn two_functions_sharing_a_default_name_log_one_warn() {
    let rec = Recorder::default();
    tracing::subscriber::with_default(rec.clone(), || {
        clash::Users::connect().unwrap();
        assert!(rec.0.lock().unwrap().is_empty(), "the first is alone");
        clash::Orders::connect().unwrap();
        clash::Invoices::connect().unwrap();
        // Each function's breaker is made once: calling again logs nothing more.
        clash::Orders::connect().unwrap();
        Users.load(false).unwrap();
        // A keyed map is made once per function too, whatever the keys.
        clash::Users::by_region("eu").unwrap();
        clash::Users::by_region("us").unwrap();
        assert_eq!(rec.0.lock().unwrap().len(), 1, "one map per function");
        clash::Orders::by_region("eu").unwrap();
    });
    let warned = rec.0.lock().unwrap();
    assert_eq!(warned.len(), 2, "{warned:?}");
    for (warned, clashing) in warned.iter().zip(["connect", "by_region"]) {
        let clashing = format!("{}::clash::{clashing}", module_path!());
        assert_eq!(warned.name, clashing);
        assert!(
            warned.message.contains(&format!("`{clashing}`")) && warned.message.contains("name = "),
            "{}",
            warned.message
        );
    }
}
