//! The rail-stub's shared state: the ledger and its store behind one mutex,
//! the must-be-zero counters as atomics (so `/metrics` reads them without the
//! mutex), the seeded latency sampler, and the clock.
//!
//! Every change follows one order, under the ledger mutex: decide (pure, in
//! [`crate::ledger`]), persist, then apply to memory and the counters. So a
//! reply never reports a change the store does not hold, and R6 always sees
//! payouts and counters from the same instant. The mutex is never held across
//! an `.await`: R3 sleeps its simulated latency *before* taking it, so
//! submissions for different payouts wait in parallel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fencepost_api::clock::Clock;
use fencepost_api::latency::LatencySpec;
use fencepost_api::rail::{
    BulkCreated, CreatePayoutRequest, DEFAULT_BULK_PREFIX, LedgerCounters, LedgerView,
    MAX_BULK_COUNT, MAX_BULK_PREFIX_BYTES, PayoutStatus, PayoutView, bulk_payout_id,
    validate_currency, validate_payout_id,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::config::{Config, Fences, Sabotage};
use crate::error::RailError;
use crate::ledger::{self, Decision, Ledger, Refusal};
use crate::store::{Change, LedgerStore, StoreError};

/// Draws R3 delays from a [`LatencySpec`] with a ChaCha8 generator seeded once,
/// so the sequence of delays replays for a given seed (in request order).
#[derive(Debug)]
pub struct LatencySampler {
    /// The distribution.
    spec: LatencySpec,
    /// The seeded generator; a short std mutex, held only to draw one sample.
    rng: Mutex<ChaCha8Rng>,
}

impl LatencySampler {
    /// A sampler for `spec` seeded with `seed`.
    pub fn new(spec: LatencySpec, seed: u64) -> Self {
        LatencySampler {
            spec,
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
        }
    }

    /// The next delay in the seeded sequence.
    pub fn next_delay(&self) -> Duration {
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        self.spec.sample(&mut *rng)
    }

    /// The distribution sampled.
    pub fn spec(&self) -> LatencySpec {
        self.spec
    }
}

/// The counters as atomics. They only change under the ledger mutex (so R6's
/// snapshot is consistent); `/metrics` reads them without it.
#[derive(Debug, Default)]
struct Counters {
    /// `lock.fenced.out{fence="1"}`: stale R2/R4.
    fenced_out_fence1: AtomicU64,
    /// `lock.fenced.out{fence="2"}`: stale R3.
    fenced_out_fence2: AtomicU64,
    /// `rail.duplicate.attempted`: R3 on a PAID payout.
    duplicate_attempted: AtomicU64,
    /// R3 refused with NOT_CLAIMED.
    not_claimed: AtomicU64,
    /// R2/R4 refused with ALREADY_PAID.
    already_paid: AtomicU64,
    /// Payouts paid.
    paid: AtomicU64,
}

impl Counters {
    /// The six atomics paired with their field in [`LedgerCounters`].
    fn fields<'a>(&'a self, c: &'a mut LedgerCounters) -> [(&'a AtomicU64, &'a mut u64); 6] {
        [
            (&self.fenced_out_fence1, &mut c.fenced_out_fence1),
            (&self.fenced_out_fence2, &mut c.fenced_out_fence2),
            (&self.duplicate_attempted, &mut c.duplicate_attempted),
            (&self.not_claimed, &mut c.not_claimed),
            (&self.already_paid, &mut c.already_paid),
            (&self.paid, &mut c.paid),
        ]
    }

    /// The current values. Consistent with the ledger when read under its mutex.
    fn snapshot(&self) -> LedgerCounters {
        let mut c = LedgerCounters::default();
        for (atomic, field) in self.fields(&mut c) {
            *field = atomic.load(Ordering::SeqCst);
        }
        c
    }

    /// Adds `delta`; called under the ledger mutex, after the store accepted it.
    fn add(&self, mut delta: LedgerCounters) {
        for (atomic, field) in self.fields(&mut delta) {
            atomic.fetch_add(*field, Ordering::SeqCst);
        }
    }
}

