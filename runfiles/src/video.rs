//! Videos of the agent: RGB frames in, a file out. MP4 (H.264, what
//! browsers and trackers play) through the system's `ffmpeg`, fed raw
//! frames on a pipe; GIF through the `gif` crate where there is no ffmpeg,
//! and always for TensorBoard, whose image plugin plays animated GIFs.
//! Frames are encoded as they come, so a long episode is never held whole.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

/// Where a run's videos go, under its directory.
pub const DIR: &str = "videos";

/// Frames per second every video plays at.
pub const FPS: u32 = 30;

#[derive(Debug, thiserror::Error)]
pub enum VideoError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: ffmpeg failed ({status}): {stderr}")]
    Ffmpeg {
        path: String,
        status: String,
        stderr: String,
    },
    #[error("{path}: GIF encoding: {reason}")]
    Gif { path: String, reason: String },
    #[error("frame {index}: {got} bytes, expected {width} x {height} RGB ({expected})")]
    FrameSize {
        index: u32,
        got: usize,
        width: u32,
        height: u32,
        expected: usize,
    },
    #[error("`{0}`: a video is written as .mp4 or .gif")]
    Extension(String),
    #[error("a {width} x {height} frame is too large for a GIF (at most 65535 a side)")]
    TooLarge { width: u32, height: u32 },
}

/// A video file's container and codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// H.264 in MP4, through ffmpeg.
    Mp4,
    Gif,
}

impl Format {
    pub fn extension(self) -> &'static str {
        match self {
            Format::Mp4 => "mp4",
            Format::Gif => "gif",
        }
    }

    /// The format a path's extension names.
    pub fn of(path: &Path) -> Result<Self, VideoError> {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("mp4") => Ok(Format::Mp4),
            Some(e) if e.eq_ignore_ascii_case("gif") => Ok(Format::Gif),
            _ => Err(VideoError::Extension(path.display().to_string())),
        }
    }

    /// MP4 where `ffmpeg` runs, else GIF.
    pub fn best_available() -> Self {
        if ffmpeg_available() {
            Format::Mp4
        } else {
            Format::Gif
        }
    }
}

/// Whether `ffmpeg` is on the PATH and runs.
pub fn ffmpeg_available() -> bool {
    Command::new("ffmpeg")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A finished video.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Video {
    pub path: PathBuf,
    pub format: Format,
    pub frames: u32,
    pub width: u32,
    pub height: u32,
}

/// A video being written, a frame at a time.
pub struct VideoWriter {
    path: PathBuf,
    format: Format,
    sink: Sink,
    width: u32,
    height: u32,
    frames: u32,
}

enum Sink {
    Gif(Box<Gif<BufWriter<File>>>),
    /// Frames go to a thread that writes them into ffmpeg's input, so that
    /// the episode plays on while ffmpeg encodes (a frame is larger than a
    /// pipe's buffer: written in place, each would wait for the encoder).
    Mp4 {
        child: Child,
        frames: SyncSender<Vec<u8>>,
        writer: JoinHandle<std::io::Result<()>>,
    },
}

/// Frames queued for ffmpeg: enough to ride out its slower frames, few
/// enough that a stalled ffmpeg holds little memory.
const QUEUED_FRAMES: usize = 16;

fn feed(
    mut stdin: ChildStdin,
    frames: Receiver<Vec<u8>>,
    (width, height): (u32, u32),
) -> std::io::Result<()> {
    let mut planes = Vec::new();
    for frame in frames {
        yuv::convert(&frame, width, height, &mut planes);
        stdin.write_all(&planes)?;
    }
    Ok(())
}

impl VideoWriter {
    /// Starts `path` (its extension names the format) for frames of
    /// `width` x `height`.
    pub fn create(path: &Path, width: u32, height: u32) -> Result<Self, VideoError> {
        let format = Format::of(path)?;
        let io = |source| VideoError::Io {
            path: path.display().to_string(),
            source,
        };
        let sink = match format {
            Format::Gif => {
                let file = BufWriter::new(File::create(path).map_err(io)?);
                Sink::Gif(Box::new(Gif::new(file, width, height, path)?))
            }
            Format::Mp4 => {
                let mut child = ffmpeg(path, width, height).spawn().map_err(io)?;
                let stdin = child.stdin.take().ok_or_else(|| {
                    io(std::io::Error::other(
                        "ffmpeg's standard input is not a pipe",
                    ))
                })?;
                let (frames, queued) = sync_channel(QUEUED_FRAMES);
                let writer = std::thread::Builder::new()
                    .name("sebulba-video".into())
                    .spawn(move || feed(stdin, queued, (width, height)))
                    .map_err(io)?;
                Sink::Mp4 {
                    child,
                    frames,
                    writer,
                }
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            format,
            sink,
            width,
            height,
            frames: 0,
        })
    }

    /// Adds one frame: `height` rows of `width` RGB pixels.
    pub fn push(&mut self, rgb: &[u8]) -> Result<(), VideoError> {
        check_size(rgb, self.width, self.height, self.frames)?;
        match &mut self.sink {
            Sink::Gif(g) => g.push(rgb)?,
            Sink::Mp4 { frames, .. } => {
                // A closed queue: the writer stopped on an error, which
                // `finish` reports.
                let _ = frames.send(rgb.to_vec());
            }
        }
        self.frames += 1;
        Ok(())
    }

    /// Closes the file (waiting for ffmpeg to finish it).
    pub fn finish(self) -> Result<Video, VideoError> {
        let shown = self.path.display().to_string();
        match self.sink {
            Sink::Gif(g) => {
                let mut file = g.finish()?;
                file.flush().map_err(|source| VideoError::Io {
                    path: shown.clone(),
                    source,
                })?;
            }
            Sink::Mp4 {
                mut child,
                frames,
                writer,
            } => {
                drop(frames);
                let written = writer
                    .join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("the frame writer panicked")));
                let mut stderr = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut stderr);
                }
                let status = child.wait().map_err(|source| VideoError::Io {
                    path: shown.clone(),
                    source,
                })?;
                if !status.success() || written.is_err() {
                    let status = match written {
                        Err(e) if status.success() => format!("writing its input: {e}"),
                        _ => status.to_string(),
                    };
                    return Err(VideoError::Ffmpeg {
                        path: shown,
                        status,
                        stderr: stderr.trim().to_string(),
                    });
                }
            }
        }
        Ok(Video {
            path: self.path,
            format: self.format,
            frames: self.frames,
            width: self.width,
            height: self.height,
        })
    }
}

