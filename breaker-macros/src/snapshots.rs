//! Expansion snapshots: every `tests/expand/NAME.rs` of the workspace is expanded in-process
//! (the attribute's own `expand`, formatted with `prettyplease`) and compared with
//! `tests/expand/NAME.expanded.rs`. `BREAKER_BLESS=1 cargo test -p breaker-macros` rewrites
//! the snapshots; read the diff before committing it.

use std::{fs, path::PathBuf};

use quote::ToTokens;
use syn::{Attribute, ImplItem, Item};

fn is_ours(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "circuit_breaker")
}

/// Takes `#[circuit_breaker(..)]` off `attrs` and returns its arguments.
fn take_ours(attrs: &mut Vec<Attribute>) -> Option<proc_macro2::TokenStream> {
    let ours = attrs.remove(attrs.iter().position(is_ours)?);
    Some(match ours.meta {
        syn::Meta::List(list) => list.tokens,
        _ => proc_macro2::TokenStream::new(),
    })
}

fn expand(
    args: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    crate::expand::expand(args, item)
        .unwrap_or_else(|e| panic!("the snapshot input does not expand: {e}"))
}

/// Expands every `#[circuit_breaker]` of a file, in free functions and in `impl` blocks.
fn expand_file(source: &str) -> String {
    let mut file: syn::File = syn::parse_str(source).expect("the snapshot input parses");
    for item in &mut file.items {
        match item {
            Item::Fn(f) => {
                if let Some(args) = take_ours(&mut f.attrs) {
                    let out = expand(args, f.to_token_stream());
                    *item = syn::parse2(out).expect("the expansion is an item");
                }
            }
            Item::Impl(imp) => {
                for member in &mut imp.items {
                    let ImplItem::Fn(f) = member else { continue };
                    if let Some(args) = take_ours(&mut f.attrs) {
                        let out = expand(args, f.to_token_stream());
                        *member =
                            ImplItem::Fn(syn::parse2(out).expect("the expansion is a method"));
                    }
                }
            }
            _ => {}
        }
    }
    prettyplease::unparse(&file)
}

#[test]
fn expansions_match_the_snapshots() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/expand");
    let bless = std::env::var_os("BREAKER_BLESS").is_some();
    let mut inputs: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("tests/expand exists")
        .map(|e| e.expect("readable").path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "rs")
                && !p.to_string_lossy().ends_with(".expanded.rs")
        })
        .collect();
    inputs.sort();
    // A snapshot test that finds nothing to compare must fail, not pass silently.
    assert!(
        inputs.len() >= 5,
        "expected the snapshot inputs in {}",
        dir.display()
    );
    let mut stale = Vec::new();
    for input in &inputs {
        let source = fs::read_to_string(input).expect("readable input");
        let actual = expand_file(&source);
        let expected_path = input.with_extension("expanded.rs");
        if bless {
            fs::write(&expected_path, &actual).expect("writable snapshot");
            continue;
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            stale.push(format!(
                "{} differs from its expansion:\n{actual}",
                expected_path.display()
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "{}\n(run with BREAKER_BLESS=1 to rewrite, then read the diff)",
        stale.join("\n\n")
    );
}
