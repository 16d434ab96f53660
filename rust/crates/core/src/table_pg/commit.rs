//! Group commit: the batches waiting when the committer is free share one transaction and one
//! COMMIT. Their statements are pipelined (sent together, answered together). When every batch
//! holds, that is two round trips for the whole group; when one is refused (a key exists, an
//! assertion fails, a counter is not an integer), the group is run again with a SAVEPOINT per
//! batch, so the refused one is rolled back alone and the others commit.
//!
//! Race-freedom between processes and nodes comes from the primary key and row locks: `Insert`
//! is `INSERT ... ON CONFLICT DO NOTHING` (no row back: the key exists), an assertion that a key
//! holds a value reads it `FOR UPDATE`, and an assertion that a key is absent inserts an empty
//! placeholder row the same way, so the key's uniqueness makes one of two such transactions fail
//! (or wait for the other and then see its write); the placeholder is deleted before the batch
//! ends unless the batch writes the key itself.

use std::collections::HashSet;

use futures_util::future::join_all;
use tokio_postgres::types::ToSql;

use super::connection::{is_retryable, is_unreachable, same_error, store_error, Connection};
use super::merged;
use super::schema::{Statement, Tables};
use crate::spool::{Batch, Op, SpoolError};

/// How often a group chosen as a deadlock's victim is run again before its error is returned.
const RETRIES: usize = 3;

/// What a batch turns into: statements in order, each with what its answer must be.
pub(super) struct Step<'a> {
    pub(super) statement: Statement,
    pub(super) table: &'a str,
    pub(super) sql_table: &'a str,
    pub(super) key: &'a [u8],
    pub(super) value: Value<'a>,
    pub(super) expect: Expect<'a>,
}

pub(super) enum Value<'a> {
    None,
    Bytes(&'a [u8]),
    Owned(Vec<u8>),
    Delta(i64),
}

pub(super) enum Expect<'a> {
    Anything,
    /// A row back, else the batch is refused with `KeyExists`.
    Inserted,
    /// A row back, else `Conflict` (the key was not absent).
    Absent,
    /// This value (locked), else `Conflict`.
    Holds(&'a [u8]),
}

/// The statements of one batch. Assertions run first, as LMDB checks them before any write of
/// the batch.
fn plan<'a>(tables: &'a Tables, batch: &'a Batch) -> Result<Vec<Step<'a>>, SpoolError> {
    let mut steps = Vec::with_capacity(batch.ops.len() + 1);
    // Keys holding this batch's placeholder rows, not (yet) written by the batch.
    let mut placeholders: HashSet<(&str, &[u8])> = HashSet::new();
    let asserts = batch
        .ops
        .iter()
        .filter(|op| matches!(op, Op::Assert { .. }));
    let writes = batch
        .ops
        .iter()
        .filter(|op| !matches!(op, Op::Assert { .. }));
    for op in asserts.chain(writes) {
        let (table, key) = match op {
            Op::Put { table, key, .. }
            | Op::Insert { table, key, .. }
            | Op::Delete { table, key }
            | Op::Assert { table, key, .. }
            | Op::AddCounter { table, key, .. } => (table.as_str(), key.as_slice()),
            _ => {
                return Err(SpoolError::Invalid(
                    "the table store takes table operations only (put, insert, delete, \
                     assert_value, add_counter); spool operations go to the spool"
                        .into(),
                ))
            }
        };
        let sql_table = tables.sql_name(table)?;
        let placeheld = placeholders.contains(&(table, key));
        let (statement, value, expect) = match op {
            Op::Assert { expected: None, .. } if placeheld => continue,
            Op::Assert { expected: None, .. } => {
                placeholders.insert((table, key));
                (Statement::InsertIfAbsent, Value::Bytes(&[]), Expect::Absent)
            }
            Op::Assert {
                expected: Some(_), ..
            } if placeheld => return Err(conflict(table, key)),
            Op::Assert {
                expected: Some(expected),
                ..
            } => (
                Statement::SelectForUpdate,
                Value::None,
                Expect::Holds(expected),
            ),
            Op::Put { value, .. } => (Statement::Upsert, Value::Bytes(value), Expect::Anything),
            // Absent as asserted, and locked by the placeholder: a plain write.
            Op::Insert { value, .. } if placeheld => {
                (Statement::Upsert, Value::Bytes(value), Expect::Anything)
            }
            Op::Insert { value, .. } => (
                Statement::InsertIfAbsent,
                Value::Bytes(value),
                Expect::Inserted,
            ),
            Op::Delete { .. } => (Statement::Delete, Value::None, Expect::Anything),
            Op::AddCounter { delta, .. } if placeheld => (
                Statement::Upsert,
                Value::Owned(delta.to_string().into_bytes()),
                Expect::Anything,
            ),
            Op::AddCounter { delta, .. } => (
                Statement::AddCounter,
                Value::Delta(*delta),
                Expect::Anything,
            ),
            _ => unreachable!("spool operations were refused above"),
        };
        if !matches!(op, Op::Assert { .. }) {
            placeholders.remove(&(table, key));
        }
        steps.push(Step {
            statement,
            table,
            sql_table,
            key,
            value,
            expect,
        });
    }
    let mut leftover: Vec<_> = placeholders.into_iter().collect();
    leftover.sort_unstable();
    for (table, key) in leftover {
        steps.push(Step {
            statement: Statement::Delete,
            table,
            sql_table: tables.sql_name(table)?,
            key,
            value: Value::None,
            expect: Expect::Anything,
        });
    }
    Ok(steps)
}