fn check_size(rgb: &[u8], width: u32, height: u32, index: u32) -> Result<(), VideoError> {
    let expected = width as usize * height as usize * 3;
    if rgb.len() == expected {
        Ok(())
    } else {
        Err(VideoError::FrameSize {
            index,
            got: rgb.len(),
            width,
            height,
            expected,
        })
    }
}

/// ffmpeg reading raw YUV 4:2:0 frames (`yuv`) on stdin and writing
/// H.264 in MP4, `faststart` so that a browser plays it while it loads, on
/// one thread so that it takes little of a machine that is training.
fn ffmpeg(path: &Path, width: u32, height: u32) -> Command {
    let (w, h) = yuv::padded(width, height);
    let mut c = Command::new("ffmpeg");
    c.args(["-loglevel", "error", "-y", "-f", "rawvideo"])
        .args(["-pix_fmt", "yuv420p", "-s", &format!("{w}x{h}")])
        .args(["-r", &FPS.to_string(), "-i", "-"])
        .args(["-c:v", "libx264", "-preset", "veryfast", "-crf", "23"])
        .args(["-movflags", "+faststart", "-threads", "1"])
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// A GIF being encoded into `W`: after the first frame, each frame is the
/// rectangle that changed since the one before, drawn over it (most of a
/// scene stands still, so this is most of the encoding time and size
/// saved), with its exact colours where it has at most 256 (the drawn
/// scenes, the grids, Atari's palette), else quantised by NeuQuant.
pub struct Gif<W: Write> {
    encoder: gif::Encoder<W>,
    width: u16,
    height: u16,
    frames: u32,
    previous: Vec<u8>,
    path: String,
}

/// A rectangle of a frame: left, top, width, height.
type Rect = (u16, u16, u16, u16);

impl<W: Write> Gif<W> {
    /// `path` only names the output in errors.
    pub fn new(out: W, width: u32, height: u32, path: &Path) -> Result<Self, VideoError> {
        let too_large = || VideoError::TooLarge { width, height };
        let (w, h) = (
            u16::try_from(width).map_err(|_| too_large())?,
            u16::try_from(height).map_err(|_| too_large())?,
        );
        let path = path.display().to_string();
        let gif_err = |e: gif::EncodingError| VideoError::Gif {
            path: path.clone(),
            reason: e.to_string(),
        };
        let mut encoder = gif::Encoder::new(out, w, h, &[]).map_err(gif_err)?;
        encoder.set_repeat(gif::Repeat::Infinite).map_err(gif_err)?;
        Ok(Self {
            encoder,
            width: w,
            height: h,
            frames: 0,
            previous: Vec::new(),
            path,
        })
    }

    pub fn push(&mut self, rgb: &[u8]) -> Result<(), VideoError> {
        check_size(rgb, self.width.into(), self.height.into(), self.frames)?;
        let rect = if self.previous.is_empty() {
            (0, 0, self.width, self.height)
        } else {
            // An unchanged frame still takes its time: one pixel redrawn.
            changed(&self.previous, rgb, self.width, self.height).unwrap_or((0, 0, 1, 1))
        };
        let part = crop(rgb, self.width, rect);
        let (left, top, w, h) = rect;
        let mut frame = match indexed(&part) {
            Some((pixels, palette)) => gif::Frame::from_palette_pixels(w, h, pixels, palette, None),
            None => gif::Frame::from_rgb_speed(w, h, &part, 10),
        };
        (frame.left, frame.top) = (left, top);
        frame.dispose = gif::DisposalMethod::Keep;
        frame.delay = (100 / FPS) as u16;
        self.encoder
            .write_frame(&frame)
            .map_err(|e| VideoError::Gif {
                path: self.path.clone(),
                reason: e.to_string(),
            })?;
        self.previous.clear();
        self.previous.extend_from_slice(rgb);
        self.frames += 1;
        Ok(())
    }

    /// The output, the GIF's trailer written.
    pub fn finish(self) -> Result<W, VideoError> {
        let path = self.path;
        self.encoder.into_inner().map_err(|e| VideoError::Gif {
            path,
            reason: e.to_string(),
        })
    }
}

/// The smallest rectangle holding every pixel that differs between two
/// frames; `None` when none does.
fn changed(before: &[u8], after: &[u8], width: u16, height: u16) -> Option<Rect> {
    let (w, row) = (usize::from(width), 3 * usize::from(width));
    let differs = |y: usize| before[y * row..][..row] != after[y * row..][..row];
    let top = (0..usize::from(height)).find(|&y| differs(y))?;
    let bottom = (top..usize::from(height)).rev().find(|&y| differs(y))?;
    let pixel_differs = |y: usize, x: usize| {
        let i = y * row + 3 * x;
        before[i..i + 3] != after[i..i + 3]
    };
    let (mut left, mut right) = (w, 0);
    for y in top..=bottom {
        if let Some(first) = (0..w).find(|&x| pixel_differs(y, x)) {
            let last = (first..w)
                .rev()
                .find(|&x| pixel_differs(y, x))
                .unwrap_or(first);
            (left, right) = (left.min(first), right.max(last));
        }
    }
    let n = |v: usize| u16::try_from(v).unwrap_or(u16::MAX);
    Some((n(left), n(top), n(right - left + 1), n(bottom - top + 1)))
}

/// The pixels of `rect`, row after row.
fn crop(rgb: &[u8], width: u16, (left, top, w, h): Rect) -> Vec<u8> {
    let row = 3 * usize::from(width);
    let mut out = Vec::with_capacity(3 * usize::from(w) * usize::from(h));
    for y in usize::from(top)..usize::from(top) + usize::from(h) {
        let start = y * row + 3 * usize::from(left);
        out.extend_from_slice(&rgb[start..start + 3 * usize::from(w)]);
    }
    out
}

/// The frame as palette indices and the palette, where it has at most 256
/// colours (consecutive pixels mostly repeat, so the last one is checked
/// before the search).
fn indexed(rgb: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut colours: Vec<[u8; 3]> = Vec::new();
    let mut pixels = Vec::with_capacity(rgb.len() / 3);
    let mut last: Option<([u8; 3], u8)> = None;
    for p in rgb.chunks_exact(3) {
        let c = [p[0], p[1], p[2]];
        let index = match last {
            Some((lc, li)) if lc == c => li,
            _ => {
                let i = match colours.iter().position(|&k| k == c) {
                    Some(i) => i,
                    None if colours.len() < 256 => {
                        colours.push(c);
                        colours.len() - 1
                    }
                    None => return None,
                };
                last = Some((c, i as u8));
                i as u8
            }
        };
        pixels.push(index);
    }
    Some((pixels, colours.concat()))
}

#[cfg(test)]
mod tests;
mod yuv;
