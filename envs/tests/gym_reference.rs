//! Checks every environment against transitions recorded with Gymnasium 1.x
//! (see `tests/data/gymnasium/README.md`). The tables are copied into this
//! crate from the project's shared reference folder, where new ones appear;
//! `SEBULBA_GYM_REFERENCE` points the replay at another folder.
//!
//! For each row: set the recorded state (with the dtype Gymnasium held it in),
//! check the observation function, step with the recorded action through the
//! same TimeLimit path NativeVecEnv uses, and compare state, observation, reward,
//! terminated and truncated to 1e-6.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sebulba_envs::{Action, ENV_IDS, StateOrigin, TimeLimit, make_env};
use serde::Deserialize;

const TOL: f64 = 1e-6;
/// Envs whose reference includes a table that reaches the goal.
const GOAL_ENVS: &[&str] = &["Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0"];
const REPLAY_STEPS: u32 = 50;

#[derive(Deserialize)]
struct Row {
    env: String,
    i: u64,
    t: u32,
    state: Vec<f64>,
    obs: Vec<f64>,
    action: RowAction,
    next_state: Vec<f64>,
    next_obs: Vec<f64>,
    reward: f64,
    terminated: bool,
    truncated: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RowAction {
    Discrete(usize),
    Continuous(Vec<f32>),
}

/// The numbers after `"key": ` in a JSON line, parsed with std's correctly
/// rounded parser: serde_json's default float parsing may be an ulp off, which
/// would blur the bit-exactness statistic (not the 1e-6 checks).
fn exact_numbers(line: &str, key: &str, ctx: &str) -> Vec<f64> {
    let pat = format!("\"{key}\": ");
    let start = line
        .find(&pat)
        .unwrap_or_else(|| panic!("{ctx}: no `{key}`"))
        + pat.len();
    let rest = &line[start..];
    let text = match rest.strip_prefix('[') {
        Some(list) => {
            &list[..list
                .find(']')
                .unwrap_or_else(|| panic!("{ctx}: `{key}` unclosed"))]
        }
        None => &rest[..rest.find([',', '}']).unwrap_or(rest.len())],
    };
    text.split(',')
        .map(|x| {
            x.trim()
                .parse()
                .unwrap_or_else(|e| panic!("{ctx}: `{key}`: {e}"))
        })
        .collect()
}

/// Replaces the float fields of `row` by exactly parsed values.
fn reparse_floats(row: &mut Row, line: &str, ctx: &str) {
    row.state = exact_numbers(line, "state", ctx);
    row.obs = exact_numbers(line, "obs", ctx);
    row.next_state = exact_numbers(line, "next_state", ctx);
    row.next_obs = exact_numbers(line, "next_obs", ctx);
    row.reward = exact_numbers(line, "reward", ctx)[0];
    if let RowAction::Continuous(a) = &mut row.action {
        *a = exact_numbers(line, "action", ctx)
            .iter()
            .map(|&x| x as f32)
            .collect();
    }
}

/// Per-env tally of what was checked.
#[derive(Default)]
struct Tally {
    rows: usize,
    max_state: f64,
    max_obs: f64,
    max_reward: f64,
    max_reset_obs: f64,
    /// Rows re-stepped from the episode start, and their largest error.
    replayed: usize,
    max_replay: f64,
    /// Rows whose state, observations and reward match bit for bit.
    exact: usize,
    terminated: usize,
    truncated: usize,
}

fn reference_dir() -> PathBuf {
    std::env::var_os("SEBULBA_GYM_REFERENCE").map_or_else(
        || PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gymnasium")),
        PathBuf::from,
    )
}

/// The reference observation as the float32 values Gymnasium returned.
fn as_f32(obs: &[f64]) -> Vec<f64> {
    obs.iter().map(|&x| f64::from(x as f32)).collect()
}

/// Largest absolute difference; lengths must agree.
fn max_abs_diff(what: &str, ctx: &str, got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "{ctx}: {what} length");
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max)
}