fn conflict(table: &str, key: &[u8]) -> SpoolError {
    SpoolError::Conflict {
        table: table.to_string(),
        key: key.to_vec(),
    }
}

/// How a step (or a whole batch) ended.
pub(super) enum Outcome {
    Held,
    Refused(SpoolError),
    Failed(tokio_postgres::Error),
}

/// Run steps pipelined: every statement is sent before the first answer is read.
async fn run_steps(connection: &Connection, steps: &[&Step<'_>]) -> Vec<Outcome> {
    let sqls: Vec<String> = steps
        .iter()
        .map(|step| step.statement.sql(step.sql_table))
        .collect();
    let prepared = join_all(sqls.iter().map(|sql| connection.statement(sql))).await;
    let mut statements = Vec::with_capacity(prepared.len());
    for statement in prepared {
        match statement {
            Ok(statement) => statements.push(statement),
            Err(err) => return vec![Outcome::Failed(err)],
        }
    }
    let answers = join_all(steps.iter().zip(&statements).map(|(step, statement)| {
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&step.key];
        match &step.value {
            Value::None => {}
            Value::Bytes(bytes) => params.push(bytes),
            Value::Owned(bytes) => params.push(bytes),
            Value::Delta(delta) => params.push(delta),
        }
        async move { connection.client.query(statement, &params).await }
    }))
    .await;
    steps
        .iter()
        .zip(answers)
        .map(|(step, answer)| match answer {
            Err(err) => Outcome::Failed(err),
            Ok(rows) => {
                let held = match step.expect {
                    Expect::Anything => true,
                    Expect::Inserted | Expect::Absent => !rows.is_empty(),
                    Expect::Holds(expected) => rows
                        .first()
                        .is_some_and(|row| row.get::<_, &[u8]>(0) == expected),
                };
                judged(step, held)
            }
        })
        .collect()
}

/// A step's outcome from whether its answer was the one it expected.
pub(super) fn judged(step: &Step<'_>, held: bool) -> Outcome {
    match (held, &step.expect) {
        (true, _) => Outcome::Held,
        (false, Expect::Inserted) => Outcome::Refused(SpoolError::KeyExists {
            table: step.table.to_string(),
            key: step.key.to_vec(),
        }),
        (false, _) => Outcome::Refused(conflict(step.table, step.key)),
    }
}

/// The first thing that went wrong among pipelined answers (later statements of an aborted
/// transaction only echo the first error).
fn first_failure(outcomes: Vec<Outcome>) -> Outcome {
    outcomes
        .into_iter()
        .find(|outcome| !matches!(outcome, Outcome::Held))
        .unwrap_or(Outcome::Held)
}