/// `a + b`, field by field.
fn plus(mut a: LedgerCounters, b: LedgerCounters) -> LedgerCounters {
    a.fenced_out_fence1 += b.fenced_out_fence1;
    a.fenced_out_fence2 += b.fenced_out_fence2;
    a.duplicate_attempted += b.duplicate_attempted;
    a.not_claimed += b.not_claimed;
    a.already_paid += b.already_paid;
    a.paid += b.paid;
    a
}

/// What the ledger mutex guards: memory and the store move together.
#[derive(Debug)]
struct Inner {
    /// The payouts, as R5/R6 show them.
    ledger: Ledger,
    /// Where every change is written before it is applied to `ledger`.
    store: LedgerStore,
}

/// The rail-stub's state, shared by every handler.
pub struct AppState {
    /// The ledger and its store; held only for synchronous work, never across an await.
    inner: Mutex<Inner>,
    /// The counters, readable without the mutex.
    counters: Counters,
    /// R3's seeded delays.
    sampler: LatencySampler,
    /// Submissions currently waiting out their simulated latency.
    in_flight: AtomicU64,
    /// The monotonic clock for payout ages.
    clock: Arc<dyn Clock>,
    /// The configuration the state was opened with.
    config: Config,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The three fenced requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// R2, fence 1.
    Claim,
    /// R3, fence 2.
    Submit,
    /// R4, fence 1.
    Release,
}

