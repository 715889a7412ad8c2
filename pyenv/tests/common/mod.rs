//! The embedded interpreter as the tests start it: the repository's `.venv`
//! (unless `VIRTUAL_ENV` names another) and the fixtures on `sys.path`.
#![allow(dead_code)]

use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::Once;

static SETUP: Once = Once::new();

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Starts Python with the venv and the fixtures on its path; false (after
/// saying why) when gymnasium is not there and not required.
pub fn python() -> bool {
    SETUP.call_once(|| {
        let venv = repo().join(".venv");
        if std::env::var_os("VIRTUAL_ENV").is_none() && venv.is_dir() {
            // SAFETY: before any thread of this test binary reads the
            // environment through Python (the interpreter starts below).
            unsafe { std::env::set_var("VIRTUAL_ENV", venv) };
        }
        sebulba_pyenv::install();
        if let Err(e) = sebulba_pyenv::start() {
            panic!("the embedded interpreter did not start: {e}");
        }
        let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        Python::attach(|py| -> PyResult<()> {
            py.import("sys")?
                .getattr("path")?
                .call_method1("insert", (0, fixtures.display().to_string()))?;
            Ok(())
        })
        .expect("sys.path");
    });
    imports("gymnasium")
}

/// Whether `module` imports in the embedded Python (started by
/// [`python`]); false after saying so when it does not and is not required.
pub fn imports(module: &str) -> bool {
    let ready = Python::attach(|py| py.import(module).is_ok());
    if !ready {
        assert!(
            std::env::var_os("SEBULBA_REQUIRE_PYTHON").is_none(),
            "SEBULBA_REQUIRE_PYTHON is set but {module} does not import: run scripts/python-env.sh"
        );
        eprintln!(
            "SKIPPED: {module} does not import in the embedded Python (run scripts/python-env.sh, or set VIRTUAL_ENV)"
        );
    }
    ready
}
