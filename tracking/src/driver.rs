//! A tracker's thread: opens the remote run, reads what the run directory
//! gained, delivers it, and on failure waits (1 s doubling to 30 s) and tries
//! again; the files hold what is not delivered yet, so nothing is dropped
//! while a server is away and memory stays bounded ([`AHEAD`] records).

use crate::follow::{Follower, Mark, Record, run_seconds};
use crate::state::State;
use crate::{End, Ending, RunInfo, Sink, Track, TrackError};
use metrics::{counter, gauge};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant, SystemTime};
use tracing::{info, warn};

/// Records read ahead of delivery, at most.
pub const AHEAD: usize = 1000;
/// How often the files are read for new lines.
const POLL: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A failing tracker says so again at most this often.
const REPEAT_WARNING: Duration = Duration::from_secs(60);

/// The run's trackers, each on its thread.
pub struct Tracking {
    workers: Vec<(String, Sender<Stop>, std::thread::JoinHandle<Outcome>)>,
}

/// What a tracker's thread is told: stop by `deadline`, after recording the
/// end of the run (`finish`) or leaving it for later.
#[derive(Clone, Copy, Debug)]
struct Stop {
    deadline: Instant,
    finish: bool,
}

/// What a tracker did, when it stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub tracker: String,
    pub delivered: u64,
    pub refused: u64,
    pub errors: u64,
    /// The end of the run was recorded: everything went.
    pub finished: bool,
}

/// Starts a thread per tracker following run directory `dir`. Bad
/// `--track` values fail here, before anything runs. With `opened_after`,
/// a tracker waits for the run to be opened (its `config.toml` written)
/// after that time: a learner starting over (`--fresh`) or resuming (which
/// trims `metrics.jsonl`) has done so before anything is read.
pub fn start(
    dir: &Path,
    tracks: &[Track],
    opened_after: Option<SystemTime>,
) -> Result<Tracking, TrackError> {
    let sinks = tracks
        .iter()
        .map(|t| Ok((t.name().to_string(), crate::sink(t)?)))
        .collect::<Result<Vec<_>, TrackError>>()?;
    start_sinks(dir, sinks, opened_after)
}

/// [`start`] with the sinks made.
fn start_sinks(
    dir: &Path,
    sinks: Vec<(String, Box<dyn Sink>)>,
    opened_after: Option<SystemTime>,
) -> Result<Tracking, TrackError> {
    describe();
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let run = RunInfo {
        name: dir
            .file_name()
            .map_or("run".into(), |n| n.to_string_lossy().into_owned()),
        dir,
    };
    let mut workers = Vec::new();
    for (name, sink) in sinks {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut worker = Worker::new(sink, run.clone(), name.clone(), rx);
        worker.opened_after = opened_after;
        let thread = std::thread::Builder::new()
            .name(format!("tracker-{name}"))
            .spawn(move || worker.run())
            .map_err(|e| TrackError::Spec(format!("starting the {name} tracker: {e}")))?;
        workers.push((name, tx, thread));
    }
    Ok(Tracking { workers })
}

fn describe() {
    use metrics::{describe_counter, describe_gauge};
    describe_counter!(
        "sebulba_tracker_records_total",
        "Records (config, lines, videos) an experiment tracker took"
    );
    describe_counter!(
        "sebulba_tracker_errors_total",
        "Failed attempts to reach or feed an experiment tracker"
    );
    describe_counter!(
        "sebulba_tracker_refused_total",
        "Records an experiment tracker refused, passed over"
    );
    describe_gauge!(
        "sebulba_tracker_behind",
        "Records read from the run directory, not yet delivered"
    );
}

impl Tracking {
    /// The run is over: each tracker delivers the rest and records the end
    /// (summary, weights, status), giving up after `wait` (what it did not
    /// deliver stays in the files, for `sebulba track` to send later).
    pub fn finish(self, wait: Duration) -> Vec<Outcome> {
        self.stop(Stop {
            deadline: Instant::now() + wait,
            finish: true,
        })
    }

    /// Stops following without recording the end (the run goes on
    /// elsewhere, or will be resumed): what was delivered is saved, and a
    /// later tracker goes on from there.
    pub fn leave(self) -> Vec<Outcome> {
        self.stop(Stop {
            deadline: Instant::now(),
            finish: false,
        })
    }

