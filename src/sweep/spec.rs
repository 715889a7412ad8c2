//! A sweep's TOML file: what every run shares (env, run file, overrides,
//! seeds, target) and the settings that tell runs apart.

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// `sebulba sweep SPEC.toml`: every `[[setting]]` runs once per seed.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Environment id, as `--env`.
    pub env: String,
    /// Run file every setting starts from, as `--config` (a path as on the
    /// command line).
    #[serde(default)]
    pub config: Option<PathBuf>,
    /// Seeds each setting runs with.
    pub seeds: Vec<u64>,
    /// Report the env steps at the first evaluation reaching this return.
    #[serde(default)]
    pub target: Option<f64>,
    /// Overrides every setting shares, as `--set` (applied before the setting's).
    #[serde(default)]
    pub set: Vec<String>,
    #[serde(rename = "setting")]
    pub settings: Vec<Setting>,
}

/// One point of the sweep: a name (its directory) and its overrides.
#[derive(Deserialize, Serialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Setting {
    pub name: String,
    #[serde(default)]
    pub set: Vec<String>,
}

/// What a setting's runs were started with: kept beside them so that a
/// resumed sweep never mixes runs of an edited setting with older ones.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Resolved {
    pub env: String,
    pub config: Option<PathBuf>,
    pub set: Vec<String>,
    /// The whole configuration these give (before the seed): a changed
    /// preset or run file changes it too.
    #[serde(default)]
    pub run_config: String,
}

impl Spec {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the sweep file {}", path.display()))?;
        let spec: Spec = toml::from_str(&text)
            .with_context(|| format!("parsing the sweep file {}", path.display()))?;
        spec.check()
            .with_context(|| format!("the sweep file {}", path.display()))?;
        Ok(spec)
    }

    fn check(&self) -> anyhow::Result<()> {
        if self.seeds.is_empty() {
            bail!("`seeds` is empty: name at least one seed");
        }
        let mut seen = BTreeSet::new();
        if let Some(s) = self.seeds.iter().find(|s| !seen.insert(**s)) {
            bail!("`seeds` lists {s} twice");
        }
        if self.settings.is_empty() {
            bail!("no `[[setting]]`: a sweep needs at least one");
        }
        if let Some(t) = self.target.filter(|t| !t.is_finite()) {
            bail!("`target` must be a finite number, got {t}");
        }
        let mut names = BTreeSet::new();
        for s in &self.settings {
            let ok = !s.name.is_empty()
                && s.name.len() <= 64
                && s.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                && !s.name.starts_with('.');
            if !ok {
                bail!(
                    "`setting.name` `{}`: letters, digits, `.`, `_`, `-` only, at most 64, not starting with `.` (it names a directory)",
                    s.name
                );
            }
            if !names.insert(&s.name) {
                bail!("`setting.name` `{}` appears twice", s.name);
            }
        }
        Ok(())
    }

    /// The overrides of one setting: the shared ones, then its own.
    pub fn resolved(&self, setting: &Setting) -> Resolved {
        Resolved {
            env: self.env.clone(),
            config: self.config.clone(),
            set: self.set.iter().chain(&setting.set).cloned().collect(),
            run_config: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Spec> {
        let spec: Spec = toml::from_str(text)?;
        spec.check()?;
        Ok(spec)
    }

    const OK: &str = r#"
        env = "CartPole-v1"
        seeds = [1, 2]
        set = ["run.total_steps=2000"]
        [[setting]]
        name = "base"
        [[setting]]
        name = "lr-1e-3"
        set = ["ppo.learning_rate=1e-3"]
    "#;

    #[test]
    fn settings_keep_their_order_and_add_their_overrides_after_the_shared_ones() {
        let spec = parse(OK).expect("valid");
        let names: Vec<_> = spec.settings.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["base", "lr-1e-3"]);
        let r = spec.resolved(&spec.settings[1]);
        assert_eq!(r.set, ["run.total_steps=2000", "ppo.learning_rate=1e-3"]);
        assert_eq!(
            spec.resolved(&spec.settings[0]).set,
            ["run.total_steps=2000"]
        );
    }

    #[test]
    fn a_bad_sweep_file_is_refused_naming_what_is_wrong() {
        let cases = [
            (OK.replace("[1, 2]", "[]"), "`seeds` is empty"),
            (OK.replace("[1, 2]", "[3, 3]"), "lists 3 twice"),
            (OK.replace("lr-1e-3", "base"), "`base` appears twice"),
            (OK.replace("lr-1e-3", "../up"), "`setting.name` `../up`"),
            (OK.replace("lr-1e-3", ".hidden"), "`setting.name` `.hidden`"),
            (OK.replace("lr-1e-3", ""), "`setting.name` ``"),
            (
                format!("target = nan\n{OK}"),
                "`target` must be a finite number",
            ),
            (format!("envs = 3\n{OK}"), "unknown field `envs`"),
            (
                r#"env = "CartPole-v1"
                   seeds = [1]
                   setting = []"#
                    .to_string(),
                "no `[[setting]]`",
            ),
        ];
        for (text, want) in cases {
            let err = format!("{:#}", parse(&text).expect_err(want));
            assert!(err.contains(want), "{want:?} not in {err:?}");
        }
    }
}
