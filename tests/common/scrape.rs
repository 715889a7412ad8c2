//! A Prometheus scrape, parsed: what `tests/metrics.rs` and the cluster tests
//! read the roles' `/metrics` endpoints with.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::time::Duration;

/// One scrape: `name{label="v",...}` (labels sorted) → value, and the
/// response's content type.
pub struct Scrape {
    pub content_type: String,
    pub samples: HashMap<String, f64>,
}

impl Scrape {
    /// `GET http://host:port/metrics`; panics unless it answers 200.
    pub fn get(host: &str, port: u16) -> Scrape {
        let (head, body) = http_get(host, port, "/metrics")
            .unwrap_or_else(|e| panic!("GET {host}:{port}/metrics: {e}"));
        assert!(
            head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
            "{head}"
        );
        let content_type = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-type:")
                    .map(|v| v.trim().to_string())
            })
            .unwrap_or_default();
        let samples = body
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').expect("`series value`");
                (canonical(series), value.parse::<f64>().expect("a number"))
            })
            .collect();
        Scrape {
            content_type,
            samples,
        }
    }

    /// The value of `name` with exactly `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.lookup(name, labels)
            .unwrap_or_else(|| panic!("no series {name} {labels:?} in the scrape"))
    }

    /// The same, None when the series is not (yet) there.
    pub fn lookup(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let key = key(
            name,
            labels
                .iter()
                .map(|&(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        self.samples.get(&key).copied()
    }

    /// The sum of `name` over every label set.
    pub fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|(k, _)| k.split('{').next() == Some(name))
            .map(|(_, v)| v)
            .sum()
    }

    /// The metric names present (`name` of every `name{...}`).
    pub fn names(&self) -> std::collections::BTreeSet<String> {
        self.samples
            .keys()
            .filter_map(|k| k.split('{').next())
            .map(str::to_string)
            .collect()
    }
}

/// `GET path` over HTTP/1.0 (so the answer is neither chunked nor kept
/// alive): the response's head and body.
pub fn http_get(host: &str, port: u16, path: &str) -> std::io::Result<(String, String)> {
    let mut s = std::net::TcpStream::connect((host, port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {text}")))?;
    Ok((head.to_string(), body.to_string()))
}

fn key(name: &str, labels: BTreeMap<String, String>) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// `name{b="2",a="1"}` → `name{a="1",b="2"}`.
fn canonical(series: &str) -> String {
    let Some((name, rest)) = series.split_once('{') else {
        return key(series, BTreeMap::new());
    };
    let labels = rest
        .trim_end_matches('}')
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').expect("label=value");
            (k.to_string(), v.trim_matches('"').to_string())
        })
        .collect();
    key(name, labels)
}