    fn stop(self, stop: Stop) -> Vec<Outcome> {
        for (_, tx, _) in &self.workers {
            let _ = tx.send(stop);
        }
        self.workers
            .into_iter()
            .map(|(name, _, t)| {
                t.join().unwrap_or_else(|_| Outcome {
                    tracker: name,
                    ..Outcome::default()
                })
            })
            .collect()
    }
}

struct Worker {
    sink: Box<dyn Sink>,
    run: RunInfo,
    name: String,
    /// `None` once the other end is gone.
    rx: Option<Receiver<Stop>>,
    /// Wait for the run to be opened after this time (see [`start`]).
    opened_after: Option<SystemTime>,
    state: State,
    follower: Follower,
    /// Read, not yet delivered: the records and where each was read up to.
    pending: VecDeque<Record>,
    marks: VecDeque<Mark>,
    outcome: Outcome,
    /// When delivery started failing, and when that was last said.
    failing: Option<(Instant, Instant)>,
    backoff: Duration,
}

impl Worker {
    fn new(sink: Box<dyn Sink>, run: RunInfo, name: String, rx: Receiver<Stop>) -> Self {
        let mut state = State::load(&run.dir, &name);
        let origin = *state
            .origin
            .get_or_insert_with(|| crate::follow::now_ms() as f64 / 1000.0 - run_seconds(&run.dir));
        // A run resumed after its end was recorded: a new segment.
        state.finished = false;
        let follower = Follower::new(&run.dir, &state.files, state.params_sent, origin);
        let outcome = Outcome {
            tracker: name.clone(),
            ..Outcome::default()
        };
        Self {
            sink,
            run,
            name,
            rx: Some(rx),
            opened_after: None,
            state,
            follower,
            pending: VecDeque::new(),
            marks: VecDeque::new(),
            outcome,
            failing: None,
            backoff: Duration::ZERO,
        }
    }

    fn run(mut self) -> Outcome {
        let mut stop: Option<Stop> = None;
        let mut opened = false;
        loop {
            let wait = if self.failing.is_some() {
                self.backoff
            } else {
                POLL
            };
            let wait = stop.map_or(wait, |s| {
                wait.min(s.deadline.saturating_duration_since(Instant::now()))
            });
            match self.rx.as_ref().map(|rx| rx.recv_timeout(wait)) {
                Some(Ok(s)) => stop = Some(s),
                Some(Err(RecvTimeoutError::Timeout)) => {}
                // Dropped: after a stop, or unstopped (the run's process is
                // ending, so stop at once).
                Some(Err(RecvTimeoutError::Disconnected)) => {
                    self.rx = None;
                    stop = stop.or(Some(Stop {
                        deadline: Instant::now(),
                        finish: false,
                    }));
                }
                None => std::thread::sleep(wait),
            }
            let late = stop.is_some_and(|s| Instant::now() >= s.deadline);
            if late && stop.is_some_and(|s| !s.finish) {
                self.save();
                break;
            }
            if !opened && self.run_is_open() {
                opened = self.open();
            }
            let drained = opened && self.read_and_deliver();
            if drained && stop.is_some_and(|s| s.finish) && self.finish() {
                break;
            }
            if late {
                self.give_up();
                break;
            }
        }
        gauge!("sebulba_tracker_behind", "tracker" => self.name.clone()).set(0.0);
        self.outcome
    }

    fn open(&mut self) -> bool {
        match self.sink.open(&self.run, self.state.remote.as_ref()) {
            Ok(remote) => {
                self.state.remote = Some(remote);
                self.save();
                info!(tracker = %self.name, run = %self.run.name, "tracking the run");
                self.recovered();
                true
            }
            Err(e) => {
                self.failed(&e);
                false
            }
        }
    }

    /// Reads what is new and delivers all it can; true when nothing is left
    /// to deliver.
    fn read_and_deliver(&mut self) -> bool {
        loop {
            if self.pending.len() < AHEAD {
                match self.follower.poll(AHEAD - self.pending.len()) {
                    Ok(new) => {
                        for (r, m) in new {
                            self.pending.push_back(r);
                            self.marks.push_back(m);
                        }
                    }
                    // Not drained: a file that cannot be read now may hold
                    // lines, so the end must not be recorded yet.
                    Err(e) => {
                        self.failed(&e);
                        if self.pending.is_empty() {
                            return false;
                        }
                    }
                }
            }
            gauge!("sebulba_tracker_behind", "tracker" => self.name.clone())
                .set(self.pending.len() as f64);
            if self.pending.is_empty() {
                return true;
            }
            if !self.deliver() {
                return false;
            }
        }
    }

