//! Device names as users write them (`cpu`, `cuda:0`, and `auto` for the
//! learner): the learner's replicas (`learner.devices`) and the actors' and
//! evaluator's inference device.

use std::fmt;

/// `learner.devices = ["auto"]`: the learner picks its device as it starts.
pub const AUTO: &str = "auto";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    Cuda(usize),
}

impl DeviceKind {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "cpu" => Some(DeviceKind::Cpu),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceKind::Cuda),
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceKind::Cpu => write!(f, "cpu"),
            DeviceKind::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// The learner's replicas: all on CPU, or all on CUDA devices (one backend per
/// learner process).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LearnerDevices {
    Cpu(usize),
    Cuda(Vec<usize>),
}

impl LearnerDevices {
    /// Concrete device names (`auto` is resolved first:
    /// [`crate::device_choice::choose`]).
    pub fn parse(names: &[String]) -> Result<Self, String> {
        if is_auto(names) {
            return Err("`auto` is resolved as the learner starts (device_choice::choose)".into());
        }
        if names.iter().any(|n| n.trim() == AUTO) {
            return Err("`auto` stands alone: [\"auto\"] picks one device".into());
        }
        let kinds = names
            .iter()
            .map(|n| {
                DeviceKind::parse(n)
                    .ok_or_else(|| format!("unknown device `{n}` (expected cpu or cuda:N)"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if kinds.is_empty() {
            return Err("needs at least one device".into());
        }
        if kinds.iter().all(|k| *k == DeviceKind::Cpu) {
            return Ok(LearnerDevices::Cpu(kinds.len()));
        }
        let cuda: Vec<usize> = kinds
            .iter()
            .filter_map(|k| match k {
                DeviceKind::Cuda(n) => Some(*n),
                DeviceKind::Cpu => None,
            })
            .collect();
        if cuda.len() != kinds.len() {
            return Err("mixes cpu and cuda devices; one learner uses one backend".into());
        }
        let mut seen = cuda.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != cuda.len() {
            return Err("names a cuda device twice".into());
        }
        Ok(LearnerDevices::Cuda(cuda))
    }

    pub fn count(&self) -> usize {
        match self {
            LearnerDevices::Cpu(n) => *n,
            LearnerDevices::Cuda(v) => v.len(),
        }
    }
}

/// Whether `names` is `["auto"]`.
pub fn is_auto(names: &[String]) -> bool {
    matches!(names, [one] if one.trim() == AUTO)
}

/// How many CUDA devices answer, loading the driver and NVRTC the way
/// burn-cuda will (by name, at run time), so that a missing library is one
/// clear reason here rather than a panic inside the first update.
#[cfg(feature = "cuda")]
pub fn cuda_devices() -> Result<usize, String> {
    // SAFETY: these only try to open shared libraries by name.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("no CUDA driver library (libcuda.so.1) on the loader's path".into());
    }
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(
            "no NVRTC (libnvrtc.so) on the loader's path: burn-cuda compiles its kernels with it"
                .into(),
        );
    }
    cudarc::driver::result::init().map_err(|e| format!("the CUDA driver did not start: {e}"))?;
    let n = cudarc::driver::result::device::get_count()
        .map_err(|e| format!("the CUDA driver could not count devices: {e}"))?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Without the `cuda` feature there is nothing to find.
#[cfg(not(feature = "cuda"))]
pub fn cuda_devices() -> Result<usize, String> {
    Err("this binary was built without `--features cuda`".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_device_lists() {
        assert_eq!(
            LearnerDevices::parse(&names(&["cpu", "cpu"])),
            Ok(LearnerDevices::Cpu(2))
        );
        assert_eq!(
            LearnerDevices::parse(&names(&["cuda:0", "cuda:1"])),
            Ok(LearnerDevices::Cuda(vec![0, 1]))
        );
        assert!(LearnerDevices::parse(&names(&["cpu", "cuda:0"])).is_err());
        assert!(LearnerDevices::parse(&names(&["cuda:0", "cuda:0"])).is_err());
        assert!(
            LearnerDevices::parse(&names(&["gpu"]))
                .unwrap_err()
                .contains("`gpu`")
        );
        assert!(LearnerDevices::parse(&[]).is_err());
        assert!(LearnerDevices::parse(&names(&["auto"])).is_err());
        assert!(
            LearnerDevices::parse(&names(&["auto", "cpu"]))
                .unwrap_err()
                .contains("stands alone")
        );
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn without_the_cuda_feature_no_device_is_found() {
        let e = cuda_devices().unwrap_err();
        assert!(e.contains("--features cuda"), "{e}");
    }
}
