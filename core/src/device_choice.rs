//! What `learner.devices = ["auto"]` becomes as the learner starts, and why.

use crate::config::{LearnerEngine, NetworkConfig, RunConfig};
use crate::devices::{cuda_devices, is_auto};

/// The learner's devices once `auto` is resolved, and why: the log line and
/// `summary.json` say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceChoice {
    pub devices: Vec<String>,
    pub reason: String,
}

/// Resolves `learner.devices = ["auto"]`: the first CUDA device when
/// `cuda_devices` finds one and the update is a convolutional network's on
/// an engine that can run there, else the CPU. An MLP stays on the CPU: its
/// fused engine outruns a GPU's kernel launches at these sizes
/// (docs/performance.md, Devices). Named devices pass through unchanged.
pub fn choose(
    names: &[String],
    engine: LearnerEngine,
    network: &NetworkConfig,
    cuda_devices: impl FnOnce() -> Result<usize, String>,
) -> DeviceChoice {
    let cpu = |why: String| DeviceChoice {
        devices: vec!["cpu".into()],
        reason: format!("auto: cpu ({why})"),
    };
    if !is_auto(names) {
        return DeviceChoice {
            devices: names.to_vec(),
            reason: "as configured".into(),
        };
    }
    if engine == LearnerEngine::Fused {
        return cpu("learner.engine = fused runs on the CPU".into());
    }
    if !network.is_convolutional() {
        return cpu("an MLP: the fused CPU engine is faster for it than a GPU".into());
    }
    match cuda_devices() {
        Ok(0) => cpu("the CUDA driver reports no device".into()),
        Ok(n) => DeviceChoice {
            devices: vec!["cuda:0".into()],
            reason: format!("auto: cuda:0 (a convolutional network; {n} CUDA device(s))"),
        },
        Err(why) => cpu(why),
    }
}

/// Resolves `cfg`'s `learner.devices` in place ([`choose`], asking the CUDA
/// driver only when `auto` could take a GPU).
pub fn resolve(cfg: &mut RunConfig) -> DeviceChoice {
    let c = choose(
        &cfg.learner.devices,
        cfg.learner.engine,
        &cfg.network,
        cuda_devices,
    );
    cfg.learner.devices.clone_from(&c.devices);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn network(conv: bool) -> NetworkConfig {
        let mut c = crate::config::RunConfig::preset("CartPole-v1").unwrap();
        if conv {
            c.network.conv = vec![crate::config::ConvLayer {
                channels: 16,
                kernel: 3,
                stride: 1,
                padding: 0,
            }];
        }
        c.network
    }

    #[test]
    fn auto_takes_cuda_for_a_conv_network_when_a_device_answers() {
        let auto = names(&["auto"]);
        let conv = network(true);
        let c = choose(&auto, LearnerEngine::Auto, &conv, || Ok(2));
        assert_eq!(c.devices, names(&["cuda:0"]));
        assert!(c.reason.contains("2 CUDA device"), "{}", c.reason);
        let c = choose(&auto, LearnerEngine::Burn, &conv, || Ok(1));
        assert_eq!(c.devices, names(&["cuda:0"]));
        // No device, no library, or an engine that only runs on the CPU.
        let c = choose(&auto, LearnerEngine::Auto, &conv, || Ok(0));
        assert_eq!(c.devices, names(&["cpu"]));
        let c = choose(&auto, LearnerEngine::Auto, &conv, || {
            Err("no libcuda".into())
        });
        assert_eq!(
            (c.devices, c.reason),
            (names(&["cpu"]), "auto: cpu (no libcuda)".into())
        );
        let c = choose(&auto, LearnerEngine::Fused, &conv, || panic!("not asked"));
        assert_eq!(c.devices, names(&["cpu"]));
        // An MLP stays on the CPU without asking the driver.
        let c = choose(&auto, LearnerEngine::Auto, &network(false), || {
            panic!("not asked")
        });
        assert_eq!(c.devices, names(&["cpu"]));
        assert!(c.reason.contains("MLP"), "{}", c.reason);
        // Named devices pass through.
        let named = names(&["cpu", "cpu"]);
        let c = choose(&named, LearnerEngine::Auto, &conv, || panic!("not asked"));
        assert_eq!((c.devices, c.reason.as_str()), (named, "as configured"));
    }
}
