//! `sebulba plot RUN_DIR... --out curves.png`: learning curves from run
//! directories. Runs whose `config.toml` is the same but for `run.seed` are
//! one setting: drawn as one colour, the mean over seeds and the band between
//! the lowest and highest; several settings are overlaid. Labels name what
//! tells the settings apart.

mod curves;
mod draw;

use crate::cli::PlotArgs;
use anyhow::{Context, bail};
use curves::{Band, Curve, aggregate};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Points of an aggregated curve.
const GRID_POINTS: usize = 200;

/// One run directory's curves.
struct Run {
    dir: PathBuf,
    /// The config without its seed: runs with equal keys are seeds of one setting.
    key: BTreeMap<String, String>,
    steps: Curve,
    wall: Curve,
}

/// One setting: its label, seeds, and their aggregated curves.
pub struct Setting {
    pub label: String,
    pub seeds: usize,
    pub steps: Band,
    pub wall: Band,
}

pub fn run(args: &PlotArgs) -> anyhow::Result<()> {
    let runs = args
        .runs
        .iter()
        .map(|d| load(d, &Source::of(args)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let settings = group(runs, &args.label)?;
    let title = args.title.clone().unwrap_or_else(|| {
        let what = match &args.opponent {
            _ if args.train => "training episode return".to_string(),
            Some(o) => format!("win rate against {o}"),
            None => "evaluation return".to_string(),
        };
        let seeds = if settings.iter().any(|s| s.seeds > 1) {
            " (lines: mean over seeds; bands: lowest to highest seed)"
        } else {
            ""
        };
        format!("{what}: {}{seeds}", envs(&settings))
    });
    draw::png(&args.out, &title, &settings)?;
    for s in &settings {
        let last = |b: &Band| b.mean.last().copied().unwrap_or(f64::NAN);
        println!(
            "{}: {} seed(s), final mean {:.2} at {:.0} env steps",
            s.label,
            s.seeds,
            last(&s.steps),
            s.steps.xs.last().copied().unwrap_or(0.0)
        );
    }
    println!("wrote {}", args.out.display());
    Ok(())
}

fn envs(settings: &[Setting]) -> String {
    let mut names: Vec<&str> = settings
        .iter()
        .map(|s| s.label.split(' ').next().unwrap_or(""))
        .collect();
    names.dedup();
    names.join(", ")
}

/// Which figure a curve follows.
enum Source {
    /// `metrics.jsonl`'s `episode_return_mean`.
    Train,
    /// `eval.jsonl`'s `return_mean`.
    Eval,
    /// `eval.jsonl`'s `win_rate` of the match against this opponent (games).
    Opponent(String),
}

impl Source {
    fn of(args: &PlotArgs) -> Self {
        match &args.opponent {
            _ if args.train => Source::Train,
            Some(o) => Source::Opponent(o.clone()),
            None => Source::Eval,
        }
    }

    fn file(&self) -> &'static str {
        match self {
            Source::Train => "metrics.jsonl",
            _ => "eval.jsonl",
        }
    }

    /// The figure of one line, if it has one. A match's opponent is named
    /// `checkpoint-<version>`; `checkpoint` stands for any of them.
    fn value(&self, line: &serde_json::Value) -> Option<f64> {
        match self {
            Source::Train => line["episode_return_mean"].as_f64(),
            Source::Eval => line["return_mean"].as_f64(),
            Source::Opponent(o) => line["matches"].as_array()?.iter().find_map(|m| {
                let name = m["opponent"].as_str()?;
                let hit = name == o || o == "checkpoint" && name.starts_with("checkpoint-");
                hit.then(|| m["win_rate"].as_f64()).flatten()
            }),
        }
    }

    fn missing(&self, path: &Path) -> String {
        match self {
            Source::Train => format!("{}: no `episode_return_mean` to plot", path.display()),
            Source::Eval => format!(
                "{}: no `return_mean` to plot (--train plots the training episodes' returns instead)",
                path.display()
            ),
            Source::Opponent(o) => format!(
                "{}: no match against `{o}` to plot (a game's evaluations name their opponents in `matches`)",
                path.display()
            ),
        }
    }
}

/// A run directory's config (flattened to dotted keys) and its curve.
fn load(dir: &Path, source: &Source) -> anyhow::Result<Run> {
    let config_path = dir.join("config.toml");
    let text = std::fs::read_to_string(&config_path)
        .with_context(|| format!("{}: not a run directory", config_path.display()))?;
    let config: toml::Table = toml::from_str(&text)
        .with_context(|| format!("{}: not a run config", config_path.display()))?;
    let mut key = BTreeMap::new();
    flatten("", &toml::Value::Table(config), &mut key);
    key.remove("run.seed");
    let path = dir.join(source.file());
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    let mut steps = Vec::new();
    let mut wall = Vec::new();
    for v in sebulba_runfiles::files::json_lines(&text) {
        let (Some(x), Some(t), Some(y)) = (
            v["env_steps"].as_f64(),
            v["wall_seconds"].as_f64(),
            source.value(&v),
        ) else {
            continue;
        };
        steps.push((x, y));
        wall.push((t, y));
    }
    if steps.is_empty() {
        bail!("{}", source.missing(&path));
    }
    Ok(Run {
        dir: dir.to_path_buf(),
        key,
        steps: Curve::new(steps),
        wall: Curve::new(wall),
    })
}

fn flatten(prefix: &str, v: &toml::Value, out: &mut BTreeMap<String, String>) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// Runs grouped by setting, in the order their first run was given;
/// `names`, when given, label the settings in that order.
fn group(runs: Vec<Run>, names: &[String]) -> anyhow::Result<Vec<Setting>> {
    let mut groups: Vec<Vec<Run>> = Vec::new();
    for r in runs {
        match groups.iter_mut().find(|g| g[0].key == r.key) {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    if !names.is_empty() && names.len() != groups.len() {
        bail!(
            "{} --label given for {} settings (runs that differ only in their seed are one setting)",
            names.len(),
            groups.len()
        );
    }
    let labels = if names.is_empty() {
        labels(&groups.iter().map(|g| &g[0].key).collect::<Vec<_>>())
    } else {
        names.to_vec()
    };
    let mut out = Vec::new();
    for (g, label) in groups.iter().zip(labels) {
        let steps: Vec<Curve> = g.iter().map(|r| r.steps.clone()).collect();
        let wall: Vec<Curve> = g.iter().map(|r| r.wall.clone()).collect();
        let (Some(steps), Some(wall)) = (
            aggregate(&steps, GRID_POINTS),
            aggregate(&wall, GRID_POINTS),
        ) else {
            let dirs: Vec<String> = g.iter().map(|r| r.dir.display().to_string()).collect();
            bail!(
                "{}: these seeds' curves share no range of env steps or wall time to average over",
                dirs.join(", ")
            );
        };
        out.push(Setting {
            label: format!(
                "{label} ({} seed{})",
                g.len(),
                if g.len() == 1 { "" } else { "s" }
            ),
            seeds: g.len(),
            steps,
            wall,
        });
    }
    Ok(out)
}

/// Each setting's env and the keys that tell the settings apart: the first
/// three, or all of them where three would leave two labels the same.
fn labels(keys: &[&BTreeMap<String, String>]) -> Vec<String> {
    let differing = differing_keys(keys);
    let with = |n: usize| -> Vec<String> {
        keys.iter()
            .map(|key| {
                let env = key.get("env.id").map_or("?", |s| s.trim_matches('"'));
                let mut label = env.to_string();
                for k in differing.iter().filter(|k| *k != "env.id").take(n) {
                    let v = key.get(k).map_or("-", String::as_str);
                    label.push_str(&format!(" {k}={v}"));
                }
                label
            })
            .collect()
    };
    let short = with(3);
    let mut unique = short.clone();
    unique.sort();
    unique.dedup();
    if unique.len() == short.len() {
        short
    } else {
        with(usize::MAX)
    }
}

/// Keys whose values are not the same in every config (a key one lacks counts).
fn differing_keys(keys: &[&BTreeMap<String, String>]) -> Vec<String> {
    let mut all: Vec<&String> = keys.iter().flat_map(|k| k.keys()).collect();
    all.sort();
    all.dedup();
    all.into_iter()
        .filter(|k| keys.iter().any(|m| m.get(*k) != keys[0].get(*k)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &str, pairs: &[(&str, &str)]) -> Run {
        let c = Curve::new(vec![(0.0, 0.0), (10.0, 1.0)]);
        Run {
            dir: dir.into(),
            key: pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            steps: c.clone(),
            wall: c,
        }
    }

    #[test]
    fn seeds_group_and_labels_name_what_differs() {
        let env = ("env.id", "\"CartPole-v1\"");
        let runs = vec![
            run("a1", &[env, ("ppo.lr", "0.001")]),
            run("b1", &[env, ("ppo.lr", "0.0003")]),
            run("a2", &[env, ("ppo.lr", "0.001")]),
        ];
        let s = group(runs, &[]).unwrap();
        let labels: Vec<&str> = s.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "CartPole-v1 ppo.lr=0.001 (2 seeds)",
                "CartPole-v1 ppo.lr=0.0003 (1 seed)"
            ]
        );
        assert_eq!(envs(&s), "CartPole-v1");
    }

    #[test]
    fn labels_grow_past_three_keys_rather_than_repeat_and_names_replace_them() {
        let make = || {
            let env = ("env.id", "\"HalfCheetah-v5\"");
            let one = ["a.k", "b.k", "c.k"].map(|k| (k, "1"));
            let two = ["a.k", "b.k", "c.k"].map(|k| (k, "2"));
            vec![
                run("x", &[env, one[0], one[1], one[2], ("d.k", "1")]),
                run("y", &[env, one[0], one[1], one[2], ("d.k", "2")]),
                run("z", &[env, two[0], two[1], two[2], ("d.k", "2")]),
            ]
        };
        let s = group(make(), &[]).unwrap();
        let labels: Vec<&str> = s.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "HalfCheetah-v5 a.k=1 b.k=1 c.k=1 d.k=1 (1 seed)",
                "HalfCheetah-v5 a.k=1 b.k=1 c.k=1 d.k=2 (1 seed)",
                "HalfCheetah-v5 a.k=2 b.k=2 c.k=2 d.k=2 (1 seed)",
            ]
        );
        let names = ["base", "d2", "all2"].map(String::from);
        let s = group(make(), &names).unwrap();
        assert_eq!(s[2].label, "all2 (1 seed)");
        let err = group(make(), &names[..2]).err().expect("too few names");
        assert!(
            err.to_string().contains("2 --label given for 3 settings"),
            "{err}"
        );
    }

    #[test]
    fn an_opponent_picks_its_match() {
        let line: serde_json::Value = serde_json::from_str(
            r#"{"return_mean": 0.3, "matches": [
                {"opponent": "random", "win_rate": 0.8},
                {"opponent": "greedy", "win_rate": 0.3},
                {"opponent": "checkpoint-400", "win_rate": 0.55}]}"#,
        )
        .unwrap();
        let of = |o: &str| Source::Opponent(o.into()).value(&line);
        assert_eq!(of("random"), Some(0.8));
        assert_eq!(of("greedy"), Some(0.3));
        assert_eq!(of("checkpoint"), Some(0.55));
        assert_eq!(of("checkpoint-400"), Some(0.55));
        assert_eq!(of("nobody"), None);
        assert_eq!(Source::Eval.value(&line), Some(0.3));
        let no_matches: serde_json::Value = serde_json::from_str(r#"{"return_mean": 1}"#).unwrap();
        assert_eq!(Source::Opponent("random".into()).value(&no_matches), None);
    }
}
