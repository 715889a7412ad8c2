//! TensorBoard event files that mirror a JSON-lines file (`metrics.jsonl`,
//! `eval.jsonl`): every number in every line becomes a scalar, so
//! `tensorboard --logdir runs` shows exactly what the lines say.
//!
//! The format is TFRecord framing around `tensorflow.Event` protos: each
//! record is its length (u64, little-endian), the masked CRC-32C of those 8
//! bytes, the bytes, and their masked CRC-32C. Only the few proto fields
//! scalars need are declared here (prost derives), rather than pulling the
//! unmaintained TensorBoard crates and their protobuf stacks.
//!
//! A mirror rebuilds its event file from the JSON lines when it opens, so a
//! resumed run (whose `metrics.jsonl` was trimmed back to its checkpoint) or a
//! fresh start over an old run never leaves TensorBoard with steps the lines no
//! longer hold; it keeps a single event file per directory, because TensorBoard
//! stops reading a file once a newer one appears beside it.

use crate::files::{JsonLines, each_json_line};
use prost::Message;
use serde::Serialize;
use serde_json::Value;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a run directory's event files go: one directory per writer, so
/// `tensorboard --logdir runs` lists `<run>/tensorboard/learner` (tags
/// `train/...`, from `metrics.jsonl`) and `<run>/tensorboard/evaluator`
/// (`eval/...`, from `eval.jsonl`).
pub const DIR: &str = "tensorboard";
pub const LEARNER_DIR: &str = "tensorboard/learner";
pub const EVALUATOR_DIR: &str = "tensorboard/evaluator";

/// `tensorflow.Event`: the fields scalars use.
#[derive(Clone, PartialEq, Message)]
struct Event {
    #[prost(double, tag = "1")]
    wall_time: f64,
    #[prost(int64, tag = "2")]
    step: i64,
    #[prost(string, optional, tag = "3")]
    file_version: Option<String>,
    #[prost(message, optional, tag = "5")]
    summary: Option<Summary>,
}

/// `tensorflow.Summary`.
#[derive(Clone, PartialEq, Message)]
struct Summary {
    #[prost(message, repeated, tag = "1")]
    value: Vec<SummaryValue>,
}

/// `tensorflow.Summary.Value` with `simple_value` (a member of the `value`
/// oneof: explicit presence, so a 0.0 is written and read back as 0.0).
#[derive(Clone, PartialEq, Message)]
struct SummaryValue {
    #[prost(string, tag = "1")]
    tag: String,
    #[prost(float, optional, tag = "2")]
    simple_value: Option<f32>,
    /// `image`, another member of the oneof: a video as an animated GIF.
    #[prost(message, optional, tag = "4")]
    image: Option<Image>,
}

/// `tensorflow.Summary.Image`: an encoded picture (PNG or GIF) and its size.
#[derive(Clone, PartialEq, Message)]
struct Image {
    #[prost(int32, tag = "1")]
    height: i32,
    #[prost(int32, tag = "2")]
    width: i32,
    /// 3 for RGB.
    #[prost(int32, tag = "3")]
    colorspace: i32,
    #[prost(bytes = "vec", tag = "4")]
    encoded_image_string: Vec<u8>,
}

/// TFRecord's CRC: CRC-32C, rotated and offset so that a CRC of data holding
/// CRCs stays well distributed.
fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One TFRecord around `data`.
fn record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
    out
}

/// Every finite number in a JSON object as `(prefix/path, value)`: nested
/// objects join their keys with `/`, booleans count as 0 and 1; strings,
/// nulls and arrays are not scalars and are left out.
pub fn scalars(prefix: &str, value: &Value) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    collect(prefix, value, &mut out);
    out
}

fn collect(path: &str, value: &Value, out: &mut Vec<(String, f64)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                collect(&format!("{path}/{k}"), v, out);
            }
        }
        Value::Number(n) => {
            if let Some(x) = n.as_f64().filter(|x| x.is_finite()) {
                out.push((path.to_owned(), x));
            }
        }
        Value::Bool(b) => out.push((path.to_owned(), f64::from(u8::from(*b)))),
        Value::Null | Value::String(_) | Value::Array(_) => {}
    }
}

/// A JSON-lines file and the TensorBoard event file that mirrors it. Each
/// line's scalars are logged at step `env_steps` (the x axis RL curves share)
/// and at wall time `origin + wall_seconds`, so TensorBoard's relative time is
/// the run's own clock.
pub struct MirroredLines {
    lines: JsonLines,
    events: File,
    path: PathBuf,
    prefix: String,
    origin: f64,
}

