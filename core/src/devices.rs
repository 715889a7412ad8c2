//! Device names as users write them (`cpu`, `cuda:0`): the learner's replicas
//! (`learner.devices`) and the actors' and evaluator's inference device.

use std::fmt;

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
    pub fn parse(names: &[String]) -> Result<Self, String> {
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
    }
}
