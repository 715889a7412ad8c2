//! Tokens and TLS through the real binary: a param-server and a learner run with
//! TLS and all three tokens; a real gRPC client (over TLS) is refused on every
//! RPC without a token, with an unknown one, and with a token of the wrong role;
//! an actor with a wrong token exits with a clear error; then a correctly
//! credentialed actor and evaluator finish a run end to end over TLS.

// Each test is one scenario, read top to bottom.
#![allow(clippy::too_many_lines)]

mod common;

use common::{
    actor, assert_accounted, bin, evaluator, exits_ok, learner, param_server, read_json,
    read_jsonl, run_dir,
};
use sebulba_proto::learner_client::LearnerClient;
use sebulba_proto::parameter_server_client::ParameterServerClient;
use sebulba_proto::{
    EvalReport, JoinRequest, LatestRequest, ListEvalsRequest, PROTOCOL_VERSION, PastRequest, Role,
    VersionRequest, WatchRequest, Weights,
};
use sebulba_transport::grpc::{MAX_MESSAGE_BYTES, channel};
use sebulba_transport::security::{Class, Security, Tls, Tokens};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tonic::Code;

const ACTOR: &str = "actor-token-3f9a1c77e2b04d51";
const LEARNER: &str = "learner-token-8c2e44a0b91f6d03";
const READ: &str = "read-token-51d7b2c9e0a84f66";
/// What a compose deployment sets (each service gets a subset).
const ALL: [(&str, &str); 3] = [
    ("SEBULBA_ACTOR_TOKEN", ACTOR),
    ("SEBULBA_LEARNER_TOKEN", LEARNER),
    ("SEBULBA_READ_TOKEN", READ),
];

/// A CA and a server certificate it signed for 127.0.0.1 and localhost, made
/// by `sebulba certs` as a user would.
fn write_certs(dir: &Path) {
    let out = bin()
        .args(["certs", "--names", "127.0.0.1,localhost", "--out"])
        .arg(dir)
        .output()
        .expect("sebulba certs");
    assert!(out.status.success(), "sebulba certs: {out:?}");
}

/// The same environment variables a compose deployment sets.
fn secured(c: &mut Command, dir: &Path, tokens: &[(&str, &str)]) {
    c.env("SEBULBA_TLS_CERT", dir.join("server.pem"))
        .env("SEBULBA_TLS_KEY", dir.join("server.key"))
        .env("SEBULBA_TLS_CA", dir.join("ca.pem"));
    for (var, value) in tokens {
        c.env(var, value);
    }
}

fn client_security(dir: &Path, tokens: Tokens) -> Security {
    let tls = Tls::load(None, None, Some(&dir.join("ca.pem")), None).expect("ca");
    Security::new(tokens, tls).expect("security")
}

fn as_class(class: Class, token: &str) -> Tokens {
    let mut t = Tokens::default();
    match class {
        Class::Actor => t.actor = Some(token.into()),
        Class::Learner => t.learner = Some(token.into()),
        Class::ReadOnly => t.read_only = Some(token.into()),
    }
    t
}

