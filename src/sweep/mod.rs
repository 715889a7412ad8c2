//! `sebulba sweep SPEC.toml`: settings x seeds, each a `sebulba bench local`
//! child process, `--jobs` at once. Resumable: a run whose result file
//! exists is not run again. Ends with one table (`summary.md`, `summary.json`)
//! and one plot (`curves.png`) over every finished run.
//!
//! Layout under `--out`: `<setting>/seed-<n>/` (the run directory),
//! `<setting>/seed-<n>.json` (its result), `<setting>/seed-<n>.log` (its
//! output) and `<setting>/setting.json` (what the setting's runs used).

mod spec;
mod summary;

use crate::cli::{PlotArgs, SweepArgs};
use anyhow::{Context, bail};
use spec::{Resolved, Spec};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use summary::{Row, RunResult};
use tokio_util::sync::CancellationToken;

/// One run of the sweep.
struct Job {
    setting: String,
    seed: u64,
    resolved: Resolved,
    dir: PathBuf,
    result: PathBuf,
    log: PathBuf,
}

/// Stops starting runs once `shutdown` is cancelled (Ctrl-C reaches the
/// children itself).
pub fn run(args: &SweepArgs, shutdown: &CancellationToken) -> anyhow::Result<()> {
    let spec = Spec::load(&args.spec)?;
    let out = args.out.clone().unwrap_or_else(|| default_out(&args.spec));
    let jobs = plan(&spec, &out)?;
    let todo: Vec<&Job> = jobs.iter().filter(|j| !j.result.exists()).collect();
    println!(
        "sweep {}: {} settings x {} seeds, {} to run ({} done earlier), {} at once, in {}",
        args.spec.display(),
        spec.settings.len(),
        spec.seeds.len(),
        todo.len(),
        jobs.len() - todo.len(),
        args.jobs,
        out.display()
    );
    let parallel = usize::try_from(args.jobs).unwrap_or(1);
    let failures = run_all(&todo, parallel, spec.target, shutdown)?;
    let rows = summarise(&spec, &jobs, &out)?;
    plot(&jobs, &out)?;
    for r in &rows {
        if r.seeds < spec.seeds.len() {
            eprintln!(
                "{}: {} of {} seeds finished",
                r.setting,
                r.seeds,
                spec.seeds.len()
            );
        }
    }
    if shutdown.is_cancelled() {
        bail!("interrupted: run the same command again to go on where it stopped");
    }
    if !failures.is_empty() {
        bail!("{} run(s) failed: {}", failures.len(), failures.join("; "));
    }
    Ok(())
}

/// `runs/sweep-<the spec file's stem>`.
fn default_out(spec: &Path) -> PathBuf {
    let stem = spec
        .file_stem()
        .map_or("sweep".into(), |s| s.to_string_lossy());
    PathBuf::from("runs").join(format!("sweep-{stem}"))
}

/// Every setting's configuration checked before anything runs (a typo in an
/// override fails now, naming the setting, not an hour in), and each
/// setting's directory tied to what it runs.
fn plan(spec: &Spec, out: &Path) -> anyhow::Result<Vec<Job>> {
    let mut settings: Vec<(&str, Resolved)> = Vec::new();
    for setting in &spec.settings {
        let mut r = spec.resolved(setting);
        r.run_config =
            sebulba_core::config::RunConfig::resolve(Some(&r.env), r.config.as_deref(), &r.set)
                .with_context(|| format!("setting `{}`", setting.name))?
                .to_toml();
        if let Some((twin, _)) = settings.iter().find(|(_, o)| o.run_config == r.run_config) {
            bail!(
                "settings `{twin}` and `{}` resolve to the same configuration",
                setting.name
            );
        }
        settings.push((&setting.name, r));
    }
    let mut jobs = Vec::new();
    for (name, resolved) in settings {
        let dir = out.join(name);
        claim(&dir, name, &resolved)?;
        for &seed in &spec.seeds {
            jobs.push(Job {
                setting: name.to_string(),
                seed,
                resolved: resolved.clone(),
                dir: dir.join(format!("seed-{seed}")),
                result: dir.join(format!("seed-{seed}.json")),
                log: dir.join(format!("seed-{seed}.log")),
            });
        }
    }
    Ok(jobs)
}

