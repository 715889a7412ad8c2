//! Videos of the agent: the first episode of an evaluation filmed as it is
//! played (`Recording`, on the evaluation's thread), and the run's videos
//! (`Videos`): `videos/<name>.mp4` (or `.gif` without ffmpeg), a line per
//! video in `videos/videos.jsonl`, and the same episode as an animated GIF
//! in TensorBoard (`tensorboard/videos`, tag `eval/video`).
//!
//! Filming never fails an evaluation: a frame the env cannot draw, a full
//! disk or a broken ffmpeg ends the recording with its reason, which the
//! evaluator logs and counts, and the episodes play on.

use sebulba_envs::render::Frame;
use sebulba_runfiles::files::JsonLines;
use sebulba_runfiles::tensorboard::ImageEvents;
use sebulba_runfiles::video::{Format, Gif, Video, VideoError, VideoWriter};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use sebulba_runfiles::video::DIR;
/// TensorBoard's copy, beside the evaluator's scalars.
pub const EVENTS_DIR: &str = "tensorboard/videos";

/// What watches env 0's episode as it is played (`play_filmed`): a
/// [`Recording`] into a file, or `sebulba watch --live` drawing it in a
/// terminal.
pub trait Film {
    /// Whether frames are still wanted.
    fn filming(&self) -> bool;
    /// The env's picture now (`None`: the env cannot draw itself).
    fn frame(&mut self, frame: Option<Frame>);
    /// The filmed episode finished with this return and length.
    fn ended(&mut self, episode_return: f64, length: u32);
    /// Stops filming: the episode ended or was cut, or (`broken`) its env
    /// was replaced mid-episode.
    fn stop(&mut self, broken: Option<&str>);
}

/// One episode being filmed: the env's frames, each the state the policy
/// acted on (the first after the reset, the last before the step that ended
/// it), so a finished episode has as many frames as steps.
pub struct Recording {
    path: PathBuf,
    /// A GIF for TensorBoard beside an MP4 file.
    with_gif: bool,
    state: Filming,
    /// How the filmed episode came out: `(return, length)`, once finished.
    pub ended: Option<(f64, u32)>,
    /// Time spent encoding and writing frames (not drawing them: the env
    /// draws before a frame is handed over).
    pub seconds: f64,
}

enum Filming {
    Waiting,
    On(VideoWriter, Option<Gif<Vec<u8>>>),
    Done(Result<(Video, Vec<u8>), String>),
}

/// A recording's outcome, for the run's files.
pub struct Filmed {
    pub video: Video,
    /// The episode as a GIF, for TensorBoard.
    pub gif: Vec<u8>,
    pub ended: Option<(f64, u32)>,
    pub seconds: f64,
}

impl Recording {
    /// A recording into `path` (its extension names the format); with
    /// `with_gif`, an MP4's episode is also kept as a GIF in memory.
    pub fn new(path: PathBuf, with_gif: bool) -> Self {
        Self {
            path,
            with_gif,
            state: Filming::Waiting,
            ended: None,
            seconds: 0.0,
        }
    }

    fn add(&mut self, frame: Option<Frame>) -> Result<(), String> {
        let Some(f) = frame else {
            return Err("this environment cannot draw itself".into());
        };
        if let Filming::Waiting = self.state {
            let writer = VideoWriter::create(&self.path, f.width, f.height).map_err(e)?;
            let gif = self
                .with_gif
                .then(|| Gif::new(Vec::new(), f.width, f.height, &self.path))
                .transpose()
                .map_err(e)?;
            self.state = Filming::On(writer, gif);
        }
        if let Filming::On(writer, gif) = &mut self.state {
            writer.push(&f.rgb).map_err(e)?;
            if let Some(g) = gif {
                g.push(&f.rgb).map_err(e)?;
            }
        }
        Ok(())
    }

    /// The video, or why there is none.
    pub fn finish(mut self) -> Result<Filmed, String> {
        self.stop(None);
        let Filming::Done(done) = self.state else {
            return Err("still filming".into());
        };
        let (video, gif) = done?;
        Ok(Filmed {
            video,
            gif,
            ended: self.ended,
            seconds: self.seconds,
        })
    }
}

impl Film for Recording {
    fn filming(&self) -> bool {
        !matches!(self.state, Filming::Done(_))
    }

    fn frame(&mut self, frame: Option<Frame>) {
        let t0 = Instant::now();
        if let Err(e) = self.add(frame) {
            self.state = Filming::Done(Err(e));
        }
        self.seconds += t0.elapsed().as_secs_f64();
    }