/// Commit `batches` as one group on `connection`: one result per batch, in order.
pub(super) async fn commit_group(
    connection: &Connection,
    tables: &Tables,
    batches: &[Batch],
) -> Vec<Result<(), SpoolError>> {
    let plans: Vec<Result<Vec<Step<'_>>, SpoolError>> =
        batches.iter().map(|batch| plan(tables, batch)).collect();
    let runnable: Vec<usize> = (0..plans.len()).filter(|&i| plans[i].is_ok()).collect();
    let mut results: Vec<Result<(), SpoolError>> = plans
        .iter()
        .map(|plan| plan.as_ref().map(|_| ()).map_err(same_error))
        .collect();
    if runnable.is_empty() {
        return results;
    }
    let group = Group {
        runnable: &runnable,
        batch_steps: runnable
            .iter()
            .map(|&i| {
                plans[i]
                    .as_ref()
                    .map(|s| s.iter().collect())
                    .unwrap_or_default()
            })
            .collect(),
    };
    // A deadlock's victim lets go of every lock the group took, so the other transaction
    // finishes; the group then runs again whole.
    for attempt in 0..=RETRIES {
        for &i in &runnable {
            results[i] = Ok(());
        }
        match group
            .attempt(connection, &mut results, attempt == RETRIES)
            .await
        {
            Attempt::Commit(committed) => return finish(connection, results, &committed).await,
            Attempt::Done => return results,
            Attempt::Failed(err) => return fail_all(results, &runnable, err),
            Attempt::Deadlocked => {
                if let Err(err) = rollback(connection).await {
                    return fail_all(results, &runnable, err);
                }
            }
        }
    }
    unreachable!("the last attempt does not end in a deadlock")
}

/// The batches of a group that can run, and each one's steps.
struct Group<'g, 'a> {
    runnable: &'g [usize],
    batch_steps: Vec<Vec<&'g Step<'a>>>,
}

enum Attempt {
    /// The transaction is open: COMMIT it for these batches (the others are refused).
    Commit(Vec<usize>),
    /// The results are final and no transaction is open.
    Done,
    /// The group cannot go on (the connection is gone): every batch fails with this.
    Failed(SpoolError),
    /// Chosen as a deadlock's victim, not on the last attempt: roll back and run again.
    Deadlocked,
}

impl Group<'_, '_> {
    async fn attempt(
        &self,
        connection: &Connection,
        results: &mut [Result<(), SpoolError>],
        last: bool,
    ) -> Attempt {
        let every_step: Vec<&Step<'_>> = self.batch_steps.iter().flatten().copied().collect();
        let alone = self.runnable.len() == 1;
        let per_batch = match all_together(connection, &every_step).await {
            Outcome::Held => return Attempt::Commit(self.runnable.to_vec()),
            Outcome::Failed(err) if is_unreachable(&err) => {
                return Attempt::Failed(store_error(err))
            }
            Outcome::Failed(err) if is_retryable(&err) && !last => return Attempt::Deadlocked,
            // Alone, its refusal (or error) is its result: nothing else to save.
            Outcome::Refused(refusal) if alone => Err(refusal),
            Outcome::Failed(err) if alone => Err(store_error(err)),
            _ => Ok(()),
        };
        if let Err(err) = rollback(connection).await {
            return Attempt::Failed(err);
        }
        if let Err(refusal) = per_batch {
            results[self.runnable[0]] = Err(refusal);
            return Attempt::Done;
        }
        // Again, a savepoint around each batch.
        if let Err(err) = simple(connection, "BEGIN").await {
            return Attempt::Failed(err);
        }
        let mut committed = Vec::new();
        for (&i, steps) in self.runnable.iter().zip(&self.batch_steps) {
            match one_batch(connection, steps, last).await {
                Ok(Ok(())) => committed.push(i),
                Ok(Err(refusal)) => results[i] = Err(refusal),
                Err(stop) => return stop,
            }
        }
        Attempt::Commit(committed)
    }
}

