//! Reading a run directory as it grows: the configuration once, then each
//! new whole line of `metrics.jsonl`, `eval.jsonl` and `videos/videos.jsonl`
//! as a [`Record`], each with the position it was read up to, so that what
//! was delivered can be saved and a restarted tracker goes on from there.
//!
//! A resumed run trims `metrics.jsonl` back to its checkpoint and writes the
//! updates after it again. A position is therefore checked against the line
//! that ends there; when that line is gone, reading goes on after the last
//! line at or before the step already sent, so nothing is sent twice.

use crate::TrackError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// What a tracker sends, read from the run directory.
#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    /// The run's configuration (`config.toml`), flattened: `ppo.lr` with
    /// the value's TOML text.
    Params(Vec<(String, String)>),
    /// The numbers of one line of `metrics.jsonl` (`train/...`) or
    /// `eval.jsonl` (`eval/...`), at the line's `env_steps`, with its time
    /// (milliseconds since the Unix epoch).
    Scalars {
        step: u64,
        time_ms: i64,
        values: Vec<(String, f64)>,
    },
    /// A video of the agent (a line of `videos/videos.jsonl`): the file,
    /// under the run directory, and what it shows.
    Video {
        step: u64,
        time_ms: i64,
        file: PathBuf,
        caption: String,
    },
}

/// The files followed: where each is, and what its lines become.
const FILES: [(&str, Kind); 3] = [
    ("metrics.jsonl", Kind::Scalars("train")),
    ("eval.jsonl", Kind::Scalars("eval")),
    ("videos/videos.jsonl", Kind::Video),
];

#[derive(Clone, Copy, Debug)]
enum Kind {
    Scalars(&'static str),
    Video,
}

/// How far a file was read or delivered: the offset after a line, that
/// line (to notice it was trimmed away) and its step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Position {
    pub offset: u64,
    pub step: u64,
    pub line: String,
}

/// Where a record came from: which file, and the position after its line
/// (`None` for the configuration).
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub file: Option<&'static str>,
    pub position: Position,
}

/// A run directory being read.
pub struct Follower {
    dir: PathBuf,
    /// Read positions, by [`FILES`] index.
    read: [Position; 3],
    params_read: bool,
    /// The Unix time of the run's clock's zero (`wall_seconds` 0).
    origin: f64,
}

impl Follower {
    /// Reads `dir` from the delivered positions `from` (by file name) on;
    /// `params_sent`: the configuration went already.
    pub fn new(
        dir: &Path,
        from: &std::collections::BTreeMap<String, Position>,
        params_sent: bool,
        origin: f64,
    ) -> Self {
        let read = FILES.map(|(name, _)| from.get(name).cloned().unwrap_or_default());
        Self {
            dir: dir.to_path_buf(),
            read,
            params_read: params_sent,
            origin,
        }
    }

    /// The records written since the last call, at most `limit` (the rest
    /// stay in the files for the next call).
    pub fn poll(&mut self, limit: usize) -> Result<Vec<(Record, Mark)>, TrackError> {
        let mut out = Vec::new();
        if !self.params_read
            && let Some(params) = read_params(&self.dir.join("config.toml"))?
        {
            self.params_read = true;
            let mark = Mark {
                file: None,
                position: Position::default(),
            };
            out.push((Record::Params(params), mark));
        }
        for (i, (name, kind)) in FILES.into_iter().enumerate() {
            let path = self.dir.join(name);
            let left = limit.saturating_sub(out.len());
            let lines = read_new_lines(&path, &mut self.read[i], left)?;
            for (value, position) in lines {
                let mark = Mark {
                    file: Some(name),
                    position,
                };
                if let Some(r) = self.record(kind, &value) {
                    out.push((r, mark));
                }
            }
        }
        Ok(out)
    }

    fn record(&self, kind: Kind, line: &Value) -> Option<Record> {
        let step = line["env_steps"].as_u64().unwrap_or(0);
        let time_ms = match line["wall_seconds"].as_f64() {
            Some(s) if s.is_finite() => ((self.origin + s) * 1000.0) as i64,
            _ => now_ms(),
        };
        match kind {
            Kind::Scalars(prefix) => Some(Record::Scalars {
                step,
                time_ms,
                values: sebulba_runfiles::tensorboard::scalars(prefix, line),
            }),
            Kind::Video => {
                let file = line["file"].as_str().filter(|f| is_plain_name(f))?;
                let ret = line["episode_return"]
                    .as_f64()
                    .map_or("cut".to_string(), |r| format!("{r:.1}"));
                Some(Record::Video {
                    step,
                    time_ms,
                    file: Path::new(sebulba_runfiles::video::DIR).join(file),
                    caption: format!(
                        "version {}, return {ret}",
                        line["version"].as_u64().unwrap_or(0)
                    ),
                })
            }
        }
    }
}