/// Every RPC of both services, called as `class` presenting `token` (or none).
/// Returns (rpc, status code) for each.
async fn call_everything(
    dir: &Path,
    ps: &str,
    learner: &str,
    who: Option<(Class, &str)>,
) -> Vec<(&'static str, Code)> {
    let (tokens, class) = match who {
        Some((c, t)) => (as_class(c, t), Some(c)),
        None => (Tokens::default(), None),
    };
    let sec = client_security(dir, tokens);
    let mut p = ParameterServerClient::new(channel(ps, &sec, class).expect("ps channel"))
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    let mut l = LearnerClient::new(channel(learner, &sec, class).expect("learner channel"));
    let code = |r: Result<(), tonic::Status>| r.err().map_or(Code::Ok, |s| s.code());
    // Requests that pass the gate are still refused by validation (empty
    // weights, a NaN score), so the probes leave the run untouched.
    let weights = Weights {
        version: 1_000_000,
        ..Default::default()
    };
    let report = EvalReport {
        return_mean: f64::NAN,
        ..Default::default()
    };
    let join = |role: Role| JoinRequest {
        protocol_version: PROTOCOL_VERSION,
        name: "probe".into(),
        role: role as i32,
    };
    vec![
        ("Publish", code(p.publish(weights).await.map(|_| ()))),
        (
            "Latest",
            code(p.latest(LatestRequest::default()).await.map(|_| ())),
        ),
        ("Watch", code(p.watch(WatchRequest {}).await.map(|_| ()))),
        ("ReportEval", code(p.report_eval(report).await.map(|_| ()))),
        (
            "ListEvals",
            code(p.list_evals(ListEvalsRequest::default()).await.map(|_| ())),
        ),
        (
            "PastVersions",
            code(p.past_versions(PastRequest::default()).await.map(|_| ())),
        ),
        (
            // Let through, it names no run held: that refusal counts as passing.
            "Version",
            match code(p.version(VersionRequest::default()).await.map(|_| ())) {
                Code::FailedPrecondition => Code::Ok,
                c => c,
            },
        ),
        (
            "Join(actor)",
            code(l.join(join(Role::Actor)).await.map(|_| ())),
        ),
        (
            "Join(evaluator)",
            code(l.join(join(Role::Evaluator)).await.map(|_| ())),
        ),
        (
            "StreamTrajectories",
            code(
                l.stream_trajectories(tokio_stream::empty())
                    .await
                    .map(|_| ()),
            ),
        ),
        ("Reflection(ps)", code(reflect(ps, &sec, class).await)),
        (
            "Reflection(learner)",
            code(reflect(learner, &sec, class).await),
        ),
    ]
}

async fn reflect(url: &str, sec: &Security, class: Option<Class>) -> Result<(), tonic::Status> {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::{ServerReflectionRequest, server_reflection_response};
    let mut c = ServerReflectionClient::new(channel(url, sec, class).expect("channel"));
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = c
        .server_reflection_info(tokio_stream::iter([req]))
        .await?
        .into_inner();
    match stream.message().await?.and_then(|r| r.message_response) {
        Some(server_reflection_response::MessageResponse::ListServicesResponse(_)) => Ok(()),
        other => Err(tonic::Status::internal(format!("unexpected {other:?}"))),
    }
}

