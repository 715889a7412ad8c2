//! `ppo.bptt` and `ppo.refresh_states`: read, checked against the rollout
//! and the minibatches, refused without a core, each naming the field.

use super::super::*;

fn set(env: &str, sets: &[&str]) -> Result<RunConfig, ConfigError> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    RunConfig::resolve(Some(env), None, &sets)
}

#[test]
fn bptt_cuts_the_rollout_into_whole_chunks_of_a_network_with_memory() {
    // The preset trains each env's whole rollout, once per update.
    let c = set("CartPoleNoVel-v1", &[]).unwrap();
    assert_eq!((c.ppo.bptt, c.ppo.refresh_states), (0, false));
    assert_eq!(c.ppo.sequence_steps(c.env.rollout_length), 32);
    let c = set(
        "CartPoleNoVel-v1",
        &["ppo.bptt=8", "ppo.refresh_states=true"],
    )
    .unwrap();
    assert_eq!(c.ppo.sequence_steps(32), 8);
    assert!(c.ppo.refresh_states);
    // The rollout itself is a whole chunk.
    assert!(set("CartPoleNoVel-v1", &["ppo.bptt=32"]).is_ok());
    for bad in ["ppo.bptt=5", "ppo.bptt=64"] {
        let e = set("CartPoleNoVel-v1", &[bad]).unwrap_err().to_string();
        assert!(
            e.contains("ppo.bptt") && e.contains("env.rollout_length = 32"),
            "{bad}: {e}"
        );
    }
    let e = set("CartPoleNoVel-v1", &["ppo.bptt=-1"]).unwrap_err();
    assert!(e.to_string().contains("ppo.bptt"), "{e}");
}

#[test]
fn minibatches_need_a_sequence_each_and_memoryless_runs_refuse_the_keys() {
    // 2 batches x 8 envs = 16 whole sequences; 64 chunks of 8 steps.
    let e = set("CartPoleNoVel-v1", &["ppo.minibatches=32"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ppo.minibatches") && e.contains("holds 16"),
        "{e}"
    );
    assert!(set("CartPoleNoVel-v1", &["ppo.minibatches=32", "ppo.bptt=8"]).is_ok());
    for key in ["ppo.bptt=8", "ppo.refresh_states=true"] {
        let e = set("CartPole-v1", &[key]).unwrap_err().to_string();
        let name = key.split('=').next().unwrap();
        assert!(e.contains(name) && e.contains("network.core"), "{key}: {e}");
    }
}

#[test]
fn a_game_with_a_core_trains_its_seats_whole_or_in_chunks() {
    let c = set("BigTwo-v0", &["network.core=lstm"]).unwrap();
    assert_eq!(c.ppo.bptt, 0);
    let t = c.env.rollout_length;
    assert!(set("BigTwo-v0", &["network.core=gru", &format!("ppo.bptt={t}")]).is_ok());
    assert!(set("BigTwo-v0", &["network.core=lstm", "ppo.bptt=8"]).is_ok());
    // Past selves and rule players keep their seats (their moves are read
    // in the seats' sequences, out of the loss).
    for others in ["selfplay.past_fraction=0.2", "selfplay.rule_fraction=0.5"] {
        assert!(set("BigTwo-v0", &["network.core=lstm", others]).is_ok());
    }
}