    fn stop(&mut self, broken: Option<&str>) {
        let t0 = Instant::now();
        let state = std::mem::replace(&mut self.state, Filming::Done(Err(String::new())));
        self.state = match (state, broken) {
            (Filming::Done(r), _) => Filming::Done(r),
            (_, Some(why)) => Filming::Done(Err(why.to_string())),
            (Filming::Waiting, None) => Filming::Done(Err("no frame was drawn".into())),
            (Filming::On(writer, gif), None) => Filming::Done(close(writer, gif)),
        };
        self.seconds += t0.elapsed().as_secs_f64();
    }

    fn ended(&mut self, episode_return: f64, length: u32) {
        self.ended = Some((episode_return, length));
    }
}

fn e(err: VideoError) -> String {
    err.to_string()
}

/// The finished file, and the GIF TensorBoard shows: the one kept in
/// memory, or the file itself when it is a GIF.
fn close(writer: VideoWriter, gif: Option<Gif<Vec<u8>>>) -> Result<(Video, Vec<u8>), String> {
    let video = writer.finish().map_err(e)?;
    let gif = match gif {
        Some(g) => g.finish().map_err(e)?,
        None => {
            std::fs::read(&video.path).map_err(|err| format!("{}: {err}", video.path.display()))?
        }
    };
    Ok((video, gif))
}

/// A run directory's videos.
pub struct Videos {
    dir: PathBuf,
    format: Format,
    index: JsonLines,
    events: ImageEvents,
}

/// `videos/videos.jsonl`: one line per video.
#[derive(Serialize)]
struct IndexLine<'a> {
    version: u64,
    env_steps: u64,
    file: &'a str,
    frames: u32,
    width: u32,
    height: u32,
    /// The filmed episode's return and length, where it finished.
    episode_return: Option<f64>,
    episode_length: Option<u32>,
    /// Encoding and writing its frames (not drawing them), seconds.
    encode_seconds: f64,
}

impl Videos {
    /// The videos of the run in `run_dir`: MP4 where ffmpeg runs, else GIF.
    pub fn open(run_dir: &Path) -> std::io::Result<Self> {
        let dir = run_dir.join(DIR);
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            index: JsonLines::append_to(&dir.join("videos.jsonl"))?,
            events: ImageEvents::open(&run_dir.join(EVENTS_DIR), "videos")?,
            format: Format::best_available(),
            dir,
        })
    }

    /// A recording of `version`'s evaluation.
    pub fn recording(&self, version: u64, is_final: bool) -> Recording {
        let name = if is_final {
            format!("final-v{version:06}")
        } else {
            format!("v{version:06}")
        };
        let path = self.dir.join(name).with_extension(self.format.extension());
        Recording::new(path, self.format == Format::Mp4)
    }

    /// Files `version`'s recording, or logs and counts why there is no
    /// video: the evaluation stands either way.
    pub fn file(&mut self, version: u64, env_steps: u64, recording: Recording) {
        let filed = recording.finish().and_then(|f| {
            let (frames, seconds) = (f.video.frames, f.seconds);
            self.add(version, env_steps, f)
                .map(|()| (frames, seconds))
                .map_err(|e| format!("filing the video: {e}"))
        });
        match filed {
            Ok((frames, seconds)) => {
                tracing::info!(
                    version,
                    frames,
                    encode_seconds = format!("{seconds:.2}"),
                    "filmed"
                );
                crate::metrics::filmed(true);
            }
            Err(why) => {
                tracing::warn!(version, "no video of this evaluation: {why}");
                crate::metrics::filmed(false);
            }
        }
    }

    /// Files a finished video: its index line and TensorBoard's copy.
    pub fn add(&mut self, version: u64, env_steps: u64, filmed: Filmed) -> std::io::Result<()> {
        let v = &filmed.video;
        let file = v.path.file_name().map(|n| n.to_string_lossy().into_owned());
        self.index.write(&IndexLine {
            version,
            env_steps,
            file: file.as_deref().unwrap_or(""),
            frames: v.frames,
            width: v.width,
            height: v.height,
            episode_return: filmed.ended.map(|e| e.0),
            episode_length: filmed.ended.map(|e| e.1),
            encode_seconds: filmed.seconds,
        })?;
        self.events
            .write("eval/video", env_steps, (v.width, v.height), filmed.gif)
    }
}
