//! A local run's actor child processes (`run.local_actors_as = "processes"`)
//! as their supervisor sees them: each slot's processes, restarts, memory
//! and, for a slot given up, its last failure. The supervisor (the binary's
//! `local::children`) writes this table and the summary reads it, so
//! `summary.json` gives the run's memory and failures, not only the learner
//! process's.

use sebulba_core::config::OnActorGiveUp;
use serde::Serialize;
use std::sync::Mutex;

/// One actor slot: the processes started for it, one after another.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ChildReport {
    pub name: String,
    /// Every process started for the slot, first to last.
    pub pids: Vec<u32>,
    pub restarts: u32,
    /// The largest peak resident size among the slot's processes, MiB (the
    /// kernel's: `VmHWM` while one runs, `ru_maxrss` once it is reaped).
    pub peak_rss_mib: f64,
    /// Resident now, MiB (0 when none runs).
    pub rss_mib: f64,
    /// Died more than `run.actor_restarts` times and was not started again.
    pub given_up: bool,
    /// How its latest process failed (`exit code 3`, `signal 9 (SIGKILL)`)
    /// and the last line it wrote to stderr; None while none has failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
}

/// What `summary.json` says of the actor processes (`actor_processes`).
#[derive(Clone, Debug, Serialize)]
pub struct ProcessesReport {
    /// `run.on_actor_give_up` as the run had it.
    pub on_give_up: OnActorGiveUp,
    /// `run.actor_restarts`.
    pub max_restarts: u32,
    pub children: Vec<ChildReport>,
    /// The slots given up, by name.
    pub given_up: Vec<String>,
    /// The slots' peaks added up, MiB: what the children hold if they peak
    /// together (an upper bound on their peak at any one moment).
    pub peak_rss_mib: f64,
    /// Resident now, all children together, MiB.
    pub rss_mib: f64,
}

/// The table the supervisor writes and the learner reads.
pub struct ActorProcesses {
    on_give_up: OnActorGiveUp,
    max_restarts: u32,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    children: Vec<ChildReport>,
    failure: Option<String>,
}

impl ActorProcesses {
    pub fn new(on_give_up: OnActorGiveUp, max_restarts: u32) -> Self {
        Self {
            on_give_up,
            max_restarts,
            state: Mutex::default(),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        // A panic elsewhere while holding the lock must not lose the table.
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn on_give_up(&self) -> OnActorGiveUp {
        self.on_give_up
    }

    pub fn max_restarts(&self) -> u32 {
        self.max_restarts
    }

    /// The supervisor's latest view of every slot.
    pub fn update(&self, children: Vec<ChildReport>) {
        self.with(|s| s.children = children);
    }

    /// The run must end for its actors: why (the first reason given wins).
    pub fn fail(&self, reason: String) {
        self.with(|s| {
            s.failure.get_or_insert(reason);
        });
    }

    /// Why the actors ended the run, if they did.
    pub fn failure(&self) -> Option<String> {
        self.with(|s| s.failure.clone())
    }

    pub fn report(&self) -> ProcessesReport {
        let children = self.with(|s| s.children.clone());
        ProcessesReport {
            on_give_up: self.on_give_up,
            max_restarts: self.max_restarts,
            given_up: children
                .iter()
                .filter(|c| c.given_up)
                .map(|c| c.name.clone())
                .collect(),
            peak_rss_mib: children.iter().map(|c| c.peak_rss_mib).sum(),
            rss_mib: children.iter().map(|c| c.rss_mib).sum(),
            children,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_adds_the_slots_up_and_keeps_the_first_failure() {
        let t = ActorProcesses::new(OnActorGiveUp::Continue, 3);
        let child = |name: &str, peak, rss, given_up| ChildReport {
            name: name.into(),
            peak_rss_mib: peak,
            rss_mib: rss,
            given_up,
            ..Default::default()
        };
        t.update(vec![
            child("a", 10.0, 8.0, false),
            child("b", 30.5, 0.0, true),
        ]);
        let r = t.report();
        assert_eq!((r.peak_rss_mib, r.rss_mib), (40.5, 8.0));
        assert_eq!(r.given_up, ["b"]);
        assert_eq!((r.on_give_up, r.max_restarts), (OnActorGiveUp::Continue, 3));
        assert_eq!(t.failure(), None);
        t.fail("first".into());
        t.fail("second".into());
        assert_eq!(t.failure().as_deref(), Some("first"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["on_give_up"], "continue");
        assert!(json["children"][0].get("last_failure").is_none());
    }
}
