//! The registry's ids against their specs and errors, and the vector
//! envs it makes for native ids.

use super::*;
use crate::env::Action;
use crate::ids::ENV_IDS;
use crate::vec_env::ActionBatch;
use std::f64::consts::PI;

#[test]
fn every_id_builds_and_matches_its_spec() {
    for id in ENV_IDS {
        let env = make_env(id, 1).expect("known id");
        let spec = env_spec(id).expect("known id");
        assert_eq!(env.spec(), &spec);
        assert_eq!(spec.id, *id);
        assert_eq!(spec.obs_low.len(), spec.obs_dim);
        assert_eq!(spec.obs_high.len(), spec.obs_dim);
    }
}

#[test]
fn unknown_id_lists_known_ids() {
    let err = make_env("Nope-v0", 0).err().expect("unknown id");
    let msg = err.to_string();
    assert!(
        msg.contains("Nope-v0") && msg.contains("Pendulum-v1"),
        "{msg}"
    );
    assert!(env_spec("Nope-v0").is_err());
}

#[test]
fn bad_state_and_action_are_errors() {
    let mut env = make_env("CartPole-v1", 0).expect("known id");
    assert!(matches!(
        env.set_state(&[0.0; 3]),
        Err(EnvError::BadState { .. })
    ));
    assert!(matches!(
        env.set_state(&[0.0, f64::NAN, 0.0, 0.0]),
        Err(EnvError::BadState { .. })
    ));
    let mut obs = [0.0f32; 4];
    assert!(env.step(Action::Discrete(2), &mut obs).is_err());
    assert!(env.step(Action::Continuous(&[0.0]), &mut obs).is_err());
    let mut pend = make_env("Pendulum-v1", 0).expect("known id");
    let mut obs = [0.0f32; 3];
    assert!(
        pend.step(Action::Continuous(&[0.0, 1.0]), &mut obs)
            .is_err()
    );
    assert!(
        pend.step(Action::Continuous(&[f32::NAN]), &mut obs)
            .is_err()
    );
    assert!(pend.step(Action::Discrete(0), &mut obs).is_err());
}

#[test]
fn resets_follow_gymnasium_distributions() {
    let in_range = |v: &[f64], lo: &[f64], hi: &[f64]| {
        v.iter().zip(lo).zip(hi).all(|((x, l), h)| l <= x && x <= h)
    };
    for seed in 0..50 {
        let mut obs = [0.0f32; 6];
        for id in ENV_IDS {
            let mut env = make_env(id, seed).expect("known id");
            let d = env.spec().obs_dim;
            env.reset(&mut obs[..d]);
            let s = env.state();
            let ok = match *id {
                "CartPole-v1" | "CartPoleNoVel-v1" => in_range(&s, &[-0.05; 4], &[0.05; 4]),
                // float32 draw: may round onto the bound itself.
                "Acrobot-v1" => {
                    in_range(&s, &[-0.1; 4], &[f64::from(0.1f32); 4])
                        && s.iter().all(|&x| f64::from(x as f32) == x)
                }
                "Pendulum-v1" => in_range(&s, &[-PI, -1.0], &[PI, 1.0]),
                _ => in_range(&s, &[-0.6, 0.0], &[-0.4, 0.0]),
            };
            assert!(ok, "{id}: reset state {s:?}");
            let mut expected = vec![0.0f32; d];
            env.observe(&mut expected);
            assert_eq!(obs[..d], expected[..], "{id}");
        }
    }
}