/// A file name with no directory in it: a line of `videos.jsonl` names a
/// file beside it, never one elsewhere.
fn is_plain_name(f: &str) -> bool {
    !f.is_empty() && Path::new(f).file_name().is_some_and(|n| n == f) && f != ".."
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The largest `wall_seconds` in `metrics.jsonl`: how long the run has run,
/// to put its clock's zero in Unix time when a tracker first opens.
pub fn run_seconds(dir: &Path) -> f64 {
    let mut last = 0.0f64;
    let _ = sebulba_runfiles::files::each_json_line(&dir.join("metrics.jsonl"), |_, v| {
        if let Some(s) = v["wall_seconds"].as_f64().filter(|s| s.is_finite()) {
            last = last.max(s);
        }
        Ok(())
    });
    last
}

/// `config.toml` as (dotted key, value) pairs; `None` while there is none.
fn read_params(path: &Path) -> Result<Option<Vec<(String, String)>>, TrackError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(TrackError::Transient(format!("{}: {e}", path.display()))),
    };
    let table: toml::Table = text
        .parse()
        .map_err(|e| TrackError::Transient(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    flatten("", &toml::Value::Table(table), &mut out);
    Ok(Some(out))
}

fn flatten(path: &str, value: &toml::Value, out: &mut Vec<(String, String)>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        toml::Value::String(s) => out.push((path.to_owned(), s.clone())),
        other => out.push((path.to_owned(), other.to_string())),
    }
}

/// The whole lines of `path` after `at` (at most `limit`), each with the
/// position after it; `at` moves past them. A line that does not parse is
/// passed over, as every reader of these files does.
fn read_new_lines(
    path: &Path,
    at: &mut Position,
    limit: usize,
) -> Result<Vec<(Value, Position)>, TrackError> {
    let io = |e: std::io::Error| TrackError::Transient(format!("{}: {e}", path.display()));
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
    };
    if limit == 0 {
        return Ok(Vec::new());
    }
    if !still_there(&mut file, at).map_err(io)? {
        *at = resync(path, at.step).map_err(io)?;
    }
    file.seek(SeekFrom::Start(at.offset)).map_err(io)?;
    // Line by line: a long run's file followed from the start is not read
    // whole at every call.
    let mut reader = std::io::BufReader::new(file);
    let mut raw = Vec::new();
    let mut out = Vec::new();
    while out.len() < limit {
        raw.clear();
        let n = reader.read_until(b'\n', &mut raw).map_err(io)?;
        if n == 0 || raw.last() != Some(&b'\n') {
            break; // the end, or a line still being written
        }
        at.offset += n as u64;
        let line = String::from_utf8_lossy(&raw[..n - 1]);
        at.line = line.into_owned();
        let Ok(value) = serde_json::from_str::<Value>(&at.line) else {
            continue;
        };
        at.step = value["env_steps"].as_u64().unwrap_or(at.step);
        out.push((value, at.clone()));
    }
    Ok(out)
}

/// Whether the line `at` was read up to still ends at its offset.
fn still_there(file: &mut std::fs::File, at: &Position) -> std::io::Result<bool> {
    if at.offset == 0 {
        return Ok(true);
    }
    let want = format!("{}\n", at.line);
    let Some(from) = at.offset.checked_sub(want.len() as u64) else {
        return Ok(false);
    };
    if file.metadata()?.len() < at.offset {
        return Ok(false);
    }
    file.seek(SeekFrom::Start(from))?;
    let mut got = vec![0u8; want.len()];
    file.read_exact(&mut got)?;
    Ok(got == want.as_bytes())
}

