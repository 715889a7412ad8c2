use super::*;

fn w(version: u64) -> Weights {
    on("run-a", version)
}

fn on(run: &str, version: u64) -> Weights {
    Weights {
        version,
        run_id: run.into(),
        safetensors: tensors(&[0.5, -1.0]).into(),
        ..Default::default()
    }
}

/// A safetensors file with one f32 tensor holding `values`.
fn tensors(values: &[f32]) -> Vec<u8> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let view =
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![values.len()], &bytes)
            .unwrap();
    safetensors::serialize([("w", view)], None).unwrap()
}

#[tokio::test]
async fn garbage_or_non_finite_weights_are_refused() {
    let svc = Service {
        store: Arc::new(Store::default()),
        gate: Gate::default(),
    };
    for (bytes, why) in [
        (vec![1u8, 2, 3], "garbage"),
        (tensors(&[1.0, f32::NAN]), "non-finite"),
        (tensors(&[f32::INFINITY]), "non-finite"),
    ] {
        let mut w = on("run-a", 1);
        w.safetensors = bytes.into();
        let e = svc.publish(Request::new(w)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{why}");
        assert!(
            e.message().contains("`safetensors`"),
            "{why}: {}",
            e.message()
        );
    }
    assert!(svc.store.latest().is_none());
}

/// A publish's `trace_context` within W3C Trace Context's limits, or
/// refused naming the field: followers and the evaluator parent their
/// spans on it.
#[tokio::test]
async fn a_trace_context_past_w3c_limits_is_refused() {
    let svc = Service {
        store: Arc::new(Store::default()),
        gate: Gate::default(),
    };
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for (key, value) in [
        ("padding", "x".repeat(100_000)),
        ("traceparent", parent.repeat(3)),
        ("tracestate", "k=".to_string() + &"v".repeat(600)),
    ] {
        let mut w = on("run-a", 1);
        w.trace_context.insert(key.into(), value);
        let e = svc.publish(Request::new(w)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{key}");
        assert!(
            e.message().contains("`trace_context`"),
            "{key}: {}",
            e.message()
        );
        assert!(
            e.message().len() < 300,
            "the value is not echoed: {}",
            e.message()
        );
    }
    assert!(svc.store.latest().is_none());
    let mut w = on("run-a", 1);
    w.trace_context.insert("traceparent".into(), parent.into());
    assert!(svc.publish(Request::new(w)).await.is_ok());
}

#[tokio::test]
async fn versions_only_move_forward_and_watchers_get_the_current_one_first() {
    let svc = Service {
        store: Arc::new(Store::default()),
        gate: Gate::default(),
    };
    assert_eq!(
        svc.latest(Request::new(LatestRequest::default()))
            .await
            .unwrap_err()
            .code(),
        tonic::Code::NotFound
    );
    svc.publish(Request::new(w(0))).await.unwrap();
    svc.publish(Request::new(w(1))).await.unwrap();
    let e = svc.publish(Request::new(w(1))).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    assert!(e.message().contains("`version`"));
    let mut stream = svc
        .watch(Request::new(WatchRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stream.next().await.unwrap().unwrap().version, 1);
    svc.publish(Request::new(w(5))).await.unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap().version, 5);
    // A hijack: far ahead of the run, or beyond any sane version.
    for (v, code) in [
        (5 + MAX_VERSION_JUMP + 1, tonic::Code::FailedPrecondition),
        (u64::MAX, tonic::Code::InvalidArgument),
    ] {
        let e = svc.publish(Request::new(w(v))).await.unwrap_err();
        assert_eq!(e.code(), code, "{}", e.message());
        assert!(e.message().contains("field `version`"), "{}", e.message());
    }
    let latest = |without_weights| svc.latest(Request::new(LatestRequest { without_weights }));
    let full = latest(false).await.unwrap().into_inner();
    assert_eq!((full.version, full.run_id.as_str()), (5, "run-a"));
    assert_eq!(full.safetensors, w(5).safetensors);
    let bare = latest(true).await.unwrap().into_inner();
    let expect = Weights {
        safetensors: Default::default(),
        ..full
    };
    assert_eq!(bare, expect, "all but the weights");
    assert!(svc.store.versions.len() as u64 <= store::KEEP_VERSIONS + 1);
    let empty = Weights {
        version: 9,
        ..Default::default()
    };
    assert_eq!(
        svc.publish(Request::new(empty)).await.unwrap_err().code(),
        tonic::Code::InvalidArgument
    );
    // An exploration rate outside [0, 1] (NaN included) is refused by name.
    for eps in [f32::NAN, -0.1, 1.5, f32::INFINITY] {
        let bad = Weights {
            epsilon: Some(eps),
            ..w(9)
        };
        let e = svc.publish(Request::new(bad)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(
            e.message().contains("field `epsilon`"),
            "{eps}: {}",
            e.message()
        );
    }
    let ok = Weights {
        epsilon: Some(0.25),
        ..w(6)
    };
    svc.publish(Request::new(ok)).await.unwrap();
    for bad in ["", "../up", ".hidden", "a/b"] {
        let e = svc.publish(Request::new(on(bad, 9))).await.unwrap_err();
        assert!(
            e.message().contains("field `run_id`"),
            "{bad}: {}",
            e.message()
        );
    }
}

#[tokio::test]
async fn a_new_run_starts_afresh_and_the_old_runs_reports_are_refused() {
    let svc = Service {
        store: Arc::new(Store::default()),
        gate: Gate::default(),
    };
    let report = |run: &str, version| EvalReport {
        version,
        run_id: run.into(),
        ..Default::default()
    };
    svc.publish(Request::new(on("old", 20))).await.unwrap();
    svc.report_eval(Request::new(report("old", 20)))
        .await
        .unwrap();
    // The new run's learner starts at version 0 on a server that held 20.
    svc.publish(Request::new(on("new", 0))).await.unwrap();
    assert_eq!(svc.store.latest().unwrap().run_id, "new");
    assert_eq!(svc.store.versions.len(), 1);
    let e = svc
        .report_eval(Request::new(report("old", 20)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    assert!(svc.store.reports("old", None).is_empty());
    assert!(svc.store.reports("new", None).is_empty());
    svc.report_eval(Request::new(report("new", 0)))
        .await
        .unwrap();
    assert_eq!(svc.store.reports("new", None).len(), 1);
}

#[tokio::test]
async fn eval_reports_are_listed_in_version_order() {
    let svc = Service {
        store: Arc::new(Store::default()),
        gate: Gate::default(),
    };
    svc.publish(Request::new(w(0))).await.unwrap();
    for v in [3u64, 1, 2] {
        svc.report_eval(Request::new(EvalReport {
            version: v,
            return_mean: v as f64,
            run_id: "run-a".into(),
            ..Default::default()
        }))
        .await
        .unwrap();
    }
    let nan = EvalReport {
        version: 4,
        return_mean: f64::NAN,
        ..Default::default()
    };
    assert_eq!(
        svc.report_eval(Request::new(nan)).await.unwrap_err().code(),
        tonic::Code::InvalidArgument
    );
    let list = svc
        .list_evals(Request::new(ListEvalsRequest {
            run_id: "run-a".into(),
            after_version: None,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        list.reports.iter().map(|r| r.version).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let after_1 = svc
        .list_evals(Request::new(ListEvalsRequest {
            run_id: "run-a".into(),
            after_version: Some(1),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        after_1
            .reports
            .iter()
            .map(|r| r.version)
            .collect::<Vec<_>>(),
        vec![2, 3]
    );
}

#[tokio::test]
async fn reports_are_bounded_and_listed_in_pages() {
    let store = Store::default();
    store.publish(w(0)).unwrap();
    let total = MAX_EVAL_REPORTS as u64 + 500;
    for v in 0..total {
        store
            .report(EvalReport {
                version: v,
                run_id: "run-a".into(),
                ..Default::default()
            })
            .unwrap();
    }
    // Paging from the start reads exactly the newest MAX_EVAL_REPORTS.
    let (mut read, mut after, mut pages) = (Vec::new(), None, 0);
    loop {
        let page = store.reports("run-a", after);
        assert!(page.len() <= MAX_LISTED_REPORTS);
        let Some(last) = page.last() else { break };
        after = Some(last.version);
        read.extend(page.iter().map(|r| r.version));
        pages += 1;
    }
    assert_eq!(read, (500..total).collect::<Vec<_>>());
    assert_eq!(pages, MAX_EVAL_REPORTS.div_ceil(MAX_LISTED_REPORTS));
}

#[tokio::test]
async fn a_games_matches_are_checked_field_by_field() {
    let svc = Service {
        store: Arc::new(Store::default()),
        gate: Gate::default(),
    };
    svc.publish(Request::new(w(0))).await.unwrap();
    let good = sebulba_proto::GameMatch {
        opponent: "greedy".into(),
        games: 10,
        wins: 4,
        win_rate_low: 0.17,
        win_rate_high: 0.69,
        mean_score: -1.5,
    };
    let broken = [
        sebulba_proto::GameMatch {
            wins: 11,
            ..good.clone()
        },
        sebulba_proto::GameMatch {
            win_rate_high: f64::NAN,
            ..good.clone()
        },
        sebulba_proto::GameMatch {
            win_rate_low: 0.8,
            ..good.clone()
        },
        sebulba_proto::GameMatch {
            mean_score: f64::INFINITY,
            ..good.clone()
        },
        sebulba_proto::GameMatch {
            opponent: "x".repeat(65),
            ..good.clone()
        },
    ];
    for (i, m) in broken.into_iter().enumerate() {
        let r = EvalReport {
            version: 4,
            run_id: "run-a".into(),
            matches: vec![good.clone(), m],
            ..Default::default()
        };
        let e = svc.report_eval(Request::new(r)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "case {i}");
        assert!(
            e.message().contains("matches[1]"),
            "case {i}: {}",
            e.message()
        );
    }
    let nine = EvalReport {
        version: 4,
        run_id: "run-a".into(),
        matches: vec![good.clone(); 9],
        ..Default::default()
    };
    assert!(svc.report_eval(Request::new(nine)).await.is_err());
}

#[tokio::test]
async fn a_reports_episode_counts_cut_and_cpu_time_are_checked_naming_the_field() {
    let svc = Service {
        store: Arc::new(Store::default()),
        gate: Gate::default(),
    };
    svc.publish(Request::new(w(0))).await.unwrap();
    let good = EvalReport {
        version: 1,
        run_id: "run-a".into(),
        episodes: 3,
        episodes_asked: 8,
        episodes_truncated: 1,
        cut_by: "max_steps".into(),
        cpu_seconds: 2.5,
        ..Default::default()
    };
    svc.report_eval(Request::new(good.clone())).await.unwrap();
    let broken = [
        (
            EvalReport {
                episodes: 9,
                ..good.clone()
            },
            "episodes",
        ),
        (
            EvalReport {
                episodes_truncated: 4,
                ..good.clone()
            },
            "episodes_truncated",
        ),
        (
            EvalReport {
                cut_by: "boredom".into(),
                ..good.clone()
            },
            "cut_by",
        ),
        (
            EvalReport {
                episodes: 8,
                ..good.clone()
            },
            "cut_by",
        ),
        (
            EvalReport {
                cpu_seconds: f64::NAN,
                ..good.clone()
            },
            "cpu_seconds",
        ),
        (
            EvalReport {
                cpu_seconds: -1.0,
                ..good.clone()
            },
            "cpu_seconds",
        ),
    ];
    for (r, field) in broken {
        let e = svc.report_eval(Request::new(r)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{field}");
        assert!(
            e.message().contains(&format!("`{field}`")),
            "{field}: {}",
            e.message()
        );
    }
    // An evaluator before the fields: nothing asked, nothing cut.
    let old = EvalReport {
        version: 2,
        run_id: "run-a".into(),
        episodes: 10,
        ..Default::default()
    };
    svc.report_eval(Request::new(old)).await.unwrap();
}

async fn listed(svc: &Service, run: &str) -> Vec<u64> {
    let request = Request::new(PastRequest { run_id: run.into() });
    svc.past_versions(request)
        .await
        .unwrap()
        .into_inner()
        .versions
}

async fn get(svc: &Service, run: &str, version: u64) -> Result<Response<Weights>, Status> {
    let run_id = run.into();
    svc.version(Request::new(VersionRequest { run_id, version }))
        .await
}

/// The self-play pool keeps the newest `past_keep` versions on the stride,
/// at most `MAX_PAST_VERSIONS`; `Version` serves them and the newest few,
/// refuses another run's and says NOT_FOUND for the rest; a publish with
/// `past_keep = 0` or a new run empties the pool.
#[tokio::test]
async fn the_past_pool_keeps_the_newest_versions_on_the_stride() {
    let svc = Service {
        store: Arc::new(Store::default()),
        gate: Default::default(),
    };
    let pooled = |v: u64, keep: u32| Weights {
        past_keep: keep,
        past_stride: 10,
        ..w(v)
    };
    for v in 0..=100 {
        svc.store.publish(pooled(v, 3)).unwrap();
    }
    assert_eq!(listed(&svc, "run-a").await, [80, 90, 100]);
    assert!(listed(&svc, "run-b").await.is_empty());
    assert_eq!(get(&svc, "run-a", 80).await.unwrap().get_ref().version, 80);
    assert_eq!(get(&svc, "run-a", 99).await.unwrap().get_ref().version, 99);
    assert_eq!(
        get(&svc, "run-a", 70).await.unwrap_err().code(),
        tonic::Code::NotFound
    );
    let other = get(&svc, "run-b", 80).await.unwrap_err();
    assert_eq!(other.code(), tonic::Code::FailedPrecondition);
    assert!(other.message().contains("`run_id`"), "{}", other.message());
    // A hostile past_keep is capped.
    for v in 101..=2000 {
        svc.store.publish(pooled(v, u32::MAX)).unwrap();
    }
    assert_eq!(listed(&svc, "run-a").await.len(), store::MAX_PAST_VERSIONS);
    svc.store.publish(pooled(2001, 0)).unwrap();
    assert!(listed(&svc, "run-a").await.is_empty());
    svc.store.publish(pooled(2010, 3)).unwrap();
    svc.store.publish(on("run-b", 0)).unwrap();
    assert!(listed(&svc, "run-b").await.is_empty());
}