#[test]
fn native_ids_go_through_the_vec_env_and_refuse_kwargs() {
    let mut v = make_vector_env("CartPole-v1", "", 3, 1, Purpose::Train).expect("native");
    assert_eq!(v.num_envs(), 3);
    let mut obs = vec![0.0; 12];
    v.reset(&mut obs).expect("reset");
    assert!(obs.iter().all(|x| x.abs() <= 0.05));
    assert!(make_vector_env("CartPole-v1", "{}", 1, 1, Purpose::Train).is_ok());
    let err = make_vector_env("CartPole-v1", r#"{"a":1}"#, 1, 1, Purpose::Train)
        .err()
        .expect("kwargs refused");
    assert!(err.to_string().contains("native"), "{err}");
    assert!(matches!(
        make_vector_env("CartPole-v1", "", 0, 1, Purpose::Train),
        Err(EnvError::NoEnvs)
    ));
    assert_eq!(
        env_spec_with("Pendulum-v1", "").expect("spec"),
        env_spec("Pendulum-v1").expect("spec")
    );
}

/// `step_cost_us` burns that much CPU time per env step and changes
/// nothing else; bad values and other keys are refused by name.
#[test]
fn a_native_step_cost_spins_without_changing_the_dynamics() {
    let (e, steps, cost_us) = (2, 10, 300);
    let kwargs = format!(r#"{{"step_cost_us":{cost_us}}}"#);
    let mut slow = make_vector_env("CartPole-v1", &kwargs, e, 5, Purpose::Train).expect("slow");
    let mut fast = make_vector_env("CartPole-v1", "", e, 5, Purpose::Train).expect("fast");
    let (mut a, mut b) = (vec![0.0; 4 * e], vec![0.0; 4 * e]);
    slow.reset(&mut a).expect("reset");
    fast.reset(&mut b).expect("reset");
    let (mut oa, mut ob) = (slow.new_step_out(), fast.new_step_out());
    let started = std::time::Instant::now();
    for t in 0..steps {
        let actions = [(t % 2) as u32, ((t / 3) % 2) as u32];
        slow.step(ActionBatch::Discrete(&actions), &mut oa)
            .expect("step");
        fast.step(ActionBatch::Discrete(&actions), &mut ob)
            .expect("step");
        assert_eq!(oa.obs, ob.obs);
        assert_eq!(oa.reward, ob.reward);
        assert_eq!(oa.terminated, ob.terminated);
    }
    let spent = started.elapsed();
    let least = Duration::from_micros(cost_us * (e * steps) as u64);
    assert!(spent >= least, "{spent:?} < {least:?}");
    assert_eq!(
        native_step_cost("CartPole-v1", "{}").expect("none"),
        Duration::ZERO
    );
    for (bad, names) in [
        (r#"{"step_cost_us":-1}"#, "step_cost_us"),
        (r#"{"step_cost_us":1.5}"#, "step_cost_us"),
        (r#"{"step_cost_us":1000001}"#, "step_cost_us"),
        (r#"{"step_cost_us":"fast"}"#, "step_cost_us"),
        (r#"{"gravity":9.8}"#, "env.kwargs.gravity"),
        ("[1]", "env.kwargs"),
    ] {
        let e = native_step_cost("CartPole-v1", bad).expect_err(bad);
        assert!(e.to_string().contains(names), "{bad}: {e}");
        assert!(env_spec_with("CartPole-v1", bad).is_err(), "{bad}");
    }
}

#[test]
fn external_ids_without_a_provider_say_how_to_get_one() {
    // No test in this crate installs a provider.
    assert!(is_external("gym:HalfCheetah-v5") && is_external("py:m:f"));
    assert!(!is_external("CartPole-v1"));
    let err = env_spec_with("gym:CartPole-v1", "").expect_err("no provider");
    assert!(err.to_string().contains("--features python"), "{err}");
}

/// CartPoleNoVel-v1 is CartPole-v1 seen through its positions: the same
/// seed, the same actions, the same states and rewards and ends; only `x`
/// and `theta` observed.
#[test]
fn cartpole_without_velocities_is_cartpole_observed_through_its_positions() {
    let (mut full, mut novel) = (
        make_env("CartPole-v1", 5).unwrap(),
        make_env("CartPoleNoVel-v1", 5).unwrap(),
    );
    let spec = env_spec("CartPoleNoVel-v1").unwrap();
    assert_eq!((spec.obs_dim, spec.max_episode_steps), (2, 500));
    let (mut a, mut b) = ([0.0f32; 4], [0.0f32; 2]);
    full.reset(&mut a);
    novel.reset(&mut b);
    for t in 0..40 {
        let action = Action::Discrete(t * 7 % 3 % 2);
        let x = full.step(action, &mut a).unwrap();
        let y = novel.step(action, &mut b).unwrap();
        assert_eq!((x.reward, x.terminated), (y.reward, y.terminated));
        assert_eq!(full.state(), novel.state());
        assert_eq!(b, [a[0], a[2]], "step {t}");
        if x.terminated {
            break;
        }
    }
}
