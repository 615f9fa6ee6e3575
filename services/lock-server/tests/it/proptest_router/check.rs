//! The properties, checked on every reply: no 5xx, a refusal changes nothing,
//! error bodies are `{"code", "message"}` with the status C1 gives the code,
//! the body-size and key rules hold, and the tokens on the wire obey C1.
//! Also the outcome labels the coverage check counts, and the outcomes a run
//! must reach.

use std::collections::BTreeMap;
use std::sync::Mutex;

use axum::http::{Method, StatusCode};
use fencepost_api::clock::MonoTime;
use fencepost_api::lock::LockErrorCode;
use serde_json::Value;

use super::model::{Held, Model};
use super::request::{Kind, Planned, Size, size_of};

/// Checks one reply against everything known in advance; updates the model.
pub(super) fn check(
    m: &mut Model,
    p: &Planned,
    status: StatusCode,
    raw: &[u8],
    changed: bool,
    now: MonoTime,
) -> Result<(), String> {
    let code = status.as_u16();
    if status.is_server_error() {
        return Err("a 5xx".into());
    }
    if code >= 400 && changed {
        return Err("a refused request changed the state".into());
    }
    if matches!(p.method, Method::GET | Method::HEAD) && changed {
        return Err("a GET/HEAD changed the state".into());
    }
    // HEAD replies carry no body by definition.
    let json: Value = if p.method == Method::HEAD {
        Value::Null
    } else {
        serde_json::from_slice(raw).unwrap_or(Value::Null)
    };
    let err_code = json["code"].as_str().unwrap_or("");
    if code >= 400 && p.method != Method::HEAD {
        let message = json["message"].as_str().unwrap_or("");
        if !json.is_object() || err_code.is_empty() || message.trim().is_empty() {
            return Err("an error body that is not {\"code\", \"message\"}".into());
        }
        if let Some(c) = LockErrorCode::parse(err_code) {
            if c.status() != code {
                return Err(format!("code {err_code} travels with {}", c.status()));
            }
            if c == LockErrorCode::LockHeld && json["retry_after_ms"].as_u64().unwrap_or(0) == 0 {
                return Err("LOCK_HELD without a positive retry_after_ms".into());
            }
        }
    }
    let size = size_of(&p.body);
    if p.reads_body && p.method != Method::HEAD {
        if size == Size::Over && (code != 413 || err_code != "PAYLOAD_TOO_LARGE") {
            return Err("a body over 64 KiB was not refused with 413 PAYLOAD_TOO_LARGE".into());
        }
        if size != Size::Over && code == 413 {
            return Err("a body within 64 KiB was refused as too large".into());
        }
    }
    // A body declared over the limit may be refused with 413 before anything
    // else is looked at (the server checks content-length on every route).
    let oversize_refused = size == Size::Over && code == 413 && err_code == "PAYLOAD_TOO_LARGE";
    if p.bad_key && !oversize_refused && (code != 400 || err_code != "BAD_REQUEST") {
        return Err("an invalid key was not refused with 400 BAD_REQUEST".into());
    }
    if p.kind == Kind::Ops && !oversize_refused && code != 200 {
        return Err("an operational endpoint did not answer 200".into());
    }
    if code >= 400 || p.kind == Kind::Junk {
        // L7 404 on a valid key: LOCK_UNKNOWN, and only for a key never granted.
        if let Some(k) = p.key.as_ref().filter(|_| p.kind == Kind::L7 && code == 404)
            && (err_code != "LOCK_UNKNOWN" || m.max_token.contains_key(k))
        {
            return Err(format!(
                "L7 404 {err_code} on {k:?}; this run was granted it up to token {:?}",
                m.max_token.get(k)
            ));
        }
        return Ok(());
    }
    let want = match p.kind {
        Kind::L1 => 201,
        Kind::L3 | Kind::L6 => 204,
        _ => 200,
    };
    if code != want {
        return Err(format!("success status {code}, C1 says {want}"));
    }
    match p.kind {
        Kind::L1 => {
            let id = json["session_id"]
                .as_str()
                .ok_or("L1 reply without session_id")?;
            if id.len() < 32 {
                return Err(format!("session id {id:?} is too short to be unguessable"));
            }
            m.sessions.push(id.to_string());
        }
        Kind::L3 => {
            let id = p.session.clone().unwrap_or_default();
            m.holder.retain(|_, h| h.session_id != id);
        }
        Kind::L4 => {
            let key = p.key.clone().ok_or("L4 succeeded on a key C1 refuses")?;
            let token = json["token"].as_u64().ok_or("L4 reply without a token")?;
            if json["key"].as_str() != Some(key.as_str()) {
                return Err(format!("L4 reply names key {}", json["key"]));
            }
            let prev = m.max_token.get(&key).copied().unwrap_or(0);
            let session = serde_json::from_slice::<Value>(&p.body)
                .ok()
                .and_then(|b| b["session_id"].as_str().map(str::to_string))
                .unwrap_or_default();
            // The holder's re-acquire (C1 §7) answers its current grant, same token.
            let reacquired = m
                .holder
                .get(&key)
                .is_some_and(|h| h.token == token && h.session_id == session);
            if token <= prev && !reacquired {
                return Err(format!(
                    "token {token} for {key:?} is not above {prev}, seen before"
                ));
            }
            m.max_token.insert(key.clone(), token);
            m.holder.insert(
                key,
                Held {
                    session_id: session,
                    token,
                    started: now,
                    lease_ms: json["lease_ms"].as_u64().unwrap_or(0),
                },
            );
        }
        Kind::L5 => {
            let token = json["token"].as_u64();
            if token.is_none() || token != p.token {
                return Err(format!(
                    "renew answered token {token:?}, sent {:?}",
                    p.token
                ));
            }
            if let Some(h) = p.key.as_ref().and_then(|k| m.holder.get_mut(k))
                && Some(h.token) == token
            {
                h.started = now;
                h.lease_ms = json["lease_ms"].as_u64().unwrap_or(0);
            }
        }
        Kind::L6 => {
            if let Some(k) = &p.key {
                m.holder.remove(k);
            }
        }
        Kind::L7 => {
            let key = p.key.clone().ok_or("L7 succeeded on a key C1 refuses")?;
            let token = json["token"].as_u64();
            if token != m.max_token.get(&key).copied() {
                return Err(format!(
                    "L7 token {token:?} is not the last token issued, {:?}",
                    m.max_token.get(&key)
                ));
            }
            if !matches!(json["state"].as_str(), Some("HELD" | "GRACE" | "FREE")) {
                return Err(format!("L7 state {}", json["state"]));
            }
        }
        Kind::L8 => {
            if json["state"].as_str() != Some("FREE") {
                return Err(format!("after a revoke the key is {}", json["state"]));
            }
            if let Some(k) = &p.key {
                m.holder.remove(k);
            }
        }
        Kind::L2 | Kind::Ops | Kind::Junk => {}
    }
    Ok(())
}

