//! Videos of the agent through the paths a user takes: a short CartPole and
//! MinAtar run film their evaluations into `videos/` (MP4 through ffmpeg
//! where it is installed, as in CI; GIF otherwise), each file's frame count
//! and size confirmed by a reader that is not ours (ffprobe; the `gif`
//! crate's decoder for a GIF) against `videos/videos.jsonl` and the episode
//! it filmed; TensorBoard's own loader finds the same episodes as animated
//! GIFs; `sebulba watch --out` films the first episode it replays.

mod common;
use common::*;

use std::path::Path;
use std::process::Command;

/// Whether MP4s are expected: ffmpeg installed, or required (CI).
fn ffmpeg_expected() -> bool {
    let runs = Command::new("ffprobe")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        runs || std::env::var_os("SEBULBA_REQUIRE_FFMPEG").is_none(),
        "SEBULBA_REQUIRE_FFMPEG is set but ffmpeg/ffprobe do not run"
    );
    if !runs {
        eprintln!("NOTE: no ffmpeg here: the runs write GIFs, and the MP4 path is not exercised");
    }
    runs
}

/// What a reader prints as JSON, once it succeeded.
fn json_of(cmd: &mut Command) -> serde_json::Value {
    let out = cmd.output().expect("running the reader");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?}: {err}");
    serde_json::from_slice(&out.stdout).expect("the reader's JSON")
}

/// (frames, width, height) of a video file, read by ffprobe (MP4) or the
/// `gif` crate's decoder.
fn probe(path: &Path) -> (u64, u64, u64) {
    if path.extension().is_some_and(|e| e == "gif") {
        let file = std::fs::File::open(path).expect("the GIF");
        let mut d = gif::DecodeOptions::new().read_info(file).expect("a GIF");
        let (w, h) = (u64::from(d.width()), u64::from(d.height()));
        let mut frames = 0;
        while d.next_frame_info().expect("a frame").is_some() {
            frames += 1;
        }
        return (frames, w, h);
    }
    let v = json_of(
        Command::new("ffprobe")
            .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
            .args([
                "-show_entries",
                "stream=nb_read_frames,width,height,codec_name",
            ])
            .args(["-of", "json"])
            .arg(path),
    );
    let s = &v["streams"][0];
    assert_eq!(s["codec_name"], "h264", "{v}");
    let n = s["nb_read_frames"]
        .as_str()
        .and_then(|n| n.parse().ok())
        .expect("frames");
    (
        n,
        s["width"].as_u64().unwrap(),
        s["height"].as_u64().unwrap(),
    )
}

/// Every video of a run is on disk as its index line says, one per
/// evaluation (`eval.video_every = 1`), its frames the filmed episode's
/// steps; returns the index.
fn assert_filmed(run: &Path, size: (u64, u64), mp4: bool) -> Vec<serde_json::Value> {
    let evals = read_jsonl(&run.join("eval.jsonl"));
    let index = read_jsonl(&run.join("videos/videos.jsonl"));
    assert_eq!(index.len(), evals.len(), "one video per evaluation");
    for (video, eval) in index.iter().zip(&evals) {
        assert_eq!(video["version"], eval["version"]);
        let file = run
            .join("videos")
            .join(video["file"].as_str().expect("file"));
        assert_eq!(
            file.extension().and_then(|e| e.to_str()),
            Some(if mp4 { "mp4" } else { "gif" })
        );
        let (frames, w, h) = probe(&file);
        // An MP4 is padded to even sides.
        let even = |v: u64| if mp4 { v + v % 2 } else { v };
        assert_eq!((w, h), (even(size.0), even(size.1)), "{}", file.display());
        assert_eq!(Some(frames), video["frames"].as_u64(), "{}", file.display());
        assert_eq!(
            (video["width"].as_u64(), video["height"].as_u64()),
            (Some(size.0), Some(size.1))
        );
        if let Some(length) = video["episode_length"].as_u64() {
            assert_eq!(frames, length, "a frame per step of the filmed episode");
        }
    }
    let last = index.last().expect("videos");
    assert!(
        last["file"]
            .as_str()
            .is_some_and(|f| f.starts_with("final-")),
        "{last}"
    );
    index
}

/// TensorBoard's view: the videos as `eval/video` images, at the same steps
/// and sizes, each a GIF of the episode's frames.
fn assert_in_tensorboard(run: &Path, index: &[serde_json::Value]) {
    let Some(python) = tools_python_or_skip("tensorboard") else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/tensorboard_images.py");
    let v = json_of(Command::new(python).arg(script).arg(run));
    let images = v["tensorboard/videos"]["eval/video"]
        .as_array()
        .expect("eval/video images");
    assert_eq!(images.len(), index.len(), "{v}");
    for (image, video) in images.iter().zip(index) {
        assert_eq!(image[0], video["env_steps"]);
        assert_eq!((&image[1], &image[2]), (&video["width"], &video["height"]));
        assert_eq!(image[3], video["frames"]);
    }
}

/// `watch --live`: the first episode drawn in the terminal, a picture per
/// step, each a screenful of half blocks in 24-bit colour.
fn assert_drawn_live(run: &Path) {
    let replayed = json_of(bin().args(["watch", "--json", "--episodes", "1"]).arg(run));
    let length = replayed["lengths"][0].as_u64().expect("a finished episode");
    let out = bin()
        .args(["watch", "--episodes", "1", "--live", "--fps", "1000"])
        .arg(run)
        .output()
        .expect("watch --live");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.matches("\x1b[H").count() as u64, length);
    assert!(text.contains("\x1b[48;2;0;0;0m▀"), "black cells drawn");
    let shown = format!("{length} steps, {length} frames shown");
    assert!(text.contains(&shown), "{shown}");
}

