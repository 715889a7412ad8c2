//! The native MinAtar games against the `minatar` package (PyPI, in the
//! tools venv; GPL, used as a reference and never copied): every transition
//! from the package's own states under the same actions (whole episodes, or,
//! in a game that draws at random while it plays, each step from the
//! package's state before it, leaving out the steps that draw), and, since
//! the package's random draws cannot be matched, the distributions of episode
//! length and return under random play (sticky actions and the difficulty
//! ramp on, as the paper plays) by a two-sample Kolmogorov-Smirnov test over
//! 5,000 episodes each. The package's side is `tests/minatar_reference.py`.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sebulba_envs::minatar::{MinAtar, Options};
use sebulba_envs::{Action, ActionSpace, Env};
use std::path::{Path, PathBuf};
use std::process::Command;

/// (the package's module, our id with the minimal action set)
const GAMES: &[(&str, &str)] = &[
    ("asterix", "MinAtar/Asterix-v1"),
    ("breakout", "MinAtar/Breakout-v1"),
    ("freeway", "MinAtar/Freeway-v1"),
    ("seaquest", "MinAtar/Seaquest-v1"),
    ("space_invaders", "MinAtar/SpaceInvaders-v1"),
];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/minatar_reference.py")
}

fn package(python: &Path, args: &[&str]) -> String {
    let out = Command::new(python)
        .arg(script())
        .args(args)
        .output()
        .expect("running the reference script");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn bits(obs: &[f32]) -> String {
    obs.iter()
        .map(|&v| if v == 1.0 { '1' } else { '0' })
        .collect()
}

fn game(id: &str, sticky_action_prob: f64, seed: u64) -> MinAtar {
    let options = Options {
        sticky_action_prob,
        difficulty_ramping: true,
    };
    MinAtar::new(id, options, seed).expect("a MinAtar id")
}

#[test]
fn every_transition_matches_the_package_from_its_own_states() {
    let Some(python) = common::tools_python_or_skip("minatar") else {
        return;
    };
    for (name, id) in GAMES {
        // Freeway's episodes all last 2,501 steps: fewer of them.
        let episodes_wanted = if *name == "freeway" { 12 } else { 300 };
        let lines = package(
            &python,
            &["replay", name, &episodes_wanted.to_string(), "7"],
        );
        let (mut episodes, mut steps, mut drawn) = (0, 0, 0);
        for line in lines.lines() {
            let ep: serde_json::Value = serde_json::from_str(line).expect("an episode");
            let state: Vec<f64> = serde_json::from_value(ep["state"].clone()).expect("state");
            let mut env = game(id, 0.0, 0);
            env.set_state(&state).expect("the package's state");
            let mut obs = vec![0.0; env.spec().obs_dim];
            env.observe(&mut obs);
            assert_eq!(
                bits(&obs),
                ep["obs"],
                "{name} episode {episodes}: the start"
            );
            for (t, s) in ep["steps"].as_array().expect("steps").iter().enumerate() {
                let a = s[0].as_u64().expect("action") as usize;
                // A game that draws while it plays restarts each step from
                // the package's state; a step that draws is not compared.
                if let Some(before) = s[4].get("before") {
                    let before: Vec<f64> = serde_json::from_value(before.clone()).expect("state");
                    env.set_state(&before).expect("the package's state");
                }
                let r = env.step(Action::Discrete(a), &mut obs).expect("a step");
                if s[4]["draws"] == true {
                    drawn += 1;
                    continue;
                }
                let at = format!("{name} episode {episodes} step {t} (action {a})");
                assert_eq!(r.reward, s[1].as_f64().expect("reward"), "{at}: reward");
                assert_eq!(r.terminated, s[2].as_bool().expect("done"), "{at}: end");
                assert_eq!(bits(&obs), s[3], "{at}: observation");
                steps += 1;
            }
            episodes += 1;
        }
        assert_eq!(episodes, episodes_wanted);
        eprintln!(
            "{name}: {episodes} episodes, {steps} transitions as the package's ({drawn} steps that draw at random left out)"
        );
        assert!(steps > 5 * drawn, "{name}: too few steps compared");
    }
}

#[test]
fn random_play_has_the_packages_lengths_and_returns() {
    let Some(python) = common::tools_python_or_skip("minatar") else {
        return;
    };
    for (name, id) in GAMES {
        // Freeway's episodes all last 2,501 steps, so its 5,000 are 12.5M
        // of the package's steps, most of this test's time.
        let episodes = 5000;
        let mut env = game(id, 0.1, 11);
        let ActionSpace::Discrete { n } = env.spec().action_space else {
            unreachable!("MinAtar acts discretely");
        };
        let mut rng = StdRng::seed_from_u64(12);
        let mut obs = vec![0.0; env.spec().obs_dim];
        let (mut lengths, mut returns) = (Vec::new(), Vec::new());
        for _ in 0..episodes {
            env.reset(&mut obs);
            let (mut len, mut ret) = (0u32, 0.0);
            loop {
                let r = env
                    .step(Action::Discrete(rng.random_range(0..n)), &mut obs)
                    .expect("a step");
                (len, ret) = (len + 1, ret + r.reward);
                if r.terminated || len == 5000 {
                    break;
                }
            }
            lengths.push(len);
            returns.push(ret);
        }
        let ours = common::run_dir(&format!("minatar-{name}")).join("ours.json");
        let json = serde_json::json!({ "length": lengths, "return": returns });
        std::fs::write(&ours, json.to_string()).expect("writing ours");
        let n_eps = episodes.to_string();
        let out = package(
            &python,
            &["compare", name, &n_eps, "5", ours.to_str().expect("path")],
        );
        let v: serde_json::Value = serde_json::from_str(out.trim()).expect("the comparison");
        eprintln!("{name}: {v}");
        for what in ["length", "return"] {
            let p = v[what]["pvalue"].as_f64().expect("p-value");
            assert!(
                p > 1e-3,
                "{name}: the {what}s differ from the package's: {}",
                v[what]
            );
        }
    }
}
