//! The embedded interpreter: started once per process, with the venv named
//! by `VIRTUAL_ENV` on its path, and the helper module (helper.py) loaded
//! into it. Python errors become [`EnvError`]s carrying the traceback.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyModule, PyTracebackMethods};
use sebulba_envs::EnvError;
use std::ffi::CString;
use std::sync::OnceLock;

static HELPER: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static STARTED: OnceLock<Result<(), String>> = OnceLock::new();

/// Starts the interpreter (once) and adds the venv's packages; an error
/// says what is missing in one line.
pub(crate) fn start(id: &str) -> Result<(), EnvError> {
    STARTED
        .get_or_init(|| {
            if let Ok(home) = std::env::var("PYTHONHOME")
                && !std::path::Path::new(&home).join("lib").is_dir()
            {
                return Err(format!(
                    "PYTHONHOME={home} holds no lib/ (unset it or point it at a Python {}.{} installation)",
                    PY_MAJOR, PY_MINOR
                ));
            }
            Python::initialize();
            Python::attach(|py| add_venv(py).map_err(|e| one_line(py, &e)))
        })
        .clone()
        .map_err(|reason| EnvError::External {
            id: id.to_string(),
            reason,
        })
}

const PY_MAJOR: u32 = 3;
const PY_MINOR: u32 = 11;

/// `VIRTUAL_ENV`'s site-packages go on `sys.path`, as activating it would do
/// for a `python` started from the venv.
fn add_venv(py: Python<'_>) -> PyResult<()> {
    let Ok(venv) = std::env::var("VIRTUAL_ENV") else {
        return Ok(());
    };
    let code = CString::new(format!(
        "import site, sys, os\n\
         d = os.path.join({venv:?}, 'lib', f'python{{sys.version_info[0]}}.{{sys.version_info[1]}}', 'site-packages')\n\
         if not os.path.isdir(d):\n    raise RuntimeError(f'VIRTUAL_ENV={venv}: no {{d}} (a venv of this Python version?)')\n\
         site.addsitedir(d)\n"
    ))
    .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    py.run(&code, None, None)
}

/// The helper module, loaded once. It needs numpy: without it (no venv on
/// the path) the error says how to get one, in one line.
pub(crate) fn helper(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    HELPER
        .get_or_try_init(py, || {
            let helper = PyModule::from_code(
                py,
                c_str(include_str!("helper.py")).as_c_str(),
                c"sebulba_env.py",
                c"sebulba_env",
            )?;
            // EnvPool's source imports the helper's parts by module name.
            PyModule::from_code(
                py,
                c_str(include_str!("envpool.py")).as_c_str(),
                c"sebulba_envpool.py",
                c"sebulba_envpool",
            )?;
            Ok(helper.unbind())
        })
        .map_err(|e: PyErr| {
            let venv = std::env::var("VIRTUAL_ENV").unwrap_or_else(|_| "not set".into());
            pyo3::exceptions::PyImportError::new_err(format!(
                "{} (Python environments need numpy and gymnasium: make a venv with scripts/python-env.sh and set VIRTUAL_ENV to it; VIRTUAL_ENV is {venv})",
                one_line(py, &e)
            ))
        })
        .map(|m| m.bind(py))
}

fn c_str(s: &str) -> CString {
    // helper.py and envpool.py are ours and hold no NUL.
    CString::new(s).unwrap_or_default()
}

/// The spaces of `id` (helper.py's `spec_json`).
pub(crate) fn describe(id: &str, kwargs: &str) -> Result<String, EnvError> {
    start(id)?;
    Python::attach(|py| {
        helper(py)?
            .call_method1("spec_json", (id, kwargs))?
            .extract::<String>()
    })
    .map_err(|e| Python::attach(|py| external(py, id, &e)))
}

/// A Python error as an [`EnvError`]: the exception in one line, then the
/// traceback (the user's code is usually where it went wrong).
pub(crate) fn external(py: Python<'_>, id: &str, e: &PyErr) -> EnvError {
    let kind = kind(py, e);
    if kind == "BadId" {
        // The id names nothing: where in our helper that was found is noise.
        return EnvError::External {
            id: id.to_string(),
            reason: e.value(py).to_string(),
        };
    }
    let mut reason = one_line(py, e);
    if let Some(tb) = e.traceback(py).and_then(|tb| tb.format().ok()) {
        reason.push('\n');
        reason.push_str(tb.trim_end());
    }
    EnvError::External {
        id: id.to_string(),
        reason,
    }
}

fn kind(py: Python<'_>, e: &PyErr) -> String {
    e.get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into())
}

/// `ExceptionType: message`.
pub(crate) fn one_line(py: Python<'_>, e: &PyErr) -> String {
    format!("{}: {}", kind(py, e), e.value(py))
}
