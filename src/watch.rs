//! `sebulba watch RUN_DIR`: a run's final (or best) policy plays the run's
//! env as its final evaluation does: the run's `[eval]` protocol
//! (`eval.policy`, greedy by default), the evaluation seed's start states,
//! `eval.final_episodes` episodes within `eval.final_max_steps` steps. So
//! the mean it prints for `final.safetensors` is the run's
//! `final_eval_return_mean`, replayed from the files alone (what other RL
//! tools call `enjoy`). `--out` films the first episode; `--live` draws
//! it in the terminal (`live`).

use crate::cli::WatchArgs;
use anyhow::{Context, bail};
use sebulba_core::config::{Algorithm, RunConfig, eval_seed};
use sebulba_core::devices::DeviceKind;
use sebulba_core::policy::InferencePolicy;
use sebulba_evaluator::video::{Film, Recording};
use sebulba_evaluator::{EpisodeResults, Overrides, acting_for, play_filmed};
use sebulba_runfiles::video::{Format, ffmpeg_available};
use tokio_util::sync::CancellationToken;

mod live;

pub fn run(args: &WatchArgs) -> anyhow::Result<()> {
    let dir = &args.run_dir;
    let config_path = dir.join("config.toml");
    if !config_path.is_file() {
        bail!("{}: not a run directory (no config.toml)", dir.display());
    }
    let cfg = RunConfig::resolve(None, Some(&config_path), &[])
        .with_context(|| format!("{}", config_path.display()))?;
    let (env_id, kwargs) = (cfg.env.id.as_str(), cfg.env.kwargs_json());
    if sebulba_envs::games::GAME_IDS.contains(&env_id) {
        bail!(
            "{env_id} is a turn-based game: its evaluations are matches against rule players \
             (eval.jsonl), not episodes to watch"
        );
    }
    let weights = dir.join(args.weights.file_name());
    let bytes =
        std::fs::read(&weights).with_context(|| format!("reading {}", weights.display()))?;
    let env = sebulba_envs::env_spec_with(env_id, &kwargs)?;
    let mut policy = InferencePolicy::new(&env, &cfg.network, DeviceKind::Cpu)?;
    policy
        .load(0, bytes)
        .with_context(|| format!("{} does not fit the run's network", weights.display()))?;
    let schedule = Overrides::all(&cfg.eval).over(env_id, None);
    let acted = acting_for(&schedule, cfg.run.algorithm == Algorithm::Dqn);
    let mut plan = schedule.plan(true, acted, eval_seed(cfg.run.seed));
    if let Some(n) = args.episodes {
        plan.episodes = usize::try_from(n)?;
    }
    let mut film = args.out.as_deref().map(recording).transpose()?;
    let mut live = args
        .live
        .then(|| live::Live::new(std::io::stdout(), args.fps));
    let watching = match (&mut film, &mut live) {
        (Some(f), _) => Some(f as &mut dyn Film),
        (None, l) => l.as_mut().map(|l| l as &mut dyn Film),
    };
    let stop = CancellationToken::new();
    let results = play_filmed(&policy, env_id, &kwargs, &plan, &stop, watching)?;
    if let Some(l) = &live {
        let (frames, ended) = l.summary();
        match ended {
            Some((ret, len)) => {
                println!("\x1b[0mepisode 1: return {ret:.3}, {len} steps, {frames} frames shown")
            }
            None if frames == 0 => println!("{env_id} cannot draw itself: nothing to show live"),
            None => println!("\x1b[0mepisode 1 cut after {frames} frames"),
        }
    }
    report(args, env_id, &weights.display().to_string(), &results);
    if let Some(f) = film {
        let filmed = f.finish().map_err(anyhow::Error::msg).context("filming")?;
        let v = &filmed.video;
        eprintln!(
            "wrote {}: {} frames of {} x {}",
            v.path.display(),
            v.frames,
            v.width,
            v.height
        );
    }
    Ok(())
}

/// A recording into `path`, refused up front where it cannot be written.
fn recording(path: &std::path::Path) -> anyhow::Result<Recording> {
    if Format::of(path)? == Format::Mp4 && !ffmpeg_available() {
        bail!(
            "{}: an MP4 is encoded by ffmpeg, which is not on the PATH (install it, or write a .gif)",
            path.display()
        );
    }
    Ok(Recording::new(path.to_path_buf(), false))
}

fn report(args: &WatchArgs, env_id: &str, weights: &str, r: &EpisodeResults) {
    if args.json {
        let line = serde_json::json!({
            "env_id": env_id,
            "weights": weights,
            "returns": r.returns,
            "lengths": r.lengths,
            "cut_returns": r.cut_returns,
            "return_mean": r.mean(),
            "return_std": r.std(),
            "episodes": r.returns.len(),
        });
        println!("{line}");
        return;
    }
    println!("{weights} on {env_id}:");
    for (i, (ret, len)) in r.returns.iter().zip(&r.lengths).enumerate() {
        println!("  episode {:>4}: return {ret:>10.3}, {len} steps", i + 1);
    }
    for (ret, len) in r.cut_returns.iter().zip(&r.cut_lengths) {
        println!("  cut at the step budget: return {ret:.3} after {len} steps");
    }
    println!(
        "mean return {:.3} (std {:.3}) over {} finished episodes",
        r.mean(),
        r.std(),
        r.returns.len()
    );
}
