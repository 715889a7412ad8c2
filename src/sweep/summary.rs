//! One row per setting from its seeds' `bench local` results: the final
//! return's median, lowest and highest, the steps to the target, wall time
//! and speed.

use serde::Serialize;

/// What one finished run reported (`sebulba bench local --json`).
#[derive(Debug, Clone)]
pub struct RunResult {
    pub seed: u64,
    pub final_return: Option<f64>,
    pub steps_to_target: Option<u64>,
    pub wall_seconds: f64,
    pub env_steps_per_second: f64,
}

impl RunResult {
    pub fn from_json(seed: u64, v: &serde_json::Value) -> anyhow::Result<Self> {
        let number = |key: &str| {
            v[key]
                .as_f64()
                .ok_or_else(|| anyhow::anyhow!("`{key}` missing or not a number"))
        };
        Ok(RunResult {
            seed,
            final_return: v["final_eval_return_mean"].as_f64(),
            steps_to_target: v["steps_to_target"].as_u64(),
            wall_seconds: number("wall_seconds")?,
            env_steps_per_second: number("env_steps_per_second")?,
        })
    }
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Row {
    pub setting: String,
    /// Seeds finished (of the sweep's seeds).
    pub seeds: usize,
    pub final_median: Option<f64>,
    pub final_min: Option<f64>,
    pub final_max: Option<f64>,
    /// Per seed, in seed order (`None`: no final evaluation).
    pub finals: Vec<(u64, Option<f64>)>,
    /// Median over the seeds that reached the target.
    pub steps_to_target_median: Option<f64>,
    pub reached_target: usize,
    pub wall_seconds_median: Option<f64>,
    pub env_steps_per_second_median: Option<f64>,
}

/// The median of the values (mean of the middle two for an even count).
pub fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 {
        xs[n / 2]
    } else {
        0.5 * (xs[n / 2 - 1] + xs[n / 2])
    })
}

impl Row {
    pub fn of(setting: &str, runs: &[RunResult]) -> Self {
        let finals: Vec<f64> = runs.iter().filter_map(|r| r.final_return).collect();
        let fold = |f: fn(f64, f64) -> f64| finals.iter().copied().reduce(f);
        let reached: Vec<f64> = runs
            .iter()
            .filter_map(|r| r.steps_to_target.map(|s| s as f64))
            .collect();
        Row {
            setting: setting.to_string(),
            seeds: runs.len(),
            final_median: median(finals.clone()),
            final_min: fold(f64::min),
            final_max: fold(f64::max),
            finals: runs.iter().map(|r| (r.seed, r.final_return)).collect(),
            reached_target: reached.len(),
            steps_to_target_median: median(reached),
            wall_seconds_median: median(runs.iter().map(|r| r.wall_seconds).collect()),
            env_steps_per_second_median: median(
                runs.iter().map(|r| r.env_steps_per_second).collect(),
            ),
        }
    }
}

/// The rows as a Markdown table (the form `docs/experiments.md` keeps).
pub fn markdown(rows: &[Row], seeds: usize, target: Option<f64>) -> String {
    let num = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.1}"));
    let target_head = target.map_or("steps to target".into(), |t| format!("steps to {t}"));
    let mut out = format!(
        "| setting | seeds | final median | min | max | per seed | {target_head} (reached) | wall s | env steps/s |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    );
    for r in rows {
        let per_seed: Vec<String> = r
            .finals
            .iter()
            .map(|(s, f)| format!("{s}: {}", num(*f)))
            .collect();
        out += &format!(
            "| {} | {}/{seeds} | {} | {} | {} | {} | {} ({}) | {} | {} |\n",
            r.setting,
            r.seeds,
            num(r.final_median),
            num(r.final_min),
            num(r.final_max),
            per_seed.join(", "),
            r.steps_to_target_median
                .map_or("-".into(), |s| format!("{s:.0}")),
            r.reached_target,
            r.wall_seconds_median
                .map_or("-".into(), |s| format!("{s:.0}")),
            r.env_steps_per_second_median
                .map_or("-".into(), |s| format!("{s:.0}")),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seed: u64, final_return: Option<f64>, steps: Option<u64>) -> RunResult {
        RunResult {
            seed,
            final_return,
            steps_to_target: steps,
            wall_seconds: 10.0 * seed as f64,
            env_steps_per_second: 1000.0 * seed as f64,
        }
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0]), Some(3.0));
        assert_eq!(median(vec![5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 10.0]), Some(3.5));
    }

    #[test]
    fn a_row_summarises_its_seeds() {
        let runs = [
            run(1, Some(3598.0), Some(400_000)),
            run(2, Some(1474.0), None),
            run(3, Some(1621.0), Some(800_000)),
        ];
        let r = Row::of("cleanrl", &runs);
        assert_eq!(r.seeds, 3);
        assert_eq!(r.final_median, Some(1621.0));
        assert_eq!((r.final_min, r.final_max), (Some(1474.0), Some(3598.0)));
        assert_eq!(r.reached_target, 2);
        assert_eq!(r.steps_to_target_median, Some(600_000.0));
        assert_eq!(r.wall_seconds_median, Some(20.0));
        assert_eq!(r.env_steps_per_second_median, Some(2000.0));
        let table = markdown(&[r], 3, Some(3000.0));
        assert!(table.contains("steps to 3000 (reached)"), "{table}");
        assert!(
            table.contains("| cleanrl | 3/3 | 1621.0 | 1474.0 | 3598.0 | 1: 3598.0, 2: 1474.0, 3: 1621.0 | 600000 (2) | 20 | 2000 |"),
            "{table}"
        );
    }

    #[test]
    fn a_seed_without_a_final_evaluation_is_shown_and_left_out_of_the_figures() {
        let r = Row::of("s", &[run(1, None, None), run(2, Some(-5.0), None)]);
        assert_eq!(r.final_median, Some(-5.0));
        assert_eq!(r.finals, vec![(1, None), (2, Some(-5.0))]);
        assert!(markdown(&[r], 2, None).contains("1: -, 2: -5.0"));
    }

    #[test]
    fn a_result_without_its_figures_is_an_error() {
        let v = serde_json::json!({"final_eval_return_mean": 1.0});
        let err = RunResult::from_json(1, &v).expect_err("no wall time");
        assert!(err.to_string().contains("`wall_seconds`"), "{err}");
    }
}