fn check(tally: &mut Tally, row: &Row, ctx: &str) {
    let mut env = TimeLimit::new(make_env(&row.env, 0).unwrap_or_else(|e| panic!("{ctx}: {e}")));
    let spec = env.env().spec().clone();
    // After reset Gymnasium holds the state it drew; every later row's state
    // was stored by `step()` (MountainCarContinuous: float32 then).
    let origin = if row.t > 0 {
        StateOrigin::Step
    } else {
        StateOrigin::Reset
    };
    env.env_mut()
        .set_state_from(&row.state, origin)
        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    env.set_elapsed(row.t);

    let mut obs = vec![0.0f32; spec.obs_dim];
    env.env().observe(&mut obs);
    let obs64: Vec<f64> = obs.iter().map(|&x| f64::from(x)).collect();
    let e_reset_obs = max_abs_diff("obs", ctx, &obs64, &as_f32(&row.obs));

    let step = env
        .step(action_of(row), &mut obs)
        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let obs64: Vec<f64> = obs.iter().map(|&x| f64::from(x)).collect();
    let e_state = max_abs_diff("state", ctx, &env.env().state(), &row.next_state);
    let e_obs = max_abs_diff("next_obs", ctx, &obs64, &as_f32(&row.next_obs));
    let e_reward = (step.reward - row.reward).abs();

    assert!(
        e_reset_obs <= TOL,
        "{ctx}: observe() {obs64:?} vs obs {:?}",
        row.obs
    );
    assert!(
        e_state <= TOL,
        "{ctx}: state {:?} vs next_state {:?}",
        env.env().state(),
        row.next_state
    );
    assert!(
        e_obs <= TOL,
        "{ctx}: obs {obs64:?} vs next_obs {:?}",
        row.next_obs
    );
    assert!(
        e_reward <= TOL,
        "{ctx}: reward {} vs {}",
        step.reward,
        row.reward
    );
    assert_eq!(step.terminated, row.terminated, "{ctx}: terminated");
    assert_eq!(step.truncated, row.truncated, "{ctx}: truncated");

    tally.rows += 1;
    tally.exact += usize::from(e_state + e_obs + e_reward + e_reset_obs == 0.0);
    tally.max_state = tally.max_state.max(e_state);
    tally.max_obs = tally.max_obs.max(e_obs);
    tally.max_reward = tally.max_reward.max(e_reward);
    tally.max_reset_obs = tally.max_reset_obs.max(e_reset_obs);
    tally.terminated += usize::from(row.terminated);
    tally.truncated += usize::from(row.truncated);
}

/// Steps the first [`REPLAY_STEPS`] rows of each episode from its reset state
/// without setting the state again, so each env's own dtype bookkeeping is
/// exercised (short, so a chaotic env cannot blow a last-bit libm difference
/// up past the tolerance).
fn replay(tally: &mut Tally, rows: &[(String, Row)]) {
    let mut env: Option<TimeLimit> = None;
    let mut obs = Vec::new();
    for (ctx, row) in rows {
        if row.t == 0 {
            let mut e =
                TimeLimit::new(make_env(&row.env, 0).unwrap_or_else(|e| panic!("{ctx}: {e}")));
            e.env_mut()
                .set_state_from(&row.state, StateOrigin::Reset)
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            obs = vec![0.0f32; e.env().spec().obs_dim];
            env = Some(e);
        }
        let Some(e) = env.as_mut().filter(|_| row.t < REPLAY_STEPS) else {
            continue;
        };
        let step = e
            .step(action_of(row), &mut obs)
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let obs64: Vec<f64> = obs.iter().map(|&x| f64::from(x)).collect();
        let err = max_abs_diff("state", ctx, &e.env().state(), &row.next_state)
            .max(max_abs_diff(
                "next_obs",
                ctx,
                &obs64,
                &as_f32(&row.next_obs),
            ))
            .max((step.reward - row.reward).abs());
        assert!(
            err <= TOL,
            "{ctx}: replay from the episode start drifted by {err:e}"
        );
        assert_eq!(step.terminated, row.terminated, "{ctx}: replay terminated");
        tally.replayed += 1;
        tally.max_replay = tally.max_replay.max(err);
    }
}

fn action_of(row: &Row) -> Action<'_> {
    match &row.action {
        RowAction::Discrete(a) => Action::Discrete(*a),
        RowAction::Continuous(a) => Action::Continuous(a),
    }
}

fn check_file(path: &Path, tallies: &mut BTreeMap<String, Tally>) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut rows = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let ctx = format!("{}:{}", path.display(), n + 1);
        let mut row: Row = serde_json::from_str(line).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        reparse_floats(&mut row, line, &ctx);
        assert!(
            ENV_IDS.contains(&row.env.as_str()),
            "{ctx}: reference env `{}` is not implemented (known: {ENV_IDS:?})",
            row.env
        );
        let ctx = format!("{ctx} ({} i={} t={})", row.env, row.i, row.t);
        check(tallies.entry(row.env.clone()).or_default(), &row, &ctx);
        rows.push((ctx, row));
    }
    assert!(!rows.is_empty(), "{}: no rows", path.display());
    replay(tallies.entry(rows[0].1.env.clone()).or_default(), &rows);
}