impl MirroredLines {
    /// Appends to `jsonl` and (re)writes the event file in `events_dir` from
    /// the lines it already holds; tags are `prefix/field`.
    pub fn open(jsonl: &Path, events_dir: &Path, prefix: &str) -> std::io::Result<Self> {
        // Two passes over the file, a line at a time (a long run's
        // metrics are never held whole): the newest time, then the events.
        let mut last = 0.0f64;
        each_object(jsonl, |line| {
            last = wall_seconds(&line).map_or(last, |s| last.max(s));
            Ok(())
        })?;
        let lines = JsonLines::append_to(jsonl)?;
        std::fs::create_dir_all(events_dir)?;
        for entry in std::fs::read_dir(events_dir)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().contains("tfevents") {
                std::fs::remove_file(entry.path())?;
            }
        }
        let (events, path, now) = new_event_file(events_dir, prefix)?;
        let mut me = Self {
            lines,
            events,
            path,
            prefix: prefix.to_owned(),
            origin: now - last,
        };
        each_object(jsonl, |line| me.event(&line))?;
        Ok(me)
    }

    /// The event file being written.
    pub fn events_path(&self) -> &Path {
        &self.path
    }

    /// Appends `value` as a JSON line, then its scalars as one event.
    pub fn write<T: Serialize>(&mut self, value: &T) -> std::io::Result<()> {
        self.lines.write(value)?;
        let json = serde_json::to_value(value).map_err(std::io::Error::other)?;
        self.event(&json)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", self.path.display())))
    }

    fn event(&mut self, line: &Value) -> std::io::Result<()> {
        let value: Vec<SummaryValue> = scalars(&self.prefix, line)
            .into_iter()
            .map(|(tag, v)| SummaryValue {
                tag,
                simple_value: Some(v as f32),
                image: None,
            })
            .collect();
        let step = line["env_steps"].as_u64().unwrap_or(0);
        let event = Event {
            wall_time: self.origin + wall_seconds(line).unwrap_or(0.0),
            step: i64::try_from(step).unwrap_or(i64::MAX),
            file_version: None,
            summary: Some(Summary { value }),
        };
        self.events.write_all(&record(&event.encode_to_vec()))?;
        self.events.flush()
    }
}

/// An event file of pictures (the evaluator's videos, as animated GIFs),
/// appended to across restarts rather than rebuilt: a video is megabytes,
/// and one at a step a resumed run goes past again is still a true picture
/// of that version.
pub struct ImageEvents {
    events: File,
    path: PathBuf,
}

impl ImageEvents {
    /// Appends to the event file in `events_dir`, or starts one.
    pub fn open(events_dir: &Path, name: &str) -> std::io::Result<Self> {
        std::fs::create_dir_all(events_dir)?;
        let existing = std::fs::read_dir(events_dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().contains("tfevents"));
        if let Some(path) = existing {
            let events = std::fs::OpenOptions::new().append(true).open(&path)?;
            return Ok(Self { events, path });
        }
        let (events, path, _) = new_event_file(events_dir, name)?;
        Ok(Self { events, path })
    }

    pub fn events_path(&self) -> &Path {
        &self.path
    }

    /// One encoded picture (`gif` bytes) of `width` x `height` under `tag`
    /// at `step`.
    pub fn write(
        &mut self,
        tag: &str,
        step: u64,
        (width, height): (u32, u32),
        gif: Vec<u8>,
    ) -> std::io::Result<()> {
        let side = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        let value = SummaryValue {
            tag: tag.to_owned(),
            simple_value: None,
            image: Some(Image {
                height: side(height),
                width: side(width),
                colorspace: 3,
                encoded_image_string: gif,
            }),
        };
        let event = Event {
            wall_time: unix_now(),
            step: i64::try_from(step).unwrap_or(i64::MAX),
            file_version: None,
            summary: Some(Summary { value: vec![value] }),
        };
        self.events.write_all(&record(&event.encode_to_vec()))?;
        self.events.flush()
    }
}

/// A new event file in `events_dir` named after `name`, its version
/// record written; the file, its path and its creation time.
fn new_event_file(events_dir: &Path, name: &str) -> std::io::Result<(File, PathBuf, f64)> {
    let now = unix_now();
    let path = events_dir.join(format!("events.out.tfevents.{}.sebulba.{name}", now as u64));
    let mut events = File::create(&path)?;
    let version = Event {
        wall_time: now,
        step: 0,
        file_version: Some("brain.Event:2".into()),
        summary: None,
    };
    events.write_all(&record(&version.encode_to_vec()))?;
    Ok((events, path, now))
}