/// Writes `setting.json`, or checks that the one there says the same: a
/// setting edited since its earlier runs would mix two settings' seeds.
fn claim(dir: &Path, name: &str, resolved: &Resolved) -> anyhow::Result<()> {
    let file = dir.join("setting.json");
    if file.exists() {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let earlier: Resolved =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
        if &earlier != resolved {
            bail!(
                "setting `{name}` differs from the one its runs in {} used (its overrides, run file or preset changed; see setting.json there); rename the setting, use another --out, or remove that directory",
                dir.display()
            );
        }
        return Ok(());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(&file, serde_json::to_string_pretty(resolved)?)
        .with_context(|| format!("writing {}", file.display()))
}

/// Runs the jobs, `parallel` at a time; returns the ones that failed.
fn run_all(
    todo: &[&Job],
    parallel: usize,
    target: Option<f64>,
    shutdown: &CancellationToken,
) -> anyhow::Result<Vec<String>> {
    let exe = std::env::current_exe().context("finding the sebulba binary")?;
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..parallel.clamp(1, todo.len().max(1)) {
            scope.spawn(|| {
                while let Some(job) = todo.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if shutdown.is_cancelled() {
                        return;
                    }
                    if let Err(e) = one(&exe, job, target) {
                        let what = format!("{} seed {}: {e:#}", job.setting, job.seed);
                        eprintln!("{what}");
                        failures
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(what);
                    }
                }
            });
        }
    });
    Ok(failures.into_inner().unwrap_or_else(|p| p.into_inner()))
}

/// One `sebulba bench local` from a fresh run directory; its output goes to
/// the job's log, and its result file appears only when it succeeded.
fn one(exe: &Path, job: &Job, target: Option<f64>) -> anyhow::Result<()> {
    if job.dir.exists() {
        std::fs::remove_dir_all(&job.dir)
            .with_context(|| format!("clearing the unfinished {}", job.dir.display()))?;
    }
    let partial = job.result.with_extension("json.partial");
    let log = std::fs::File::create(&job.log)
        .with_context(|| format!("creating {}", job.log.display()))?;
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "local", "--env-seconds", "0", "--env"])
        .arg(&job.resolved.env)
        .arg("--seed")
        .arg(job.seed.to_string())
        .arg("--run-dir")
        .arg(&job.dir)
        .arg("--json")
        .arg(&partial);
    if let Some(c) = &job.resolved.config {
        cmd.arg("--config").arg(c);
    }
    if let Some(t) = target {
        cmd.arg(format!("--target-return={t}"));
    }
    for s in &job.resolved.set {
        cmd.arg("--set").arg(s);
    }
    let started = std::time::Instant::now();
    println!("{} seed {}: started", job.setting, job.seed);
    let status = cmd
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()
        .context("starting sebulba bench local")?;
    if !status.success() {
        bail!("{status}; its output is in {}", job.log.display());
    }
    std::fs::rename(&partial, &job.result)
        .with_context(|| format!("keeping {}", job.result.display()))?;
    let r = read_result(job)?;
    println!(
        "{} seed {}: final {} in {:.0} s",
        job.setting,
        job.seed,
        r.final_return.map_or("-".into(), |f| format!("{f:.1}")),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn read_result(job: &Job) -> anyhow::Result<RunResult> {
    let text = std::fs::read_to_string(&job.result)
        .with_context(|| format!("reading {}", job.result.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", job.result.display()))?;
    RunResult::from_json(job.seed, &v).with_context(|| format!("in {}", job.result.display()))
}

/// The table over every finished run, printed and written.
fn summarise(spec: &Spec, jobs: &[Job], out: &Path) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for setting in &spec.settings {
        let runs = jobs
            .iter()
            .filter(|j| j.setting == setting.name && j.result.exists())
            .map(read_result)
            .collect::<anyhow::Result<Vec<_>>>()?;
        rows.push(Row::of(&setting.name, &runs));
    }
    let table = summary::markdown(&rows, spec.seeds.len(), spec.target);
    print!("{table}");
    std::fs::write(out.join("summary.md"), &table)?;
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(&rows)?,
    )?;
    println!("wrote {}", out.join("summary.md").display());
    Ok(rows)
}

/// `sebulba plot` over the finished runs: each setting one curve and band.
/// Labelled by the settings' names: the keys that tell them apart can be many.
fn plot(jobs: &[Job], out: &Path) -> anyhow::Result<()> {
    let done: Vec<&Job> = jobs.iter().filter(|j| j.result.exists()).collect();
    if done.is_empty() {
        return Ok(());
    }
    let runs = done.iter().map(|j| j.dir.clone()).collect();
    let mut label: Vec<String> = done.iter().map(|j| j.setting.clone()).collect();
    label.dedup();
    crate::plot::run(&PlotArgs {
        runs,
        out: out.join("curves.png"),
        train: false,
        opponent: None,
        title: None,
        label,
    })
}
