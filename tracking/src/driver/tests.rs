//! The driver against a fake tracker: failures, refusals, restarts, the
//! deadline, and waiting for the run to be opened.

use super::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// A tracker that fails its first `failures` calls, refuses the
/// records whose step is `refuse`, and keeps what it took.
#[derive(Clone, Default)]
struct Fake {
    failures: Arc<Mutex<u32>>,
    refuse: u64,
    took: Arc<Mutex<Vec<Record>>>,
    ended: Arc<Mutex<Option<Ending>>>,
    opens: Arc<Mutex<Vec<Option<Value>>>>,
}

impl Fake {
    fn flaky(&self) -> Result<(), TrackError> {
        let mut f = self.failures.lock().unwrap();
        if *f > 0 {
            *f -= 1;
            return Err(TrackError::Transient("down".into()));
        }
        Ok(())
    }
}

impl Sink for Fake {
    fn open(&mut self, _: &RunInfo, saved: Option<&Value>) -> Result<Value, TrackError> {
        self.flaky()?;
        self.opens.lock().unwrap().push(saved.cloned());
        Ok(json!({"run": 7}))
    }
    fn send(&mut self, _: &RunInfo, records: &[Record]) -> Result<usize, TrackError> {
        self.flaky()?;
        if let Record::Scalars { step, .. } = &records[0]
            && *step == self.refuse
        {
            return Err(TrackError::Refused("no".into()));
        }
        // Two at a time (the driver must come back for the rest), and
        // never past a record it refuses.
        let refused = records
            .iter()
            .position(|r| matches!(r, Record::Scalars { step, .. } if *step == self.refuse));
        let n = records.len().min(2).min(refused.unwrap_or(usize::MAX));
        self.took.lock().unwrap().extend_from_slice(&records[..n]);
        Ok(n)
    }
    fn finish(&mut self, _: &RunInfo, end: &End) -> Result<(), TrackError> {
        self.flaky()?;
        *self.ended.lock().unwrap() = Some(end.ending);
        Ok(())
    }
}

fn run_dir(name: &str, lines: std::ops::Range<u64>) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sebulba-driver-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("config.toml"), "[run]\nseed = 1\n").unwrap();
    append_lines(&d, lines);
    d
}

fn append_lines(d: &Path, lines: std::ops::Range<u64>) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(d.join("metrics.jsonl"))
        .unwrap();
    for s in lines {
        writeln!(f, "{{\"env_steps\":{s},\"wall_seconds\":{s}}}").unwrap();
    }
}

fn steps(fake: &Fake) -> Vec<u64> {
    fake.took
        .lock()
        .unwrap()
        .iter()
        .filter_map(|r| match r {
            Record::Scalars { step, .. } => Some(*step),
            _ => None,
        })
        .collect()
}

#[test]
fn a_failing_tracker_catches_up_once_each_refusals_passed_over_and_a_restart_goes_on() {
    let d = run_dir("catch-up", 1..6);
    let fake = Fake {
        failures: Arc::new(Mutex::new(2)),
        refuse: 3,
        ..Fake::default()
    };
    let t = start_sinks(&d, vec![("fake".into(), Box::new(fake.clone()))], None).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    append_lines(&d, 6..8);
    std::fs::write(
        d.join("summary.json"),
        r#"{"completed": true, "env_steps": 7}"#,
    )
    .unwrap();
    let out = t.finish(Duration::from_secs(30));
    assert_eq!(out[0].tracker, "fake");
    assert!(out[0].finished, "{out:?}");
    // The configuration, then every line once but the refused one.
    assert!(matches!(fake.took.lock().unwrap()[0], Record::Params(_)));
    assert_eq!(steps(&fake), [1, 2, 4, 5, 6, 7]);
    assert_eq!((out[0].refused, out[0].errors), (1, 3), "{out:?}");
    assert_eq!(*fake.ended.lock().unwrap(), Some(Ending::Finished));

    // Resumed: the same remote run, reopened, and only the new lines.
    append_lines(&d, 8..10);
    let again = Fake::default();
    let t = start_sinks(&d, vec![("fake".into(), Box::new(again.clone()))], None).unwrap();
    let out = t.finish(Duration::from_secs(30));
    assert!(out[0].finished);
    assert_eq!(again.opens.lock().unwrap()[0], Some(json!({"run": 7})));
    assert_eq!(steps(&again), [8, 9]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_tracker_that_never_answers_gives_up_at_the_deadline_and_leaves_the_rest() {
    let d = run_dir("down", 1..4);
    let fake = Fake {
        failures: Arc::new(Mutex::new(u32::MAX)),
        ..Fake::default()
    };
    let t = start_sinks(&d, vec![("fake".into(), Box::new(fake.clone()))], None).unwrap();
    let started = Instant::now();
    let out = t.finish(Duration::from_millis(1500));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        !out[0].finished && out[0].delivered == 0 && out[0].errors >= 1,
        "{out:?}"
    );
    // Nothing was delivered: the next tracker starts from the top.
    let next = Fake::default();
    let t = start_sinks(&d, vec![("fake".into(), Box::new(next.clone()))], None).unwrap();
    assert!(t.finish(Duration::from_secs(30))[0].finished);
    assert_eq!(steps(&next), [1, 2, 3]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_tracker_waits_for_the_run_to_be_opened() {
    let d = run_dir("opened", 1..3);
    let fake = Fake::default();
    let later = SystemTime::now() + Duration::from_secs(3600);
    let t = start_sinks(
        &d,
        vec![("fake".into(), Box::new(fake.clone()))],
        Some(later),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let out = t.leave();
    assert!(
        fake.opens.lock().unwrap().is_empty(),
        "read a run not opened yet"
    );
    assert_eq!(out[0].delivered, 0);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_end_is_read_from_the_summary() {
    let d = run_dir("end", 0..0);
    assert_eq!(End::of_run(&d).ending, Ending::Stopped);
    std::fs::write(
        d.join("summary.json"),
        r#"{"completed": false, "stopped_by_error": "nan"}"#,
    )
    .unwrap();
    assert_eq!(End::of_run(&d).ending, Ending::Failed);
    std::fs::write(d.join("summary.json"), r#"{"completed": true}"#).unwrap();
    std::fs::write(d.join("final.safetensors"), b"w").unwrap();
    let end = End::of_run(&d);
    assert_eq!(end.ending, Ending::Finished);
    let files: Vec<&str> = end.files.iter().filter_map(|f| f.to_str()).collect();
    assert_eq!(files, ["final.safetensors", "summary.json", "config.toml"]);
    std::fs::remove_dir_all(&d).unwrap();
}
