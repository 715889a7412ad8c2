//! Evaluation by the run's protocol, through `sebulba local` and the
//! evaluator role, on `Stall-v0` (episodes that never end by themselves;
//! action 1 pays 1, so a return counts an episode's 1s): a policy that never
//! ends an episode still gets a final evaluation, its episodes reported as
//! cut; sampled and ε-greedy evaluations act with the statistics their
//! definitions give for the final weights (read from `final.safetensors`);
//! SIGTERM and SIGINT during a final evaluation of capped episodes end the
//! run, and the evaluator alone, within 5 s, with what it played written.

mod common;
use common::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// The final evaluation's episodes, budget and cut in every run here.
const FINAL_EPISODES: u64 = 16;
const FINAL_STEPS: u64 = 160_000;

/// A short run on Stall-v0 whose weights barely move from their start (so a
/// sampled policy is far from deterministic), with `extra` flags.
fn stall_run(name: &str, extra: &[&str]) -> std::path::PathBuf {
    let final_episodes = format!("eval.final_episodes={FINAL_EPISODES}");
    let final_steps = format!("eval.final_max_steps={FINAL_STEPS}");
    let mut args = vec![
        "--env",
        "Stall-v0",
        "--seed",
        "3",
        "--total-steps",
        "4096",
        "--set",
        "ppo.learning_rate=1e-9",
        "--set",
        "network.hidden=[4]",
        "--set",
        "eval.max_steps=1000",
        "--set",
        &final_episodes,
        "--set",
        &final_steps,
    ];
    args.extend_from_slice(extra);
    run_local(name, &args)
}

/// The final weights' logits at Stall's observation `[1.0]`: the actor's
/// one tanh layer (`x @ W + b`, W stored `[in, out]`), then the policy head.
fn final_logits(run: &Path) -> [f64; 2] {
    let bytes = std::fs::read(run.join("final.safetensors")).expect("final.safetensors");
    let file = safetensors::SafeTensors::deserialize(&bytes).expect("parses");
    let tensor = |name: &str| -> Vec<f64> {
        let t = file.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        t.data()
            .chunks_exact(4)
            .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .collect()
    };
    let (w1, b1) = (
        tensor("actor.layers.0.weight"),
        tensor("actor.layers.0.bias"),
    );
    let (wp, bp) = (tensor("policy_head.weight"), tensor("policy_head.bias"));
    assert_eq!((w1.len(), b1.len(), wp.len(), bp.len()), (4, 4, 8, 2));
    let h: Vec<f64> = (0..4).map(|j| (w1[j] + b1[j]).tanh()).collect();
    let logit = |a: usize| bp[a] + (0..4).map(|j| h[j] * wp[j * 2 + a]).sum::<f64>();
    [logit(0), logit(1)]
}

/// The final evaluation's line, and its share of 1s over every step played
/// (all its episodes are cut: Stall's never end within the budget).
fn final_line_and_share(run: &Path) -> (serde_json::Value, f64) {
    let line = read_jsonl(&run.join("eval.jsonl"))
        .into_iter()
        .find(|l| l["final"] == true)
        .expect("a final evaluation");
    let ones = line["cut_return_mean"].as_f64().expect("cut_return_mean");
    let steps = line["cut_length_mean"].as_f64().expect("cut_length_mean");
    (line, ones / steps)
}

fn assert_binomial(q: f64, expected: f64, what: &str) {
    let sd = (expected * (1.0 - expected) / FINAL_STEPS as f64).sqrt();
    assert!(
        (q - expected).abs() <= 5.0 * sd + 1e-9,
        "{what}: share of action 1 {q}, expected {expected} +- {}",
        5.0 * sd
    );
}

