//! The front door stays a front door: the README is one page (its manual is the guide in
//! rustdoc), and neither it nor the guide reads as a maintainer's log. A cheap guard, not a
//! style police: the snippets themselves are doctests (the README is the crate's docs, the
//! guide's pages are `breaker::guide`).

use std::path::Path;

const README: &str = include_str!("../README.md");

/// Words that tell the project's history rather than what the library does.
const HISTORY: &[&str] = &[
    "part one",
    "part two",
    "part three",
    "part four",
    "part five",
    "used to",
    "before:",
];

fn history_in(text: &str) -> Vec<(usize, &'static str)> {
    let lower = text.to_lowercase();
    lower
        .lines()
        .enumerate()
        .flat_map(|(n, line)| {
            HISTORY
                .iter()
                .filter(move |w| line.contains(**w))
                .map(move |w| (n + 1, *w))
        })
        .collect()
}

#[test]
fn the_readme_is_one_page() {
    let lines = README.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: keep it a front page (about 250) and move the rest to \
         a page of src/guide/"
    );
}

#[test]
fn the_readme_tells_no_history() {
    let found = history_in(README);
    assert!(
        found.is_empty(),
        "README.md: history words at (line, word) {found:?}"
    );
}

#[test]
fn the_readme_keeps_the_quick_start_commands() {
    // CI's contract: the demo and the test command, exactly.
    assert!(README.contains("cargo run --example checkout"));
    assert!(README.contains("scripts/test"));
}

#[test]
fn the_guide_tells_no_history() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/guide");
    let mut pages = 0;
    for entry in std::fs::read_dir(&dir).expect("src/guide") {
        let path = entry.expect("a page").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages += 1;
            let text = std::fs::read_to_string(&path).expect("a page's text");
            let found = history_in(&text);
            assert!(
                found.is_empty(),
                "{}: history words at {found:?}",
                path.display()
            );
        }
    }
    assert!(pages >= 15, "one page per subject: found {pages}");
}