#[test]
fn matches_gymnasium_reference_transitions() {
    let dir = reference_dir();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "Gymnasium reference folder {} unreadable ({e}); set SEBULBA_GYM_REFERENCE",
            dir.display()
        )
    });
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut tallies = BTreeMap::new();
    for path in &files {
        check_file(path, &mut tallies);
    }
    let total: usize = tallies.values().map(|t| t.rows).sum();
    assert!(
        total > 0,
        "no reference rows in {} ({} .jsonl files)",
        dir.display(),
        files.len()
    );
    // The goal-reaching tables (`*-pump.jsonl`) are what exercise the goal
    // tests and terminal rewards of these envs: random actions never get there.
    for id in GOAL_ENVS {
        let pump = dir.join(format!("{id}-pump.jsonl"));
        assert!(
            files.contains(&pump),
            "{} is missing: copy it from the shared reference folder",
            pump.display()
        );
        let t = &tallies[*id];
        assert!(t.terminated > 0, "{id}: no termination replayed");
    }
    eprintln!("Gymnasium reference rows from {}:", dir.display());
    for (id, t) in &tallies {
        eprintln!(
            "  {id:26} rows {:5}  max|err| state {:.3e} obs {:.3e} reward {:.3e} reset-obs {:.3e}  bit-exact rows {}  replayed {} (max|err| {:.3e})  (terminated {}, truncated {})",
            t.rows,
            t.max_state,
            t.max_obs,
            t.max_reward,
            t.max_reset_obs,
            t.exact,
            t.replayed,
            t.max_replay,
            t.terminated,
            t.truncated
        );
    }
}

/// Numbers inside the `k`-th `[...]` of a NumPy-printed Box (`inf` allowed).
fn bracketed(text: &str, k: usize, ctx: &str) -> Vec<f64> {
    let inner = text
        .split('[')
        .nth(k + 1)
        .and_then(|s| s.split(']').next())
        .unwrap_or_else(|| panic!("{ctx}: no bracket {k} in `{text}`"));
    inner
        .split_whitespace()
        .map(|x| x.parse().unwrap_or_else(|e| panic!("{ctx}: `{x}`: {e}")))
        .collect()
}

/// Checks the specs against `meta.json` and `meta-pump.json` (observation
/// bounds are printed with 8 significant digits there, hence the relative
/// tolerance).
#[test]
fn specs_match_gymnasium_meta() {
    check_meta("meta.json");
    check_meta("meta-pump.json");
}

fn check_meta(file: &str) {
    use sebulba_envs::{ActionSpace, env_spec};
    let path = reference_dir().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let meta: serde_json::Value = serde_json::from_str(&text).expect("meta.json parses");
    let envs = meta["envs"].as_object().expect("meta.json has `envs`");
    assert!(!envs.is_empty(), "{}: no envs", path.display());
    for (id, m) in envs {
        let spec = env_spec(id).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            Some(u64::from(spec.max_episode_steps)),
            m["max_episode_steps"].as_u64(),
            "{id}"
        );
        let obs_space = m["observation_space"].as_str().expect("observation_space");
        for (k, ours) in [&spec.obs_low, &spec.obs_high].into_iter().enumerate() {
            let theirs = bracketed(obs_space, k, id);
            assert_eq!(theirs.len(), ours.len(), "{id}: obs dim");
            for (o, t) in ours.iter().zip(&theirs) {
                let o = f64::from(*o);
                let close = o == *t || (o - t).abs() <= 1e-7 * t.abs().max(1.0);
                assert!(close, "{id}: obs bound {o} vs {t} in `{obs_space}`");
            }
        }
        let act = m["action_space"].as_str().expect("action_space");
        let expected = match act.strip_prefix("Discrete(") {
            Some(n) => ActionSpace::Discrete {
                n: n.trim_end_matches(')').parse().expect("Discrete(n)"),
            },
            None => {
                // `Box(low, high, (1,), float32)` with scalar bounds.
                let parts: Vec<&str> = act.trim_start_matches("Box(").split(", ").collect();
                let bound = |i: usize| vec![parts[i].parse::<f32>().expect("Box bound")];
                assert_eq!(parts.get(2), Some(&"(1,)"), "{id}: `{act}`");
                ActionSpace::Box {
                    low: bound(0),
                    high: bound(1),
                }
            }
        };
        assert_eq!(spec.action_space, expected, "{id}: `{act}`");
        eprintln!("{id}: spec matches {file} ({obs_space}; {act})");
    }
}