/// Outcomes seen, `"L4 200"` or `"L5 409 LOCK_LOST"` or `"L7 200 GRACE"`, with counts:
/// the evidence that the strategy reaches deep states.
pub(super) type Coverage = Mutex<BTreeMap<String, u64>>;

/// The outcome label [`Coverage`] counts.
pub(super) fn outcome(p: &Planned, status: StatusCode, raw: &[u8]) -> String {
    let json: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
    let detail = match p.kind {
        Kind::L7 | Kind::L8 if status.is_success() => json["state"].as_str().unwrap_or(""),
        _ => json["code"].as_str().unwrap_or(""),
    };
    format!("{:?} {} {detail}", p.kind, status.as_u16())
        .trim_end()
        .to_string()
}

/// Outcomes a run must have reached, or the strategy has gone shallow.
pub(super) const MUST_REACH: &[&str] = &[
    "L1 201",
    "L1 400 BAD_REQUEST",
    "L1 413 PAYLOAD_TOO_LARGE",
    "L2 200",
    "L2 404 SESSION_UNKNOWN",
    "L2 410 SESSION_EXPIRED",
    "L3 204",
    "L4 200",
    "L4 409 LOCK_HELD",
    "L4 410 SESSION_EXPIRED",
    "L5 200",
    "L5 409 LOCK_LOST",
    "L6 204",
    "L6 409 LOCK_LOST",
    "L7 200 HELD",
    "L7 200 GRACE",
    "L7 200 FREE",
    "L7 404 LOCK_UNKNOWN",
    "L8 200 FREE",
    "Junk 404 NOT_FOUND",
    "Junk 405 METHOD_NOT_ALLOWED",
];
