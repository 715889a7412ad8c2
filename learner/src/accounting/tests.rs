//! The accounting's identity through every transition, folding and resuming.

use super::*;

#[test]
fn identity_holds_through_every_transition() {
    let a = Accounting::default();
    a.queued("a", &ActorTime::default());
    a.queued("a", &ActorTime::default());
    a.queued("b", &ActorTime::default());
    a.rejected("b", "shape");
    a.arrived_after_finish("b");
    a.dequeued("a", Outcome::Used(256));
    a.dequeued("a", Outcome::DroppedStale);
    let snap = a.snapshot();
    let (t, per) = (&snap.total, &snap.per_actor);
    assert!(snap.balanced(), "{snap:?}");
    assert_eq!(
        (
            t.received,
            t.used,
            t.dropped_stale,
            t.rejected,
            t.queued,
            t.dropped_shutdown
        ),
        (5, 1, 1, 1, 1, 1)
    );
    assert_eq!(per["b"].rejected_by_reason["shape"], 1);
    assert_eq!((t.env_steps_used, per["a"].env_steps_used), (256, 256));
    assert_eq!(per["b"].env_steps_used, 0);
    // A resumed run goes on from the saved counts; what was queued died.
    let resumed = Accounting::default();
    resumed.restore(&a.saved(), 256);
    let r = resumed.snapshot();
    assert_eq!(
        (r.total.received, r.total.queued, r.total.dropped_shutdown),
        (5, 0, 2)
    );
    assert!(r.balanced(), "{r:?}");
}

#[test]
fn forgotten_actors_fold_into_one_entry_once_nothing_of_theirs_is_queued() {
    let a = Accounting::default();
    let time = ActorTime {
        wall_seconds: 1.5,
        ..Default::default()
    };
    for actor in ["x", "y", "z"] {
        a.queued(actor, &time);
        a.dequeued(actor, Outcome::Used(10));
    }
    a.rejected("x", "shape");
    a.stream_broken("y", "transport");
    a.queued("z", &time);
    // x and y go at once; z waits for its queued batch.
    a.fold(&["x".into(), "y".into(), "z".into(), "never-sent".into()]);
    let s = a.snapshot();
    assert!(s.balanced(), "{s:?}");
    assert_eq!(s.per_actor.keys().collect::<Vec<_>>(), ["z"]);
    assert_eq!(s.departed.actors, 2);
    let d = &s.departed.batches;
    assert_eq!((d.received, d.used, d.rejected), (3, 2, 1));
    assert_eq!(d.env_steps_used, 20);
    assert_eq!(d.rejected_by_reason["shape"], 1);
    assert_eq!(d.streams_broken_by_reason["transport"], 1);
    assert_eq!(d.actor_time.wall_seconds, 3.0);
    a.dequeued("z", Outcome::DroppedStale);
    let s = a.snapshot();
    assert!(s.balanced(), "{s:?}");
    assert!(s.per_actor.is_empty());
    assert_eq!((s.departed.actors, s.departed.batches.received), (3, 5));
    assert_eq!(s.departed.batches.dropped_stale, 1);
    assert_eq!(s.total.outcomes(), s.departed.batches.outcomes());
    // A resumed run keeps the folded entry, and folds the saved actors
    // past `kept` (their actors join it afresh).
    a.queued("p", &time);
    a.queued("q", &time);
    let resumed = Accounting::default();
    resumed.restore(&a.saved(), 1);
    let r = resumed.snapshot();
    assert!(r.balanced(), "{r:?}");
    assert_eq!(r.per_actor.keys().collect::<Vec<_>>(), ["q"]);
    assert_eq!(r.departed.actors, 4);
    assert_eq!(r.total.dropped_shutdown, 2, "the queued batches died");
}

#[test]
fn the_per_actor_series_follow_the_table() {
    let a = Accounting::default();
    a.queued("a#0.1", &ActorTime::default());
    a.dequeued("a#0.1", Outcome::Used(1));
    a.rejected("b\"x", "shape");
    a.fold(&["a#0.1".into()]);
    let mut text = String::new();
    a.render_per_actor(&mut text);
    assert!(text.contains("# TYPE sebulba_learner_actor_batches_total counter\n"));
    assert!(
        !text.contains("a#0.1"),
        "a forgotten actor's series go: {text}"
    );
    assert!(
        text.contains(
            "sebulba_learner_actor_batches_total{actor=\"departed\",outcome=\"used\"} 1\n"
        )
    );
    assert!(
        text.contains(
            "sebulba_learner_actor_batches_total{actor=\"b\\\"x\",outcome=\"rejected\"} 1\n"
        ),
        "{text}"
    );
}
