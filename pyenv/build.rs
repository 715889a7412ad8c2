//! The test binaries of this crate load libpython from the directory the
//! build linked it from, not whatever copy the system loader finds first.
fn main() {
    if let Some(dir) = pyo3_build_config::get().lib_dir() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
