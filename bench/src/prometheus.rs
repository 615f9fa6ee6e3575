//! The production checks: `bench rules` writes them as a
//! Prometheus rules file, `bench triggers --prometheus URL` evaluates them on
//! a live Prometheus with instant queries (`GET /api/v1/query`). Both are
//! built from `bench_analysis::triggers::checks`; this module adds the flags'
//! parsing and the HTTP client.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bench_analysis::triggers::{
    Answer, Params, TriggerResult, WriteError, checks, exit_code, format_table, live_result,
    prom_duration, queries, render, write_triggers,
};
use fencepost_api::duration::parse_duration;

use crate::cli::{CheckArgs, RulesArgs};

/// A flag's value was refused (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("--{flag} {value:?}: {why}")]
pub struct BadFlag {
    /// The flag, without dashes.
    pub flag: &'static str,
    /// What was given.
    pub value: String,
    /// Why it is refused.
    pub why: String,
}

/// Why `bench rules` or `bench triggers --prometheus` failed; every one is bad
/// input (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum ChecksError {
    /// A flag's value was refused.
    #[error(transparent)]
    Flag(#[from] BadFlag),
    /// `--out` could not be written (the rules file, or the directory of
    /// `triggers.json`).
    #[error("--out {path}: cannot write")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Prometheus could not be asked (unreachable, not HTTP, a non-2xx answer).
    #[error("querying Prometheus at {url}")]
    Query {
        /// The query URL, with the query.
        url: String,
        /// The client's error.
        #[source]
        source: reqwest::Error,
    },
    /// Prometheus answered something other than a vector, or an error.
    #[error("Prometheus at {url} answered {query:?} with {why}")]
    Answer {
        /// The Prometheus base URL.
        url: String,
        /// The PromQL.
        query: String,
        /// What was wrong.
        why: String,
    },
    /// `triggers.json` could not be written.
    #[error(transparent)]
    Triggers(#[from] WriteError),
}

/// A duration flag.
fn duration(flag: &'static str, v: &str) -> Result<Duration, BadFlag> {
    let bad = |why: String| BadFlag {
        flag,
        value: v.to_owned(),
        why,
    };
    if v.trim_start().starts_with('-') {
        return Err(bad(
            "a duration cannot be negative; expected whole milliseconds, e.g. 10m".to_owned(),
        ));
    }
    let d = parse_duration(v).map_err(|e| bad(e.to_string()))?;
    if d.subsec_nanos() % 1_000_000 != 0 {
        return Err(bad("Prometheus durations are whole milliseconds".to_owned()));
    }
    Ok(d)
}

/// A duration flag that must be > 0.
fn positive(flag: &'static str, v: &str) -> Result<Duration, BadFlag> {
    let d = duration(flag, v)?;
    if d.is_zero() {
        return Err(BadFlag {
            flag,
            value: v.to_owned(),
            why: "must be greater than 0".to_owned(),
        });
    }
    Ok(d)
}

impl CheckArgs {
    /// The checks' parameters these flags give.
    pub fn params(&self) -> Result<Params, BadFlag> {
        let margin: f64 = self.margin.parse().map_err(|_| BadFlag {
            flag: "margin",
            value: self.margin.clone(),
            why: "not a number; margins are fractions like 0.3".to_owned(),
        })?;
        if !(0.0..1.0).contains(&margin) {
            return Err(BadFlag {
                flag: "margin",
                value: self.margin.clone(),
                why: "a margin must satisfy 0 <= m < 1".to_owned(),
            });
        }
        Ok(Params {
            lease: positive("lease", &self.lease)?,
            session_ttl: positive("session-ttl", &self.session_ttl)?,
            margin,
            hop: duration("hop", &self.hop)?,
            offset_max: duration("offset-max", &self.offset_max)?,
            window: positive("window", &self.window)?,
            selector: self.selector.trim().to_owned(),
        })
    }
}

/// `bench rules`: the rules file, to `--out` or stdout.
pub fn run_rules(args: &RulesArgs) -> Result<(), ChecksError> {
    let params = args.checks.params()?;
    let for_ = duration("for", &args.for_)?;
    let d4 = params.d4();
    if d4.usable_ms - d4.period_ms <= d4.hop_ms {
        eprintln!(
            "bench rules: note: with these parameters trigger 3 (d4_unsatisfiable) fires \
             whatever the RTT: usable {} ms − heartbeat period {} ms ≤ hop {} ms",
            d4.usable_ms, d4.period_ms, d4.hop_ms
        );
    }
    let text = render(&params, for_);
    match &args.out {
        Some(path) => std::fs::write(path, text).map_err(|source| ChecksError::Write {
            path: path.clone(),
            source,
        }),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

/// The values of an instant-query answer's `data.result` (a vector), or why not.
pub fn vector_values(body: &serde_json::Value) -> Result<Vec<f64>, String> {
    Ok(vector_samples(body)?.into_iter().map(|(_, v)| v).collect())
}

/// The samples of an instant-query answer's `data.result` (a vector): each
/// series' labels (`metric`) and value, or why not.
pub fn vector_samples(body: &serde_json::Value) -> Result<Vec<(serde_json::Value, f64)>, String> {
    if body["status"] != "success" {
        return Err(format!("status {} ({})", body["status"], body["error"]));
    }
    let data = &body["data"];
    if data["resultType"] != "vector" {
        return Err(format!("resultType {}, not a vector", data["resultType"]));
    }
    let result = data["result"]
        .as_array()
        .ok_or_else(|| "no result array".to_owned())?;
    result
        .iter()
        .map(|s| {
            let v = s["value"][1]
                .as_str()
                .ok_or_else(|| format!("a sample without a value: {s}"))?;
            // Rust reads Prometheus's NaN, +Inf and -Inf (case-insensitive).
            let v = v
                .parse::<f64>()
                .map_err(|_| format!("a value {v:?} that is not a number"))?;
            Ok((s["metric"].clone(), v))
        })
        .collect()
}

/// One instant query's values.
async fn query(http: &reqwest::Client, base: &str, promql: &str) -> Result<Vec<f64>, ChecksError> {
    Ok(query_samples(http, base, promql)
        .await?
        .into_iter()
        .map(|(_, v)| v)
        .collect())
}

/// One instant query's samples: each series' labels and value.
pub async fn query_samples(
    http: &reqwest::Client,
    base: &str,
    promql: &str,
) -> Result<Vec<(serde_json::Value, f64)>, ChecksError> {
    let endpoint = format!("{}/api/v1/query", base.trim_end_matches('/'));
    let url = reqwest::Url::parse_with_params(&endpoint, [("query", promql)]).map_err(|e| {
        ChecksError::Answer {
            url: base.to_owned(),
            query: promql.to_owned(),
            why: format!("an unusable URL: {e}"),
        }
    })?;
    let qerr = |source| ChecksError::Query {
        url: endpoint.clone(),
        source,
    };
    let resp = http.get(url).send().await.map_err(qerr)?;
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.map_err(qerr)?;
    vector_samples(&body).map_err(|why| ChecksError::Answer {
        url: base.to_owned(),
        query: promql.to_owned(),
        why: format!("HTTP {status}: {why}"),
    })
}

/// The HTTP client every query to the Prometheus at `base` goes through
/// (30 s per query).
pub fn client(base: &str) -> Result<reqwest::Client, ChecksError> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|source| ChecksError::Query {
            url: base.to_owned(),
            source,
        })
}

/// Evaluates the six checks on the Prometheus at `base`: one result per check.
pub async fn evaluate_live(base: &str, params: &Params) -> Result<Vec<TriggerResult>, ChecksError> {
    let http = client(base)?;
    let cell = format!("prometheus:{}", prom_duration(params.window));
    let mut out = Vec::new();
    for check in checks(params) {
        let mut answer = Answer::default();
        for (part, promql) in queries(&check) {
            answer.set(part, query(&http, base, &promql).await?);
        }
        out.push(live_result(&check, &cell, &answer));
    }
    Ok(out)
}

/// `bench triggers --prometheus URL`: prints the table, writes `triggers.json`
/// into `out` if given, returns the exit code (0 none fired, 3 any fired).
pub async fn run_live(
    base: &str,
    args: &CheckArgs,
    out: Option<&Path>,
) -> Result<i32, ChecksError> {
    let params = args.params()?;
    let results = evaluate_live(base, &params).await?;
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).map_err(|source| ChecksError::Write {
            path: dir.to_owned(),
            source,
        })?;
        write_triggers(dir, &results)?;
    }
    print!("{}", format_table(&results));
    Ok(exit_code(&results))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_flag_defaults_are_the_production_params() {
        let cli = crate::cli::Cli::parse_from(["bench", "rules"]);
        let crate::cli::Command::Rules(args) = cli.command else {
            panic!("not rules");
        };
        assert_eq!(args.checks.params().unwrap(), Params::default());
        assert_eq!(
            duration("for", &args.for_).unwrap(),
            bench_analysis::triggers::DEFAULT_FOR
        );
    }

    #[test]
    fn answers_are_vectors_and_errors_say_so() {
        let ok = serde_json::json!({"status": "success", "data": {"resultType": "vector",
            "result": [{"metric": {}, "value": [1.0, "0.25"]}, {"metric": {}, "value": [1.0, "NaN"]},
                       {"metric": {}, "value": [1.0, "+Inf"]}]}});
        let v = vector_values(&ok).unwrap();
        assert_eq!(v[0], 0.25);
        assert!(v[1].is_nan());
        assert_eq!(v[2], f64::INFINITY);
        let bad = serde_json::json!({"status": "error", "error": "parse error"});
        assert!(vector_values(&bad).unwrap_err().contains("parse error"));
        let cli = crate::cli::Cli::parse_from(["bench", "rules", "--margin", "1.5"]);
        let crate::cli::Command::Rules(args) = cli.command else {
            panic!("not rules");
        };
        let e = args.checks.params().unwrap_err().to_string();
        assert_eq!(e, "--margin \"1.5\": a margin must satisfy 0 <= m < 1");
    }
}