fn wall_seconds(line: &Value) -> Option<f64> {
    line["wall_seconds"].as_f64().filter(|s| s.is_finite())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Each JSON object of a JSON-lines file, a line at a time (none when it
/// does not exist).
fn each_object(
    path: &Path,
    mut each: impl FnMut(Value) -> std::io::Result<()>,
) -> std::io::Result<()> {
    each_json_line(path, |_, v| if v.is_object() { each(v) } else { Ok(()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_crc_matches_tfrecord() {
        // CRC-32C("123456789") = 0xE3069283 (RFC 3720's check value);
        // masked by hand: rotated right 15 bits is 0x2507C60D, plus
        // 0xA282EAD8 (mod 2^32) is 0xC78AB0E5.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(masked_crc(b"123456789"), 0xc78a_b0e5);
    }

    #[test]
    fn record_frames_length_and_crcs() {
        let r = record(b"abc");
        assert_eq!(r.len(), 8 + 4 + 3 + 4);
        assert_eq!(&r[..8], &3u64.to_le_bytes());
        assert_eq!(&r[8..12], &masked_crc(&3u64.to_le_bytes()).to_le_bytes());
        assert_eq!(&r[12..15], b"abc");
        assert_eq!(&r[15..], &masked_crc(b"abc").to_le_bytes());
    }

    #[test]
    fn scalars_flatten_numbers_and_skip_the_rest() {
        let v = serde_json::json!({
            "env_steps": 512, "loss": -0.25, "lag": {"mean": 1.5, "max": 3},
            "final": true, "name": "x", "none": null, "list": [1, 2]
        });
        let mut got = scalars("train", &v);
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let want = [
            ("train/env_steps", 512.0),
            ("train/final", 1.0),
            ("train/lag/max", 3.0),
            ("train/lag/mean", 1.5),
            ("train/loss", -0.25),
        ];
        assert_eq!(got.len(), want.len());
        for ((t, x), (wt, wx)) in got.iter().zip(want) {
            assert_eq!((t.as_str(), *x), (wt, wx));
        }
    }

    /// Reads the records of an event file back (checking both CRCs).
    fn read_events(path: &Path) -> Vec<Event> {
        let bytes = std::fs::read(path).unwrap();
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let len_bytes = &bytes[at..at + 8];
            let len = u64::from_le_bytes(len_bytes.try_into().unwrap()) as usize;
            let crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap());
            assert_eq!(crc, masked_crc(len_bytes));
            let data = &bytes[at + 12..at + 12 + len];
            let crc = u32::from_le_bytes(bytes[at + 12 + len..at + 16 + len].try_into().unwrap());
            assert_eq!(crc, masked_crc(data));
            out.push(Event::decode(data).unwrap());
            at += 16 + len;
        }
        out
    }

    #[test]
    fn mirror_rebuilds_from_held_lines_then_appends() {
        let dir = std::env::temp_dir().join(format!("sebulba-tb-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let jsonl = dir.join("m.jsonl");
        std::fs::write(
            &jsonl,
            "{\"env_steps\":100,\"wall_seconds\":1.0,\"r\":0.0}\nnot json\n",
        )
        .unwrap();
        let tb = dir.join("tb");
        let mut m = MirroredLines::open(&jsonl, &tb, "train").unwrap();
        m.write(&serde_json::json!({"env_steps": 200, "wall_seconds": 3.5, "r": 2.0}))
            .unwrap();
        let events = read_events(m.events_path());
        assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
        let steps: Vec<i64> = events[1..].iter().map(|e| e.step).collect();
        assert_eq!(steps, [100, 200]);
        let r = &events[1].summary.as_ref().unwrap().value;
        let zero = r.iter().find(|v| v.tag == "train/r").unwrap();
        assert_eq!(zero.simple_value, Some(0.0));
        assert!((events[2].wall_time - events[1].wall_time - 2.5).abs() < 1e-6);
        // Opened again (a resume): one event file, rebuilt from both lines.
        drop(m);
        let m = MirroredLines::open(&jsonl, &tb, "train").unwrap();
        let files = std::fs::read_dir(&tb).unwrap().count();
        assert_eq!(files, 1);
        assert_eq!(read_events(m.events_path()).len(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