/// BEGIN and every step, pipelined, rows of a kind and table merged (see `merged.rs`); the
/// first failure, if any: an error first (the first one sent, as later statements of the
/// aborted transaction only echo it), else the refusal of the earliest step.
async fn all_together(connection: &Connection, steps: &[&Step<'_>]) -> Outcome {
    let (mut alone, merged) = merged::plan(steps);
    // Rows are locked in one order on every node, so groups that share rows wait for each
    // other instead of deadlocking: the merged statements by table (each in key order), then
    // the other steps by table and key (a key's own steps keep their order: the sort is stable).
    alone.sort_by_key(|&i| (steps[i].table, steps[i].key));
    let alone_steps: Vec<&Step<'_>> = alone.iter().map(|&i| steps[i]).collect();
    let (begun, merged_outcomes, alone_outcomes) = futures_util::join!(
        connection.client.batch_execute("BEGIN"),
        merged::run(connection, steps, &merged),
        run_steps(connection, &alone_steps)
    );
    if let Err(err) = begun {
        return Outcome::Failed(err);
    }
    let mut outcomes = merged_outcomes;
    outcomes.extend(alone.into_iter().zip(alone_outcomes));
    let failed = outcomes
        .iter()
        .position(|(_, outcome)| matches!(outcome, Outcome::Failed(_)));
    let refused = outcomes
        .iter()
        .enumerate()
        .filter(|(_, (_, outcome))| matches!(outcome, Outcome::Refused(_)))
        .min_by_key(|(_, (step, _))| *step)
        .map(|(position, _)| position);
    match failed.or(refused) {
        Some(position) => outcomes.swap_remove(position).1,
        None => Outcome::Held,
    }
}

/// One batch inside the open transaction, under a savepoint: a refusal (or its own error) is
/// rolled back to the savepoint; `Err` when the group cannot go on (the connection is gone, or
/// a deadlock to retry the group for).
async fn one_batch(
    connection: &Connection,
    steps: &[&Step<'_>],
    last: bool,
) -> Result<Result<(), SpoolError>, Attempt> {
    let (saved, outcomes) = futures_util::join!(
        connection.client.batch_execute("SAVEPOINT batch"),
        run_steps(connection, steps)
    );
    let outcome = match saved {
        Err(err) => Outcome::Failed(err),
        Ok(()) => first_failure(outcomes),
    };
    let refusal = match outcome {
        Outcome::Held => {
            return simple(connection, "RELEASE SAVEPOINT batch")
                .await
                .map(Ok)
                .map_err(Attempt::Failed)
        }
        Outcome::Failed(err) if is_unreachable(&err) => {
            return Err(Attempt::Failed(store_error(err)))
        }
        Outcome::Failed(err) if is_retryable(&err) && !last => return Err(Attempt::Deadlocked),
        Outcome::Failed(err) => store_error(err),
        Outcome::Refused(refusal) => refusal,
    };
    simple(connection, "ROLLBACK TO SAVEPOINT batch")
        .await
        .map_err(Attempt::Failed)?;
    Ok(Err(refusal))
}

/// COMMIT; the batches in `committed` keep their results, or all share its failure.
async fn finish(
    connection: &Connection,
    results: Vec<Result<(), SpoolError>>,
    committed: &[usize],
) -> Vec<Result<(), SpoolError>> {
    match connection.client.batch_execute("COMMIT").await {
        Ok(()) => results,
        Err(err) if is_unreachable(&err) => fail_all(
            results,
            committed,
            SpoolError::Unavailable(format!(
                "the connection was lost during COMMIT, so whether the batch was written is \
                 unknown ({})",
                store_error(err)
            )),
        ),
        Err(err) => fail_all(results, committed, store_error(err)),
    }
}

fn fail_all(
    mut results: Vec<Result<(), SpoolError>>,
    which: &[usize],
    err: SpoolError,
) -> Vec<Result<(), SpoolError>> {
    for &i in which {
        results[i] = Err(same_error(&err));
    }
    results
}

async fn rollback(connection: &Connection) -> Result<(), SpoolError> {
    simple(connection, "ROLLBACK").await
}

async fn simple(connection: &Connection, sql: &str) -> Result<(), SpoolError> {
    connection
        .client
        .batch_execute(sql)
        .await
        .map_err(store_error)
}