/// RPCs whose answer for a class differs from plain success.
type Special = [(&'static str, Code); 4];

fn expect(got: &[(&str, Code)], want: impl Fn(&str) -> Code, who: &str) {
    for (rpc, code) in got {
        assert_eq!(*code, want(rpc), "{who}: {rpc} answered {code:?}");
    }
}

#[test]
fn tokens_are_checked_per_role_on_every_rpc_and_a_run_finishes_over_tls() {
    let dir = run_dir("security");
    write_certs(&dir);
    let run = dir.join("run");
    let secure = |tokens: &'static [(&'static str, &'static str)]| {
        let dir = dir.clone();
        move |c: &mut Command| secured(c, &dir, tokens)
    };
    let (ps, ps_port) = param_server(&dir, "param-server", "127.0.0.1:0", secure(&ALL));
    let ps_url = format!("https://127.0.0.1:{ps_port}");
    let args = [
        "--set",
        "run.total_steps=12000",
        "--set",
        "eval.interval=1000",
    ];
    let (mut learner, port) = learner(
        &dir,
        "learner",
        "127.0.0.1:0",
        &ps_url,
        &run,
        &args,
        secure(&ALL),
    );
    let learner_url = format!("https://127.0.0.1:{port}");

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    // Health needs no token (probes carry none) but does need TLS.
    for url in [&ps_url, &learner_url] {
        let ok = bin()
            .args(["health", "--addr", url, "--tls-ca"])
            .arg(dir.join("ca.pem"))
            .output()
            .expect("health");
        assert!(ok.status.success(), "health over TLS: {ok:?}");
        let plain = url.replace("https://", "http://");
        let refused = bin()
            .args(["health", "--addr", &plain])
            .output()
            .expect("health");
        assert!(!refused.status.success(), "plain text reached a TLS server");
    }

    rt.block_on(async {
        let (ps, l) = (ps_url.as_str(), learner_url.as_str());
        let got = call_everything(&dir, ps, l, None).await;
        expect(&got, |_| Code::Unauthenticated, "no token");
        let got =
            call_everything(&dir, ps, l, Some((Class::Actor, "not-a-token-of-this-run"))).await;
        expect(&got, |_| Code::Unauthenticated, "unknown token");

        // Right token, wrong role: PermissionDenied. Reads are open to every class;
        // a call let through meets validation (InvalidArgument) or succeeds.
        use Code::{InvalidArgument as Invalid, Ok as Fine, PermissionDenied as Denied};
        let table: [(Class, &str, Special); 3] = [
            (
                Class::Actor,
                ACTOR,
                [
                    ("Publish", Denied),
                    ("ReportEval", Denied),
                    ("", Fine),
                    ("", Fine),
                ],
            ),
            (
                Class::ReadOnly,
                READ,
                [
                    ("Publish", Denied),
                    ("ReportEval", Invalid),
                    ("Join(actor)", Denied),
                    ("StreamTrajectories", Denied),
                ],
            ),
            (
                Class::Learner,
                LEARNER,
                [
                    ("Publish", Invalid),
                    ("ReportEval", Denied),
                    ("Join(actor)", Denied),
                    ("StreamTrajectories", Denied),
                ],
            ),
        ];
        for (class, token, special) in table {
            let got = call_everything(&dir, ps, l, Some((class, token))).await;
            let latest = got[1].1;
            assert!(
                matches!(latest, Code::Ok | Code::NotFound),
                "{class:?}: Latest {latest:?}"
            );
            let learner_denied = class == Class::Learner;
            expect(
                &got,
                |rpc| match special.iter().find(|(r, _)| *r == rpc) {
                    Some((_, c)) => *c,
                    None if rpc == "Latest" => latest,
                    None if rpc == "Join(evaluator)" && learner_denied => Denied,
                    None => Fine,
                },
                class.name(),
            );
        }
    });
    assert!(
        !ps.log_text().contains(ACTOR) && !learner.log_text().contains(ACTOR),
        "a token was logged"
    );
    assert!(
        ps.log_text().contains("call refused"),
        "refusals are logged"
    );

    // An actor with a wrong token gives up at once with a clear error.
    const WRONG: [(&str, &str); 1] = [("SEBULBA_ACTOR_TOKEN", "guessed-token-0000000000")];
    let mut intruder = actor(&dir, "intruder", &learner_url, &ps_url, secure(&WRONG));
    let status = intruder
        .wait(Duration::from_secs(30))
        .expect("the intruder should exit");
    assert!(!status.success(), "intruder exited 0");
    assert!(
        intruder.log_text().contains("Unauthenticated"),
        "intruder log: {}",
        intruder.log_text()
    );

    // The run itself, over TLS with the right tokens.
    let mut actor = actor(&dir, "a0", &learner_url, &ps_url, secure(&ALL[..1]));
    let mut evaluator = evaluator(&dir, &ps_url, &run, secure(&ALL[2..]));
    exits_ok(&mut learner, Duration::from_secs(300));
    exits_ok(&mut actor, Duration::from_secs(60));
    exits_ok(&mut evaluator, Duration::from_secs(60));
    let summary = read_json(&run.join("summary.json"));
    assert_accounted(&summary);
    assert!(
        summary["env_steps"].as_u64().unwrap_or(0) >= 12_000,
        "{summary}"
    );
    let evals = read_jsonl(&run.join("eval.jsonl"));
    assert!(
        evals.iter().any(|e| e["final"] == true),
        "the evaluator scored the final version over TLS: {evals:?}"
    );
    assert!(
        summary["final_eval_return_mean"].is_number(),
        "the learner read the evaluator's score back: {summary}"
    );
}
