//! With the `python` feature, the binary and its tests load libpython from
//! the directory the build linked it from (an rpath), not whatever copy the
//! system loader would find first.
fn main() {
    #[cfg(feature = "python")]
    if let Some(dir) = pyo3_build_config::get().lib_dir() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
