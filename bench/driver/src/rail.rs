//! A small client for the rail-stub (C2), as a payout worker uses it: claim
//! (fence 1), submit (fence 2), release (abandon), plus the run-level calls
//! (seed a backlog, read one payout or the whole ledger).

use std::time::Duration;

use bench_history::Outcome;
use fencepost_api::lock::ErrorBody;
use fencepost_api::rail::{
    BulkCreateRequest, BulkCreated, LedgerView, PayoutView, RailErrorCode, TokenRequest,
};

/// What one claim/submit/release came back with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RailOutcome {
    /// 2xx.
    Ok,
    /// A C2 refusal.
    Refused(RailErrorCode),
    /// The read timed out or the connection failed.
    Transport(String),
}

/// The history's outcome of a rail call: what the checker can conclude of it.
pub fn history_outcome(r: &RailOutcome) -> Outcome {
    match r {
        RailOutcome::Ok => Outcome::Ok,
        RailOutcome::Refused(RailErrorCode::FencedOut) => Outcome::FencedOut,
        RailOutcome::Refused(RailErrorCode::AlreadyPaid) => Outcome::AlreadyPaid,
        RailOutcome::Refused(RailErrorCode::DuplicateSubmission) => Outcome::Duplicate,
        RailOutcome::Refused(RailErrorCode::NotClaimed) => Outcome::NotClaimed,
        RailOutcome::Refused(_) => Outcome::Failed,
        RailOutcome::Transport(_) => Outcome::Unknown,
    }
}

/// Why a driver call to the rail (R5, R6, R7) failed.
#[derive(Debug, thiserror::Error)]
pub enum RailError {
    /// The rail-stub could not be reached, timed out, or sent a body that is not the C2 JSON.
    #[error("rail-stub: {0}")]
    Http(reqwest::Error),
    /// The rail-stub answered with a non-2xx status; check its log.
    #[error("{what} failed: HTTP {status} {body}")]
    Refused {
        /// Which call, e.g. `R7` or `R5 pause-000001`.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The reply body, when it was read.
        body: String,
    },
}

impl From<reqwest::Error> for RailError {
    // Not `#[from]`: the cause is in the message, so it is not also a
    // `source()` (a `{:#}` chain would print it twice).
    fn from(e: reqwest::Error) -> Self {
        RailError::Http(e)
    }
}

/// `e` and its sources, `: `-joined (reqwest's own message alone says
/// only "error sending request").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// A rail-stub client.
#[derive(Clone)]
pub struct RailClient {
    /// Base URL, `http://IP:PORT`.
    base: String,
    /// One connection pool per client.
    http: reqwest::Client,
    /// `rail.read.timeout` for R3 (scaled with the run's time base).
    read_timeout: Duration,
}

impl RailClient {
    /// A client for `base` whose R3 reads time out after `read_timeout`.
    pub fn new(base: &str, read_timeout: Duration) -> Self {
        RailClient {
            base: base.trim_end_matches('/').to_string(),
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(4)
                .build()
                .expect("plain-HTTP client builds"),
            read_timeout,
        }
    }

    async fn post_token(
        &self,
        payout: &str,
        verb: &str,
        token: u64,
        timeout: Duration,
    ) -> RailOutcome {
        let url = format!("{}/v1/payouts/{payout}/{verb}", self.base);
        let sent = self
            .http
            .post(url)
            .timeout(timeout)
            .json(&TokenRequest { token })
            .send()
            .await;
        let out = match sent {
            Err(e) => RailOutcome::Transport(error_chain(&e)),
            Ok(r) if r.status().is_success() => RailOutcome::Ok,
            Ok(r) => match r.json::<ErrorBody>().await {
                Ok(b) => RailErrorCode::parse(&b.code)
                    .map(RailOutcome::Refused)
                    .unwrap_or(RailOutcome::Transport(format!("unknown code {}", b.code))),
                Err(e) => RailOutcome::Transport(error_chain(&e)),
            },
        };
        if let RailOutcome::Transport(error) = &out {
            tracing::warn!(
                event = "rail_transport_error",
                payout,
                verb,
                token,
                error = %error,
                "a rail call got no answer: its outcome is unknown"
            );
        }
        out
    }

    /// R2: claim `payout` under `token` (fence 1).
    pub async fn claim(&self, payout: &str, token: u64) -> RailOutcome {
        self.post_token(payout, "claim", token, Duration::from_secs(10))
            .await
    }

    /// R3: submit `payout` under `token` (fence 2) — the irreversible step.
    pub async fn submit(&self, payout: &str, token: u64) -> RailOutcome {
        self.post_token(payout, "submit", token, self.read_timeout)
            .await
    }

    /// R4: give `payout` back (abandon); always allowed for the current holder.
    pub async fn release(&self, payout: &str, token: u64) -> RailOutcome {
        self.post_token(payout, "release", token, Duration::from_secs(10))
            .await
    }

    /// R7: seeds `count` payouts named `{prefix}-NNNNNN`.
    pub async fn seed_backlog(&self, count: u64, prefix: &str) -> Result<BulkCreated, RailError> {
        let r = self
            .http
            .post(format!("{}/v1/payouts/bulk", self.base))
            .json(&BulkCreateRequest {
                count,
                prefix: Some(prefix.to_string()),
            })
            .send()
            .await?;
        if !r.status().is_success() {
            let status = r.status().as_u16();
            let body = r.text().await.unwrap_or_default();
            return Err(RailError::Refused {
                what: "R7".into(),
                status,
                body,
            });
        }
        Ok(r.json().await?)
    }

    /// A GET of `path` that must answer 2xx with JSON; `what` names it in errors.
    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<T, RailError> {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .timeout(timeout)
            .send()
            .await?;
        if !r.status().is_success() {
            return Err(RailError::Refused {
                what: what.into(),
                status: r.status().as_u16(),
                body: String::new(),
            });
        }
        Ok(r.json().await?)
    }

    /// R5: one payout with its submissions.
    pub async fn payout(&self, id: &str) -> Result<PayoutView, RailError> {
        let path = format!("/v1/payouts/{id}");
        self.get_json(&format!("R5 {id}"), &path, Duration::from_secs(5))
            .await
    }

    /// R6: the whole ledger with its counters.
    pub async fn ledger(&self) -> Result<LedgerView, RailError> {
        self.get_json("R6", "/v1/ledger", Duration::from_secs(60))
            .await
    }
}