#[test]
fn cartpole_and_minatar_runs_film_their_evaluations() {
    let mp4 = ffmpeg_expected();
    let cartpole = run_local(
        "videos-cartpole",
        &[
            "--env",
            "CartPole-v1",
            "--total-steps",
            "3072",
            "--set",
            "eval.video_every=1",
        ],
    );
    let index = assert_filmed(&cartpole, (600, 400), mp4);
    assert_in_tensorboard(&cartpole, &index);
    let summary = read_json(&cartpole.join("summary.json"));
    let evals = read_jsonl(&cartpole.join("eval.jsonl"));
    assert!(summary["final_eval_return_mean"].as_f64().is_some());
    assert!(evals.len() >= 2, "{} evaluations", evals.len());

    let minatar = run_local(
        "videos-minatar",
        &[
            "--env",
            "MinAtar/Breakout-v1",
            "--total-steps",
            "4096",
            "--set",
            "eval.video_every=2",
            "--set",
            "eval.final_episodes=4",
        ],
    );
    // Every second evaluation, and the final one.
    let evals = read_jsonl(&minatar.join("eval.jsonl"));
    let index = read_jsonl(&minatar.join("videos/videos.jsonl"));
    let due = (0..evals.len())
        .filter(|&k| k % 2 == 0 || k + 1 == evals.len())
        .count();
    assert_eq!(index.len(), due, "{} evaluations", evals.len());
    for video in &index {
        let file = minatar
            .join("videos")
            .join(video["file"].as_str().expect("file"));
        let (frames, w, h) = probe(&file);
        assert_eq!((w, h), (160, 160));
        assert_eq!(Some(frames), video["frames"].as_u64());
    }
    assert_in_tensorboard(&minatar, &index);
    assert_drawn_live(&minatar);

    // `watch --out`: the replayed first episode, a frame per step.
    let gif = cartpole.parent().expect("dir").join("agent.gif");
    let watched = json_of(
        bin()
            .args(["watch", "--json", "--episodes", "2", "--out"])
            .arg(&gif)
            .arg(&cartpole),
    );
    let first = watched["lengths"][0].as_u64().expect("a finished episode");
    assert_eq!(probe(&gif), (first, 600, 400));
    if mp4 {
        let mp4 = gif.with_extension("mp4");
        let mut again = bin();
        again
            .args(["watch", "--json", "--episodes", "1", "--out"])
            .arg(&mp4)
            .arg(&cartpole);
        assert_eq!(json_of(&mut again)["lengths"][0].as_u64(), Some(first));
        assert_eq!(probe(&mp4), (first, 600, 400));
    }
}

#[test]
fn videos_are_off_at_zero_and_a_bad_video_path_is_refused() {
    let run = run_local(
        "videos-off",
        &[
            "--env",
            "CartPole-v1",
            "--total-steps",
            "1024",
            "--set",
            "eval.video_every=0",
        ],
    );
    assert!(!run.join("videos").exists() && !run.join("tensorboard/videos").exists());
    let out = bin()
        .args(["watch", "--episodes", "1", "--out"])
        .arg(run.join("agent.avi"))
        .arg(&run)
        .output()
        .expect("watch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(".mp4 or .gif"),
        "{err}"
    );
}

#[test]
fn a_gymnasium_env_is_filmed_through_its_rgb_array_renderer() {
    let Some(venv) = python_venv_with_or_skip("pygame") else {
        return;
    };
    let mp4 = ffmpeg_expected();
    let run = run_dir("videos-gym").join("run");
    let status = bin()
        .env("VIRTUAL_ENV", venv)
        .args(["local", "--env", "gym:CartPole-v1", "--total-steps", "2048"])
        .args(["--set", "eval.video_every=1", "--run-dir"])
        .arg(&run)
        .status()
        .expect("sebulba local");
    assert!(status.success());
    // Gymnasium's own picture of CartPole: 600 x 400.
    let index = assert_filmed(&run, (600, 400), mp4);
    assert!(
        index.iter().all(|v| v["episode_length"].as_u64().is_some()),
        "{index:?}"
    );
}

/// A MuJoCo env on a machine without an OpenGL context (CI's): its render
/// raises once, and is never asked again, since a second attempt can hang
/// the process; the run finishes, its evaluations unfilmed and counted.
/// Where OpenGL works, the same run is filmed instead.
#[test]
fn an_env_that_cannot_draw_itself_leaves_its_evaluations_unfilmed() {
    let Some(venv) = python_venv_with_or_skip("mujoco") else {
        return;
    };
    let dir = run_dir("videos-mujoco");
    let run = dir.join("run");
    let mut cmd = bin();
    cmd.env("VIRTUAL_ENV", venv)
        .args([
            "local",
            "--env",
            "gym:HalfCheetah-v5",
            "--total-steps",
            "4096",
        ])
        .args([
            "--set",
            "eval.video_every=1",
            "--set",
            "eval.final_episodes=2",
        ])
        .arg("--run-dir")
        .arg(&run);
    let mut p = Proc::spawn("local", cmd, &dir);
    let status = p.wait(std::time::Duration::from_secs(180));
    assert!(status.is_some_and(|s| s.success()), "{}", p.log_text());
    let evals = read_jsonl(&run.join("eval.jsonl"));
    let index = read_jsonl(&run.join("videos/videos.jsonl"));
    if index.is_empty() {
        let log = p.log_text();
        assert!(log.contains("cannot draw itself"), "{log}");
        assert_eq!(
            log.matches("no video of this evaluation").count(),
            evals.len(),
            "{log}"
        );
    } else {
        assert_eq!(index.len(), evals.len());
    }
}