#[test]
fn a_policy_that_never_ends_an_episode_gets_a_final_evaluation_of_cut_episodes() {
    let run = stall_run("eval-stall-greedy", &[]);
    let summary = read_json(&run.join("summary.json"));
    eprintln!("summary: {summary:#}");
    // The figure is there, and says what it is over.
    assert!(summary["final_eval_return_mean"].is_number(), "{summary}");
    assert_eq!(summary["final_eval_episodes"], 0);
    assert_eq!(summary["final_eval_episodes_asked"], FINAL_EPISODES);
    assert_eq!(summary["final_eval_cut_by"], "max_steps");
    // No training episode finished either (27,000 steps each), and none is
    // made up.
    assert_eq!(summary["train_episodes"], 0);
    assert!(summary["train_return_mean"].is_null());
    // Evaluation's cost is counted, within the run's.
    let cpu = &summary["eval_cpu"];
    let (eval, all) = (cpu["eval_seconds"].as_f64(), cpu["run_seconds"].as_f64());
    assert!(
        eval.is_some_and(|e| e > 0.0) && all.is_some_and(|r| r >= eval.unwrap_or(0.0)),
        "{cpu}"
    );
    assert!(
        cpu["share"].as_f64().is_some_and(|s| s > 0.0 && s <= 1.0),
        "{cpu}"
    );
    let (line, share) = final_line_and_share(&run);
    assert_eq!(line["policy"], "greedy");
    assert_eq!(
        (line["episodes"].as_u64(), line["episodes_cut"].as_u64()),
        (Some(0), Some(FINAL_EPISODES))
    );
    // The budget, spread evenly over the 16 episodes.
    assert_eq!(
        line["cut_length_mean"].as_f64(),
        Some((FINAL_STEPS / FINAL_EPISODES) as f64)
    );
    let [l0, l1] = final_logits(&run);
    assert_eq!(
        share,
        if l1 > l0 { 1.0 } else { 0.0 },
        "greedy acts on the larger logit"
    );
    // Periodic evaluations were cut at their own budget.
    let periodic: Vec<_> = read_jsonl(&run.join("eval.jsonl"))
        .into_iter()
        .filter(|l| l["final"] == false)
        .collect();
    assert!(!periodic.is_empty());
    for l in &periodic {
        assert_eq!(l["cut_by"], "max_steps", "{l}");
        assert!(
            l["cut_length_mean"]
                .as_f64()
                .is_some_and(|m| m * 10.0 <= 1000.0),
            "{l}"
        );
    }
}

#[test]
fn sampled_and_epsilon_greedy_evaluations_act_with_their_documented_statistics() {
    // Sampled: action 1 with the policy's probability, softmax(logits)[1].
    let run = stall_run("eval-stall-sample", &["--set", "eval.policy=sample"]);
    let [l0, l1] = final_logits(&run);
    let p1 = 1.0 / (1.0 + (l0 - l1).exp());
    let (line, share) = final_line_and_share(&run);
    assert_eq!(line["policy"], "sample");
    assert!(
        (0.05..0.95).contains(&p1),
        "the weights barely moved: p1 {p1}"
    );
    assert_binomial(share, p1, "sample");
    // ε-greedy at 0.3: the greedy action with probability 0.7 + 0.3/2.
    let run = stall_run(
        "eval-stall-epsilon",
        &["--set", "eval.policy=epsilon", "--set", "eval.epsilon=0.3"],
    );
    let [l0, l1] = final_logits(&run);
    let (line, share) = final_line_and_share(&run);
    assert_eq!(
        (line["policy"].as_str(), line["epsilon"].as_f64()),
        (Some("epsilon"), Some(0.3))
    );
    let expected = if l1 > l0 { 0.85 } else { 0.15 };
    assert_binomial(share, expected, "epsilon 0.3");
}

/// Sends `signal` (`TERM`, `INT`) to `p` and returns how long it took to
/// exit (failing past `limit`).
fn signal_exit(p: &mut Proc, signal: &str, limit: Duration) -> Duration {
    let t0 = Instant::now();
    let status = p.signal(signal, limit).unwrap_or_else(|| {
        panic!(
            "{} still running {limit:?} after SIG{signal}:\n{}",
            p.name,
            p.log_text()
        )
    });
    assert!(status.success(), "{}: {status}\n{}", p.name, p.log_text());
    t0.elapsed()
}

