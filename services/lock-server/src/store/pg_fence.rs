//! The leader fence and the epoch breach audit of the postgres store, as
//! SQL (C1 §6; see [`super::postgres`] for where they run).
//!
//! A leader's write reaches PostgreSQL in one of two shapes, both fenced and
//! audited by the same condition ([`FENCE_ROW`]):
//!
//! - **A transaction** of several statements, pipelined: `BEGIN`, the fence
//!   ([`FENCE_SQL`]), one statement per kind of write, the audit
//!   ([`BREACH_AUDIT_SQL`]), `COMMIT`. Every batch of several kinds of write
//!   (a session's create, a sweep) takes this shape.
//! - **One statement** ([`runs_alone`]: [`FENCED_GRANTS_SQL`] and its
//!   siblings), for a batch of one kind of write
//!   that a lone client's L4, L5 or L6 makes: the fence and the audit are its
//!   common table expressions and the write runs only past the fence (a
//!   one-time filter on the fence's result, evaluated before any row). It is
//!   its own transaction: one request, one answer. Measured by
//!   `scripts/ab-grants.sh` (see `docs/performance.md`): each statement of a
//!   pipelined transaction is still one request and one answer of
//!   tokio-postgres, which ends every request with a Sync.
//!
//! The fence key-share-locks the leader row while it still has the writer's
//! epoch and a live lease on the database's clock, and fails the statement
//! (`division_by_zero`: `1 / count(*)` of no row) otherwise; a takeover must
//! lock the row `FOR UPDATE` first, the one lock that conflicts, so it waits
//! for every fenced write in flight, and every later write of the old epoch
//! fails. The audit records a row in `fp_epoch_breaches` if, as the write
//! runs, the leader row has another epoch: while the fence works, never. In
//! the one-statement shape it reads the leader row as of the statement's
//! start, so a takeover that committed before the write began is recorded
//! (what `experiments/mutations/fence-skips-epoch.patch` shows firing).

use std::sync::LazyLock;

/// The leader row, key-share-locked, while it has the epoch `{epoch}` (the
/// parameter that carries the writer's epoch) and a live lease.
const FENCE_ROW: &str = "SELECT 1 FROM fp_leader WHERE id = 1 \
     AND epoch = {epoch} AND expires_at > clock_timestamp() FOR KEY SHARE";

/// `1 / count(*)` of [`FENCE_ROW`] (as the column `ok`) with the epoch in
/// parameter `param`: a select list and its `FROM`.
fn fence_check(param: usize) -> String {
    let row = FENCE_ROW.replace("{epoch}", &format!("${param}::bigint"));
    format!("1 / count(*)::int AS ok FROM ({row}) AS leader")
}

/// The audit's insert with the writer's epoch in parameter `param`.
fn audit(param: usize) -> String {
    format!(
        "INSERT INTO fp_epoch_breaches (writer_epoch, row_epoch, at) \
         SELECT ${param}::bigint, epoch, clock_timestamp() FROM fp_leader \
         WHERE id = 1 AND epoch <> ${param}::bigint"
    )
}

/// The first statement of a leader's write transaction: bounds how long the
/// transaction may idle to `$2` milliseconds (`SET LOCAL`, as
/// `set_config(…, true)`: a frozen leader's locks must not hold a takeover
/// back), then the fence of epoch `$1`.
pub(crate) static FENCE_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT set_config('idle_in_transaction_session_timeout', $2::text, true), {}",
        fence_check(1)
    )
});

/// The last statement of a leader's write transaction before COMMIT, with
/// the writer's epoch in `$1`.
pub(crate) static BREACH_AUDIT_SQL: LazyLock<String> = LazyLock::new(|| audit(1));

/// `write` (a statement of [`super::pg_batch`] with `params` parameters) as
/// one fenced, audited statement, with the writer's epoch in parameter
/// `params + 1`: the fence and the audit as common table expressions before
/// it, and the fence's result as a condition of the write's own (`AND …`
/// after its `WHERE`, the statement's last clause), or, for an `INSERT …
/// SELECT … ON CONFLICT`, as the `SELECT`'s `WHERE` before `ON CONFLICT`.
fn one_statement(write: &str, params: usize) -> String {
    let write = write.trim();
    let gated = match write.find("ON CONFLICT") {
        Some(at) => {
            let (select, conflict) = write.split_at(at);
            assert!(
                !select.contains("WHERE"),
                "a WHERE before ON CONFLICT: {write}"
            );
            format!(
                "{} WHERE (SELECT ok FROM fence) = 1 {conflict}",
                select.trim_end()
            )
        }
        None => {
            assert!(
                write.starts_with("UPDATE")
                    && write.contains("WHERE")
                    && !write.contains("RETURNING"),
                "neither an INSERT … ON CONFLICT nor an UPDATE … WHERE …: {write}"
            );
            format!("{write} AND (SELECT ok FROM fence) = 1")
        }
    };
    let e = params + 1;
    format!(
        "WITH fence AS MATERIALIZED (SELECT {check}), audit AS ({audit}) {gated}",
        check = fence_check(e),
        audit = audit(e),
    )
}

/// [`super::pg_batch::GRANTS_SQL`] as one fenced statement, epoch in `$4`.
pub(crate) static FENCED_GRANTS_SQL: LazyLock<String> =
    LazyLock::new(|| one_statement(super::pg_batch::GRANTS_SQL, 3));

/// [`super::pg_batch::SET_LEASES_SQL`] as one fenced statement, epoch in `$4`.
pub(crate) static FENCED_SET_LEASES_SQL: LazyLock<String> =
    LazyLock::new(|| one_statement(super::pg_batch::SET_LEASES_SQL, 3));

/// [`super::pg_batch::CLEAR_GRANTS_SQL`] as one fenced statement, epoch in `$3`.
pub(crate) static FENCED_CLEAR_GRANTS_SQL: LazyLock<String> =
    LazyLock::new(|| one_statement(super::pg_batch::CLEAR_GRANTS_SQL, 2));

/// Whether a leader's batch of this one statement runs as one fenced
/// statement (one request) rather than as a pipelined transaction.
pub(crate) fn runs_alone(s: &super::pg_batch::Statement<'_>) -> bool {
    use super::pg_batch::Statement;
    matches!(
        s,
        Statement::Grants(_) | Statement::SetLeases(_) | Statement::ClearGrants(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fenced_form_checks_the_epoch_gates_the_write_and_audits() {
        for (sql, e) in [
            (&*FENCED_GRANTS_SQL, 4),
            (&*FENCED_SET_LEASES_SQL, 4),
            (&*FENCED_CLEAR_GRANTS_SQL, 3),
        ] {
            assert!(sql.contains(&format!("epoch = ${e}::bigint")), "{sql}");
            assert!(sql.contains("FOR KEY SHARE"), "{sql}");
            assert!(sql.contains(&format!("epoch <> ${e}::bigint")), "{sql}");
            assert!(sql.contains("INSERT INTO fp_epoch_breaches"), "{sql}");
            assert_eq!(
                sql.matches("(SELECT ok FROM fence) = 1").count(),
                1,
                "{sql}"
            );
        }
        // The grant's gate is in its SELECT, before ON CONFLICT.
        let g = &*FENCED_GRANTS_SQL;
        assert!(
            g.find("(SELECT ok FROM fence)").unwrap() < g.find("ON CONFLICT").unwrap(),
            "{g}"
        );
        assert!(FENCE_SQL.contains("epoch = $1::bigint"), "{}", *FENCE_SQL);
        assert!(BREACH_AUDIT_SQL.contains("epoch <> $1::bigint"));
    }
}