    /// Delivers pending records until none is left or one fails to go.
    fn deliver(&mut self) -> bool {
        while !self.pending.is_empty() {
            let done = match self.sink.send(&self.run, self.pending.make_contiguous()) {
                Ok(n) => {
                    self.outcome.delivered += n as u64;
                    counter!("sebulba_tracker_records_total", "tracker" => self.name.clone())
                        .increment(n as u64);
                    self.recovered();
                    n.max(1)
                }
                Err(TrackError::Refused(e)) => {
                    self.refused(&e);
                    1
                }
                Err(e) => {
                    self.failed(&e);
                    self.save();
                    return false;
                }
            };
            let done = done.min(self.pending.len());
            self.pending.drain(..done);
            for mark in self.marks.drain(..done) {
                self.state.delivered(&mark);
            }
        }
        self.save();
        true
    }

    /// Records the end of the run; true once done.
    fn finish(&mut self) -> bool {
        let end = End::of_run(&self.run.dir);
        match self.sink.finish(&self.run, &end) {
            Ok(()) => {
                self.state.finished = true;
                self.outcome.finished = true;
                self.save();
                info!(tracker = %self.name, delivered = self.outcome.delivered, refused = self.outcome.refused, errors = self.outcome.errors, "tracker finished the run");
                true
            }
            Err(TrackError::Refused(e)) => {
                // Refused for good: the end cannot be recorded; say so and stop.
                self.refused(&e);
                true
            }
            Err(e) => {
                self.failed(&e);
                false
            }
        }
    }

    /// Whether the run directory is ready to be read (see [`start`]).
    fn run_is_open(&self) -> bool {
        let Some(after) = self.opened_after else {
            return true;
        };
        std::fs::metadata(self.run.dir.join("config.toml"))
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= after)
    }

    /// The end could not be recorded in time: the rest is left for later.
    fn give_up(&mut self) {
        self.save();
        warn!(
            tracker = %self.name,
            delivered = self.outcome.delivered,
            "tracker stopped before delivering everything: the rest stays in the run directory; `sebulba track {} --track ...` sends it",
            self.run.dir.display()
        );
    }

    fn save(&self) {
        if let Err(e) = self.state.save(&self.run.dir, &self.name) {
            warn!(tracker = %self.name, "saving what the tracker delivered: {e}");
        }
    }

    fn refused(&mut self, e: &str) {
        self.outcome.errors += 1;
        self.outcome.refused += 1;
        counter!("sebulba_tracker_errors_total", "tracker" => self.name.clone()).increment(1);
        counter!("sebulba_tracker_refused_total", "tracker" => self.name.clone()).increment(1);
        warn!(tracker = %self.name, "the tracker refused a record, passed over: {e}");
    }

    fn failed(&mut self, e: &TrackError) {
        self.outcome.errors += 1;
        counter!("sebulba_tracker_errors_total", "tracker" => self.name.clone()).increment(1);
        let now = Instant::now();
        self.backoff = (self.backoff * 2).clamp(Duration::from_secs(1), MAX_BACKOFF);
        match &mut self.failing {
            None => {
                warn!(tracker = %self.name, "tracker failing, training goes on; retrying: {e}");
                self.failing = Some((now, now));
            }
            Some((since, said)) if now.duration_since(*said) >= REPEAT_WARNING => {
                warn!(tracker = %self.name, failing_for_s = now.duration_since(*since).as_secs(), "tracker still failing: {e}");
                *said = now;
            }
            Some(_) => {}
        }
    }

    fn recovered(&mut self) {
        if let Some((since, _)) = self.failing.take() {
            info!(tracker = %self.name, after_s = since.elapsed().as_secs(), "tracker reachable again");
        }
        self.backoff = Duration::ZERO;
    }
}

impl End {
    /// The end as the run directory tells it: `summary.json` (whether the
    /// run completed, or stopped on an error) and the files to keep.
    pub fn of_run(dir: &Path) -> End {
        let summary: Option<serde_json::Value> = std::fs::read(dir.join("summary.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let ending = match &summary {
            Some(s) if s["completed"] == true => Ending::Finished,
            Some(s) if !s["stopped_by_error"].is_null() => Ending::Failed,
            _ => Ending::Stopped,
        };
        let files = [
            "final.safetensors",
            "best.safetensors",
            "summary.json",
            "config.toml",
        ]
        .into_iter()
        .map(PathBuf::from)
        .filter(|f| dir.join(f).is_file())
        .collect();
        End {
            ending,
            summary,
            files,
        }
    }
}

#[cfg(test)]
mod tests;
