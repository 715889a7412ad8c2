//! The configuration reference's range table is the one the checks use:
//! `docs/configuration.md` holds [`reference_table`] between its markers.
//! `SEBULBA_BLESS=1 cargo test -p sebulba-core --test docs` rewrites it.

use sebulba_core::config::ranges::reference_table;
use std::path::PathBuf;

const BEGIN: &str = "<!-- ranges: generated from core/src/config/ranges.rs; SEBULBA_BLESS=1 cargo test -p sebulba-core --test docs rewrites it -->";
const END: &str = "<!-- ranges: end -->";

#[test]
fn the_configuration_reference_lists_every_range() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let start = text
        .find(BEGIN)
        .unwrap_or_else(|| panic!("{} lacks the line {BEGIN}", path.display()))
        + BEGIN.len();
    let end = start
        + text[start..]
            .find(END)
            .unwrap_or_else(|| panic!("{} lacks the line {END}", path.display()));
    let want = format!("\n\n{}\n", reference_table());
    if text[start..end] == want {
        return;
    }
    if std::env::var_os("SEBULBA_BLESS").is_some() {
        let blessed = format!("{}{want}{}", &text[..start], &text[end..]);
        std::fs::write(&path, blessed).expect("rewriting the reference");
        return;
    }
    panic!(
        "{}'s range table differs from core/src/config/ranges.rs: \
         run SEBULBA_BLESS=1 cargo test -p sebulba-core --test docs and commit the file",
        path.display()
    );
}