impl AppState {
    /// Opens the configured store, reloads what it holds (reloaded payouts'
    /// ages count from now), and seeds the latency sampler.
    pub fn open(config: Config, clock: Arc<dyn Clock>) -> Result<Arc<Self>, StoreError> {
        let store = LedgerStore::open(&config.ledger)?;
        let (payouts, counters) = store.load()?;
        let mut ledger = Ledger::default();
        let now = clock.now();
        for p in payouts {
            ledger.put(p, now);
        }
        let state = AppState {
            inner: Mutex::new(Inner { ledger, store }),
            counters: Counters::default(),
            sampler: LatencySampler::new(config.latency, config.seed),
            in_flight: AtomicU64::new(0),
            clock,
            config,
        };
        state.counters.add(counters);
        Ok(Arc::new(state))
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The latency sampler (its spec, for reports).
    pub fn sampler(&self) -> &LatencySampler {
        &self.sampler
    }

    /// Takes the ledger mutex. Callers must not `.await` while holding it.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic under the mutex happens before the store write or after the
        // in-memory apply, never between, so the data is still coherent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// R1: creates a payout. `Ok((true, _))` when new, `Ok((false, _))` when
    /// the same body was sent again; another body for the same id is CONFLICT.
    pub fn create(&self, req: CreatePayoutRequest) -> Result<(bool, PayoutView), RailError> {
        validate_payout_id(&req.payout_id).map_err(|e| RailError::BadRequest(e.to_string()))?;
        validate_currency(&req.currency).map_err(|e| RailError::BadRequest(e.to_string()))?;
        if req.amount_minor < 0 {
            return Err(RailError::BadRequest(format!(
                "amount_minor is {}; amounts are non-negative integers in the currency's minor unit (1250 for 12.50)",
                req.amount_minor
            )));
        }
        let mut inner = self.lock();
        if let Some(existing) = inner.ledger.get(&req.payout_id) {
            if existing.amount_minor == req.amount_minor && existing.currency == req.currency {
                return Ok((false, existing.clone()));
            }
            return Err(RailError::Conflict {
                payout_id: req.payout_id,
                amount_minor: existing.amount_minor,
                currency: existing.currency.clone(),
            });
        }
        let payout = ledger::new_payout(req.payout_id, req.amount_minor, req.currency);
        inner.store.save(
            &[Change {
                view: &payout,
                appended: None,
            }],
            &self.counters.snapshot(),
        )?;
        inner.ledger.put(payout.clone(), self.clock.now());
        Ok((true, payout))
    }

    /// R7: creates `count` PENDING payouts named `{prefix}-{n:06}`, skipping
    /// numbers already taken, in one store transaction.
    pub fn bulk_create(
        &self,
        count: u64,
        prefix: Option<String>,
    ) -> Result<BulkCreated, RailError> {
        if count == 0 || count > MAX_BULK_COUNT {
            return Err(RailError::BadRequest(format!(
                "count is {count}; a bulk create makes 1 to {MAX_BULK_COUNT} payouts"
            )));
        }
        let prefix = prefix.unwrap_or_else(|| DEFAULT_BULK_PREFIX.to_string());
        if prefix.is_empty() || prefix.len() > MAX_BULK_PREFIX_BYTES {
            return Err(RailError::BadRequest(format!(
                "prefix is {} bytes; it must be 1-{MAX_BULK_PREFIX_BYTES} bytes of [A-Za-z0-9._:-]",
                prefix.len()
            )));
        }
        validate_payout_id(&bulk_payout_id(&prefix, 1))
            .map_err(|e| RailError::BadRequest(format!("prefix {prefix:?} makes a bad id: {e}")))?;

        // Names are chosen under the mutex so two bulk calls cannot pick the same number.
        let mut inner = self.lock();
        let mut created = Vec::with_capacity(count as usize);
        let mut n = 0u64;
        while (created.len() as u64) < count {
            n += 1;
            let id = bulk_payout_id(&prefix, n);
            if inner.ledger.get(&id).is_none() {
                // Amounts vary a little so a report can tell payouts apart; any sane value works.
                let amount = 100 * (1 + (n % 100) as i64);
                created.push(ledger::new_payout(id, amount, "EUR".to_string()));
            }
        }
        let changes: Vec<Change<'_>> = created
            .iter()
            .map(|view| Change {
                view,
                appended: None,
            })
            .collect();
        inner.store.save(&changes, &self.counters.snapshot())?;
        let now = self.clock.now();
        let first = created[0].payout_id.clone();
        let last = created[created.len() - 1].payout_id.clone();
        for p in created {
            inner.ledger.put(p, now);
        }
        Ok(BulkCreated {
            created: count,
            first_payout_id: first,
            last_payout_id: last,
        })
    }

    /// R2: claims the payout for `token` (fence 1).
    pub fn claim(&self, payout_id: &str, token: u64) -> Result<PayoutStatus, RailError> {
        self.decide(payout_id, token, Action::Claim)
    }

    /// R4: releases the payout back to PENDING (fence 1).
    pub fn release(&self, payout_id: &str, token: u64) -> Result<PayoutStatus, RailError> {
        self.decide(payout_id, token, Action::Release)
    }

    /// R3: waits the next seeded delay, then submits (fence 2).
    ///
    /// The wait and the decision run in their own task: if the client goes
    /// away (a read timeout) the submission still reaches the rail and is
    /// decided, as a real rail would, so a retry shows up as a duplicate.
    pub async fn submit(
        self: &Arc<Self>,
        payout_id: &str,
        token: u64,
    ) -> Result<PayoutStatus, RailError> {
        if self.lock().ledger.get(payout_id).is_none() {
            return Err(RailError::PayoutUnknown(payout_id.to_string()));
        }
        // The delay is drawn in request order; a 404 above draws nothing, so
        // the same requests against the same seed replay the same delays.
        let delay = self.sampler.next_delay();
        let state = Arc::clone(self);
        let id = payout_id.to_string();
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let task = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let result = state.decide(&id, token, Action::Submit);
            state.in_flight.fetch_sub(1, Ordering::SeqCst);
            result
        });
        // Cancelled only when the runtime shuts down: nothing was committed.
        task.await.map_err(RailError::from_join)?
    }

    /// Decides one fenced request under the mutex, persists, applies, logs.
    fn decide(
        &self,
        payout_id: &str,
        token: u64,
        action: Action,
    ) -> Result<PayoutStatus, RailError> {
        let mut inner = self.lock();
        let before = inner
            .ledger
            .get(payout_id)
            .ok_or_else(|| RailError::PayoutUnknown(payout_id.to_string()))?;
        let unfenced =
            self.config.sabotage == Some(Sabotage::NoFences) || self.config.fences == Fences::Off;
        let decision: Decision = match (action, unfenced) {
            (Action::Claim, false) => ledger::claim(before, token),
            (Action::Submit, false) => ledger::submit(before, token),
            (Action::Release, false) => ledger::release(before, token),
            (Action::Claim, true) => ledger::unfenced(before, token, ledger::Request::Claim),
            (Action::Submit, true) => ledger::unfenced(before, token, ledger::Request::Submit),
            (Action::Release, true) => ledger::unfenced(before, token, ledger::Request::Release),
        };
        let delta = decision.counter_delta();
        // Persist first: if the store refuses, memory and counters stay as they
        // were and the client gets 503 (a 5xx never changes state). A pure
        // repeat (same claim again) changes nothing and writes nothing.
        if decision.next.is_some() || delta != LedgerCounters::default() {
            let changed: Vec<Change<'_>> = decision
                .next
                .iter()
                .map(|view| Change {
                    view,
                    appended: decision.appended.as_ref(),
                })
                .collect();
            inner
                .store
                .save(&changed, &plus(self.counters.snapshot(), delta))?;
        }
        if let Some(next) = decision.next {
            inner.ledger.put(next, self.clock.now());
        }
        self.counters.add(delta);
        drop(inner);

        let payout_id = payout_id.to_string();
        match decision.result {
            Ok(state) => {
                tracing::debug!(
                    payout_id,
                    token,
                    state = state.as_str(),
                    ?action,
                    "fenced_request_accepted"
                );
                Ok(PayoutStatus {
                    payout_id,
                    state,
                    token,
                })
            }
            Err(refusal) => Err(refusal_error(payout_id, token, refusal)),
        }
    }

    /// R5: one payout.
    pub fn payout(&self, payout_id: &str) -> Option<PayoutView> {
        self.lock().ledger.get(payout_id).cloned()
    }

    /// R6: every payout and the counters, from one instant.
    pub fn ledger_view(&self) -> LedgerView {
        let inner = self.lock();
        LedgerView {
            payouts: inner.ledger.views(),
            counters: self.counters.snapshot(),
        }
    }

    /// The counters now (no mutex).
    pub fn counters(&self) -> LedgerCounters {
        self.counters.snapshot()
    }

    /// Number of payouts in the ledger.
    pub fn payout_count(&self) -> usize {
        self.lock().ledger.len()
    }

    /// Submissions now waiting out their simulated latency.
    pub fn submissions_in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Age of the oldest PENDING or CLAIMED payout; zero if none.
    pub fn backlog_age(&self) -> Duration {
        let now = self.clock.now();
        self.lock().ledger.backlog_age(now)
    }
}

/// Turns a refusal into its error, logging the C5 events on the way.
fn refusal_error(payout_id: String, token: u64, refusal: Refusal) -> RailError {
    match refusal {
        Refusal::FencedOut {
            fence,
            highest_token,
        } => {
            let fence = fence.label();
            tracing::warn!(payout_id, fence, token, highest_token, "fenced_out");
            RailError::FencedOut {
                payout_id,
                fence,
                token,
                highest_token,
            }
        }
        Refusal::Duplicate { paid_token } => {
            tracing::warn!(payout_id, token, paid_token, "duplicate_submission");
            RailError::DuplicateSubmission {
                payout_id,
                token,
                paid_token,
            }
        }
        Refusal::AlreadyPaid { paid_token } => {
            tracing::info!(payout_id, token, paid_token, "already_paid");
            RailError::AlreadyPaid {
                payout_id,
                paid_token,
            }
        }
        Refusal::NotClaimed { state, claim_token } => {
            let claim_token = claim_token.map_or_else(|| "none".to_string(), |t| t.to_string());
            tracing::info!(payout_id, token, claim_token, "submission_not_claimed");
            RailError::NotClaimed {
                payout_id,
                token,
                state: state.as_str(),
                claim_token,
            }
        }
    }
}
