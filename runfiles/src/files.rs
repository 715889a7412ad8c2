//! Run-directory files: atomic writes (write then rename, so a reader or a crash
//! never sees half a file) and append-only JSON lines.

use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically. On failure (a full disk) the
/// temporary file is removed and `path` is as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
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
}
