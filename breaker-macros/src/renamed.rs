//! A dependency on `breaker` under another name (`brk = { package = "breaker", … }`) without
//! `crate = "…"`: the generated `::breaker::…` paths would fail with two E0433 per function
//! that never mention `crate = "…"`. The user's manifest says so, and the attribute reports
//! it once instead (it does not pick the name up by itself: `crate = "…"` keeps the expansion
//! readable from the source alone, and a facade re-exported elsewhere needs it anyway).

/// The name under which the crate being compiled depends on `breaker`, when its manifest
/// renames it; `None` when it does not, or when the manifest cannot be read.
pub(crate) fn renamed_facade() -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let manifest = std::fs::read_to_string(std::path::Path::new(&dir).join("Cargo.toml")).ok()?;
    renamed_in(&manifest)
}

/// [`renamed_facade`] of a manifest's text. Reads the two ways a rename is written, line by
/// line: `name = { package = "breaker", … }` under a dependency table, and
/// `[dependencies.name]` (or `dev-`, `build-`, `target.….`) with `package = "breaker"`.
/// Not a TOML parser: what it does not recognise it leaves to rustc.
pub(crate) fn renamed_in(manifest: &str) -> Option<String> {
    let mut table = String::new();
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(header) = line.strip_prefix('[') {
            table = header.trim_end_matches(']').trim().to_owned();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let renamed = if is_dependency_table(&table) {
            value.starts_with('{') && names_breaker(value)
        } else {
            key == "package" && unquote(value) == Some("breaker")
        };
        let name = if is_dependency_table(&table) {
            Some(unquote(key).unwrap_or(key))
        } else {
            dependency_in_header(&table)
        };
        match name {
            Some(name) if renamed && name != "breaker" => return Some(name.replace('-', "_")),
            _ => {}
        }
    }
    None
}

/// `dependencies`, `dev-dependencies`, `build-dependencies`, `target.'cfg(…)'.dependencies`.
fn is_dependency_table(table: &str) -> bool {
    table.ends_with("dependencies")
}

/// `name` of a `[dependencies.name]` header.
fn dependency_in_header(table: &str) -> Option<&str> {
    let (head, name) = table.rsplit_once('.')?;
    is_dependency_table(head).then(|| unquote(name.trim()).unwrap_or(name.trim()))
}

/// Whether an inline table holds `package = "breaker"`.
fn names_breaker(inline: &str) -> bool {
    inline
        .trim_matches(|c| c == '{' || c == '}')
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .any(|(k, v)| k.trim() == "package" && unquote(v.trim()) == Some("breaker"))
}

/// The text of a quoted TOML string.
fn unquote(s: &str) -> Option<&str> {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
}

#[cfg(test)]
mod tests {
    use super::renamed_in;

    #[test]
    fn an_inline_rename_is_found() {
        let m = "[package]\nname = \"app\"\n\n[dependencies]\nserde = \"1\"\n\
                 brk = { package = \"breaker\", version = \"0.1\" } # renamed\n";
        assert_eq!(renamed_in(m).as_deref(), Some("brk"));
    }

    #[test]
    fn a_table_rename_is_found_with_dashes_as_underscores() {
        let m = "[dev-dependencies.my-breaker]\nversion = \"0.1\"\npackage = 'breaker'\n";
        assert_eq!(renamed_in(m).as_deref(), Some("my_breaker"));
        let m =
            "[target.'cfg(unix)'.dependencies]\ncb = { path = \"..\", package = \"breaker\" }\n";
        assert_eq!(renamed_in(m).as_deref(), Some("cb"));
    }

    #[test]
    fn no_rename_is_none() {
        for m in [
            "[dependencies]\nbreaker = \"0.1\"\n",
            "[dependencies]\nbreaker = { package = \"breaker\", path = \"..\" }\n",
            "[package]\nname = \"breaker\"\n[dependencies]\nfoo = { package = \"breaker-runtime\" }\n",
            "[dependencies]\n# brk = { package = \"breaker\" }\n",
            "[package.metadata]\npackage = \"breaker\"\n",
        ] {
            assert_eq!(renamed_in(m), None, "{m}");
        }
    }
}