/// The position after the last line at or before `step` (the file was
/// rewritten from a checkpoint: the lines after it are new).
fn resync(path: &Path, step: u64) -> std::io::Result<Position> {
    let mut at = Position::default();
    let mut offset = 0u64;
    let text = std::fs::read(path)?;
    for raw in text.split_inclusive(|&b| b == b'\n') {
        if raw.last() != Some(&b'\n') {
            break;
        }
        offset += raw.len() as u64;
        let line = String::from_utf8_lossy(&raw[..raw.len() - 1]).into_owned();
        let s = match serde_json::from_str::<Value>(&line) {
            Ok(v) => v["env_steps"].as_u64().unwrap_or(0),
            Err(_) => at.step, // a torn line goes with the one before it
        };
        if s > step {
            break;
        }
        at = Position {
            offset,
            step: s,
            line,
        };
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::io::Write;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sebulba-follow-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("videos")).unwrap();
        d
    }

    fn append(path: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    fn steps(records: &[(Record, Mark)]) -> Vec<u64> {
        records
            .iter()
            .filter_map(|(r, _)| match r {
                Record::Scalars { step, .. } => Some(*step),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn params_once_then_whole_new_lines_as_they_come() {
        let d = dir("lines");
        std::fs::write(
            d.join("config.toml"),
            "[ppo]\nlr = 0.5\n[env]\nid = \"CartPole-v1\"\nkwargs = [1, 2]\n",
        )
        .unwrap();
        append(
            &d.join("metrics.jsonl"),
            "{\"env_steps\":10,\"wall_seconds\":1.5,\"loss\":{\"pi\":0.25},\"ok\":true}\n{\"env_ste",
        );
        let mut f = Follower::new(&d, &BTreeMap::new(), false, 1000.0);
        let got = f.poll(100).unwrap();
        let Record::Params(p) = &got[0].0 else {
            panic!("{got:?}")
        };
        let want = [
            ("env.id", "CartPole-v1"),
            ("env.kwargs", "[1, 2]"),
            ("ppo.lr", "0.5"),
        ];
        assert_eq!(
            p,
            &want.map(|(k, v)| (k.to_string(), v.to_string())).to_vec()
        );
        assert_eq!(
            got[1].0,
            Record::Scalars {
                step: 10,
                time_ms: 1_001_500,
                values: vec![
                    ("train/env_steps".into(), 10.0),
                    ("train/loss/pi".into(), 0.25),
                    ("train/ok".into(), 1.0),
                    ("train/wall_seconds".into(), 1.5)
                ]
            }
        );
        assert_eq!(got.len(), 2, "a torn last line waits");
        // The torn line completes; an eval line and a video come.
        append(&d.join("metrics.jsonl"), "ps\":20}\nnot json\n");
        append(
            &d.join("eval.jsonl"),
            "{\"env_steps\":20,\"return_mean\":9.5}\n",
        );
        append(
            &d.join("videos/videos.jsonl"),
            "{\"env_steps\":20,\"version\":2,\"file\":\"v000002.mp4\",\"episode_return\":null}\n{\"file\":\"../../etc/passwd\"}\n",
        );
        let got = f.poll(100).unwrap();
        assert_eq!(steps(&got), [20, 20]);
        let Record::Scalars { values, .. } = &got[1].0 else {
            panic!()
        };
        let want = [("eval/env_steps", 20.0), ("eval/return_mean", 9.5)];
        assert_eq!(values, &want.map(|(k, v)| (k.to_string(), v)).to_vec());
        let Record::Video { file, caption, .. } = &got[2].0 else {
            panic!("{got:?}")
        };
        assert_eq!(file, &PathBuf::from("videos/v000002.mp4"));
        assert_eq!(caption, "version 2, return cut");
        assert_eq!(got.len(), 3, "a video named outside videos/ is passed over");
        assert!(f.poll(100).unwrap().is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_limit_leaves_the_rest_and_a_restart_goes_on_from_the_delivered_position() {
        let d = dir("limit");
        for s in 1..=5 {
            append(
                &d.join("metrics.jsonl"),
                &format!("{{\"env_steps\":{s}}}\n"),
            );
        }
        let mut f = Follower::new(&d, &BTreeMap::new(), true, 0.0);
        let first = f.poll(2).unwrap();
        assert_eq!(steps(&first), [1, 2]);
        let delivered =
            BTreeMap::from([("metrics.jsonl".to_string(), first[1].1.position.clone())]);
        let mut again = Follower::new(&d, &delivered, true, 0.0);
        assert_eq!(steps(&again.poll(100).unwrap()), [3, 4, 5]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_rewritten_from_a_checkpoint_goes_on_after_the_step_sent() {
        let d = dir("trim");
        let m = d.join("metrics.jsonl");
        for s in [10, 20, 30] {
            append(&m, &format!("{{\"env_steps\":{s},\"x\":1}}\n"));
        }
        let mut f = Follower::new(&d, &BTreeMap::new(), true, 0.0);
        assert_eq!(steps(&f.poll(100).unwrap()), [10, 20, 30]);
        // Resumed from the checkpoint at 20: 30 is done again (other
        // values), then 40; the line at 30 sent before is not sent again.
        std::fs::write(
            &m,
            "{\"env_steps\":10,\"x\":1}\n{\"env_steps\":20,\"x\":1}\n{\"env_steps\":30,\"x\":2}\n",
        )
        .unwrap();
        assert!(f.poll(100).unwrap().is_empty());
        append(&m, "{\"env_steps\":40,\"x\":2}\n");
        assert_eq!(steps(&f.poll(100).unwrap()), [40]);
        // Trimmed shorter than what was read: the same.
        std::fs::write(
            &m,
            "{\"env_steps\":10,\"x\":1}\n{\"env_steps\":50,\"x\":3}\n",
        )
        .unwrap();
        assert_eq!(steps(&f.poll(100).unwrap()), [50]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
