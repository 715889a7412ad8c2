//! Run-directory files: atomic writes (write then rename, so a reader or a crash
//! never sees half a file) and append-only JSON lines.

use serde::Serialize;
use std::io::{BufRead, Write};
use std::path::Path;

/// Writes `bytes` to `path` atomically. On failure (a full disk) the
/// temporary file is removed and `path` is as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Writes what `fill` writes to `path` atomically, streamed (nothing held
/// whole). On failure the temporary file is removed and `path` is as it was.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let written = (|| {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        fill(&mut w)?;
        let f = w
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Writes `value` as pretty JSON atomically.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    write_atomic(path, &text)
}

/// The JSON values of a JSON-lines text, in order. A line that does not
/// parse (a line torn by a crash, a stray blank) is skipped: every reader of
/// `metrics.jsonl` and `eval.jsonl` treats them so.
pub fn json_lines(text: &str) -> impl Iterator<Item = serde_json::Value> + '_ {
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
}

/// Each line of a JSON-lines file with its JSON value, read one line at a
/// time: a long run's `metrics.jsonl` (tens of MB, hundreds as values) is
/// never held whole. Lines that do not parse are skipped, as in
/// [`json_lines`]; a missing file has none.
pub fn each_json_line(
    path: &Path,
    mut each: impl FnMut(&str, serde_json::Value) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut reader = std::io::BufReader::new(file);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let text = line.trim_end_matches(['\n', '\r']);
        if let Ok(value) = serde_json::from_str(text) {
            each(text, value)?;
        }
    }
}

/// An append-only JSON-lines file (`metrics.jsonl`, `eval.jsonl`).
pub struct JsonLines {
    file: std::fs::File,
}

impl JsonLines {
    pub fn append_to(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            file: std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?,
        })
    }

    /// Writes one line in a single `write` call, so concurrent readers see
    /// whole lines. A line that could not be written whole (a full disk) is
    /// cut off again, so the file never ends in a torn line.
    pub fn write<T: Serialize>(&mut self, value: &T) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let before = self.file.metadata()?.len();
        let written = self.file.write_all(&line).and_then(|()| self.file.flush());
        if written.is_err() {
            let _ = self.file.set_len(before);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_and_json_lines() {
        let dir = std::env::temp_dir().join(format!("sebulba-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.json");
        write_json_atomic(&p, &serde_json::json!({"a": 1})).unwrap();
        write_json_atomic(&p, &serde_json::json!({"a": 2})).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(v["a"], 2);
        assert!(!dir.join("s.json.tmp").exists());
        let l = dir.join("m.jsonl");
        let mut w = JsonLines::append_to(&l).unwrap();
        w.write(&1).unwrap();
        w.write(&"x").unwrap();
        assert_eq!(std::fs::read_to_string(&l).unwrap(), "1\n\"x\"\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lines_stream_with_torn_ones_skipped_and_a_failed_write_changes_nothing() {
        let dir = std::env::temp_dir().join(format!("sebulba-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("m.jsonl");
        std::fs::write(&p, "{\"u\":1}\r\n\n{\"u\":2}\n{\"u\":3,\"lo").unwrap();
        let mut seen = Vec::new();
        each_json_line(&p, |line, v| {
            seen.push((line.to_string(), v["u"].as_u64()));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            [("{\"u\":1}".into(), Some(1)), ("{\"u\":2}".into(), Some(2))]
        );
        // A missing file has no lines; an error from the callback stops the read.
        each_json_line(&dir.join("none"), |_, _| panic!("a line")).unwrap();
        let stop = each_json_line(&p, |_, _| Err(std::io::Error::other("stop")));
        assert_eq!(stop.unwrap_err().to_string(), "stop");
        // A write that fails half-way leaves the file as it was, no temporary.
        let before = std::fs::read(&p).unwrap();
        let failed = write_atomic_with(&p, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read(&p).unwrap(), before);
        assert!(!dir.join("m.jsonl.tmp").exists());
        write_atomic_with(&p, |w| w.write_all(b"whole\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "whole\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