/// Waits until `p` has logged the start of a final evaluation.
fn wait_for_final_evaluation(p: &Proc) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !p.log_text().contains("evaluation=final") {
        assert!(
            Instant::now() < deadline,
            "no final evaluation started:\n{}",
            p.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Well into it: a second of stepping.
    std::thread::sleep(Duration::from_secs(1));
}

/// Flags for a final evaluation that would play for minutes on any
/// machine: 10,000 episodes (the most `eval.final_episodes` takes) capped
/// at 27,000 steps, 2.7 x 10^8 steps in a budget of 10^9. Its 100 default
/// episodes, 2.7 x 10^6 steps, took a Zen 5 core 1.07 s: over before the
/// signal came.
const ENDLESS: [&str; 6] = [
    "--set",
    "eval.final_max_steps=1000000000",
    "--set",
    "eval.final_episodes=10000",
    "--set",
    "learner.final_eval_timeout_secs=3600",
];

#[test]
fn sigterm_and_sigint_during_a_final_evaluation_end_a_local_run_within_5_s_with_its_summary() {
    for signal in ["TERM", "INT"] {
        let dir = run_dir(&format!("eval-stop-local-{signal}"));
        let run = dir.join("run");
        let mut c = bin();
        c.args(["local", "--env", "Stall-v0", "--total-steps", "4096"])
            .args(ENDLESS)
            .arg("--run-dir")
            .arg(&run);
        let mut p = Proc::spawn("local", c, &dir);
        wait_for_final_evaluation(&p);
        let took = signal_exit(&mut p, signal, Duration::from_secs(5));
        eprintln!("SIG{signal}: exited in {took:?}");
        let summary = read_json(&run.join("summary.json"));
        assert_eq!(
            summary["final_eval_cut_by"], "shutdown",
            "SIG{signal}: {summary}"
        );
        assert_eq!(summary["final_eval_episodes"], 0, "{summary}");
        assert!(summary["final_eval_return_mean"].is_number(), "{summary}");
        let last = read_jsonl(&run.join("eval.jsonl")).pop().expect("a line");
        assert_eq!(
            (last["final"].as_bool(), last["cut_by"].as_str()),
            (Some(true), Some("shutdown"))
        );
        assert!(
            last["cut_length_mean"].as_f64().is_some_and(|l| l > 0.0),
            "{last}"
        );
    }
}

#[test]
fn sigterm_and_sigint_during_a_final_evaluation_end_the_evaluator_role_within_5_s() {
    for signal in ["TERM", "INT"] {
        let dir = run_dir(&format!("eval-stop-role-{signal}"));
        let run = dir.join("run");
        let (mut ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", |_| {});
        let ps_url = format!("http://127.0.0.1:{ps_port}");
        let (mut learner, l_port) = learner(
            &dir,
            "learner",
            "127.0.0.1:0",
            &ps_url,
            &run,
            &[
                "--env",
                "Stall-v0",
                "--total-steps",
                "2048",
                "--set",
                "learner.final_eval_timeout_secs=0",
            ],
            |_| {},
        );
        let learner_url = format!("http://127.0.0.1:{l_port}");
        let mut act = actor(&dir, "actor-0", &learner_url, &ps_url, |_| {});
        let mut ev = evaluator(&dir, &ps_url, &run, |c| {
            c.args([
                "--final-max-steps",
                "1000000000",
                "--final-episodes",
                "10000",
            ]);
        });
        exits_ok(&mut learner, Duration::from_secs(120));
        wait_for_final_evaluation(&ev);
        let took = signal_exit(&mut ev, signal, Duration::from_secs(5));
        eprintln!("evaluator, SIG{signal}: exited in {took:?}");
        let last = read_jsonl(&run.join("eval.jsonl")).pop().expect("a line");
        assert_eq!(
            (last["final"].as_bool(), last["cut_by"].as_str()),
            (Some(true), Some("shutdown")),
            "{last}"
        );
        assert_eq!(last["episodes_asked"], 10_000, "--final-episodes: {last}");
        let _ = act.terminate(Duration::from_secs(10));
        let _ = ps.terminate(Duration::from_secs(10));
    }
}
