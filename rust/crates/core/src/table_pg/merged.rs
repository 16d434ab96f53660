//! The fast path of a group commit writes rows of one kind and table, from every batch of the
//! group, with one statement (`unnest` of a key array and a value array) instead of one
//! statement a row: a relayed message writes about thirty rows in eight tables, and each
//! statement costs the server a parse-free but still whole executor run and the client an
//! encode and a decode.
//!
//! Only keys that one step of the group touches are merged, so the order between the merged
//! rows and everything else cannot change what the group leaves behind; keys touched twice
//! (an assertion and its write, a put then a delete) keep their statements in order. Counter
//! additions are the exception: several additions to a key, and nothing else on it, become one
//! addition of their sum. Rows are sent in key order, so two nodes' groups lock shared rows in
//! the same order. When a merged insert finds a key taken, the group is run again batch by
//! batch (see `commit.rs`), where each batch's statements run one by one as before.

use std::collections::{HashMap, HashSet};

use tokio_postgres::types::ToSql;

use super::commit::{judged, Outcome, Step, Value};
use super::connection::Connection;
use super::schema::ManyRows;

/// Rows of one kind and table, in key order, with the steps (by index) each row answers for.
pub(super) struct Merged<'a> {
    kind: ManyRows,
    sql_table: &'a str,
    rows: Vec<Row<'a>>,
}

struct Row<'a> {
    key: &'a [u8],
    value: RowValue<'a>,
    steps: Vec<usize>,
}

enum RowValue<'a> {
    None,
    Bytes(&'a [u8]),
    Delta(i64),
}

/// Split `steps` into those run one by one (by index, in order) and the merged rows.
pub(super) fn plan<'a>(steps: &[&'a Step<'a>]) -> (Vec<usize>, Vec<Merged<'a>>) {
    let mut touches: HashMap<(&str, &[u8]), (usize, bool)> = HashMap::new();
    for step in steps {
        let entry = touches.entry((step.table, step.key)).or_insert((0, true));
        entry.0 += 1;
        entry.1 &= matches!(step.value, Value::Delta(_));
    }
    let mut alone = Vec::new();
    let mut groups: Vec<Merged<'a>> = Vec::new();
    let mut group_of: HashMap<(ManyRows, &str), usize> = HashMap::new();
    let mut counter_row: HashMap<(&str, &[u8]), (usize, usize)> = HashMap::new();
    for (index, step) in steps.iter().enumerate() {
        let (times, only_counted) = touches[&(step.table, step.key)];
        let kind = ManyRows::of(step.statement).filter(|_| times == 1 || only_counted);
        let Some(kind) = kind else {
            alone.push(index);
            continue;
        };
        let group = *group_of.entry((kind, step.table)).or_insert_with(|| {
            groups.push(Merged {
                kind,
                sql_table: step.sql_table,
                rows: Vec::new(),
            });
            groups.len() - 1
        });
        if let (Value::Delta(delta), true) = (&step.value, only_counted) {
            if let Some(&(g, r)) = counter_row.get(&(step.table, step.key)) {
                let row = &mut groups[g].rows[r];
                if let RowValue::Delta(sum) = &mut row.value {
                    *sum = sum.saturating_add(*delta);
                }
                row.steps.push(index);
                continue;
            }
            counter_row.insert((step.table, step.key), (group, groups[group].rows.len()));
        }
        let value = match &step.value {
            Value::None => RowValue::None,
            Value::Bytes(bytes) => RowValue::Bytes(bytes),
            Value::Owned(bytes) => RowValue::Bytes(bytes),
            Value::Delta(delta) => RowValue::Delta(*delta),
        };
        groups[group].rows.push(Row {
            key: step.key,
            value,
            steps: vec![index],
        });
    }
    // A group of one row is as cheap as its own statement, which is already prepared.
    let mut merged = Vec::new();
    for mut group in groups {
        if group.rows.len() == 1 && group.rows[0].steps.len() == 1 {
            alone.extend(&group.rows[0].steps);
        } else {
            group.rows.sort_unstable_by(|a, b| a.key.cmp(b.key));
            merged.push(group);
        }
    }
    alone.sort_unstable();
    merged.sort_by_key(|group| group.sql_table);
    (alone, merged)
}

/// Run the merged statements, pipelined: each step's outcome, by index; a statement that
/// failed answers for its first step only (the error cannot be shared).
pub(super) async fn run(
    connection: &Connection,
    steps: &[&Step<'_>],
    merged: &[Merged<'_>],
) -> Vec<(usize, Outcome)> {
    let answers = futures_util::future::join_all(merged.iter().map(|group| async move {
        let statement = connection
            .statement(&group.kind.sql(group.sql_table))
            .await?;
        let keys: Vec<&[u8]> = group.rows.iter().map(|row| row.key).collect();
        let values: Vec<&[u8]> = group.rows.iter().map(|row| row.value.bytes()).collect();
        let deltas: Vec<i64> = group.rows.iter().map(|row| row.value.delta()).collect();
        let params: Vec<&(dyn ToSql + Sync)> = match group.kind {
            ManyRows::Delete => vec![&keys],
            ManyRows::AddCounter => vec![&keys, &deltas],
            ManyRows::Upsert | ManyRows::InsertIfAbsent => vec![&keys, &values],
        };
        connection.client.query(&statement, &params).await
    }))
    .await;
    let mut outcomes = Vec::new();
    for (group, answer) in merged.iter().zip(answers) {
        let rows = match answer {
            Ok(rows) => rows,
            Err(err) => {
                outcomes.push((group.rows[0].steps[0], Outcome::Failed(err)));
                continue;
            }
        };
        let added: HashSet<&[u8]> = match group.kind {
            ManyRows::InsertIfAbsent => rows.iter().map(|row| row.get::<_, &[u8]>(0)).collect(),
            _ => HashSet::new(),
        };
        for row in &group.rows {
            for &index in &row.steps {
                let held = group.kind != ManyRows::InsertIfAbsent || added.contains(row.key);
                outcomes.push((index, judged(steps[index], held)));
            }
        }
    }
    outcomes
}

impl RowValue<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            RowValue::Bytes(bytes) => bytes,
            RowValue::None | RowValue::Delta(_) => &[],
        }
    }

    fn delta(&self) -> i64 {
        match self {
            RowValue::Delta(delta) => *delta,
            RowValue::None | RowValue::Bytes(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table_pg::commit::Expect;
    use crate::table_pg::schema::Statement;

    fn step<'a>(statement: Statement, key: &'a [u8], value: Value<'a>) -> Step<'a> {
        Step {
            statement,
            table: "t",
            sql_table: "\"s\".\"t\"",
            key,
            value,
            expect: Expect::Anything,
        }
    }

    #[test]
    fn keys_touched_once_are_merged_by_kind_and_the_others_keep_their_order() {
        let steps = [
            step(Statement::Upsert, b"b", Value::Bytes(b"1")),
            step(Statement::Upsert, b"twice", Value::Bytes(b"1")),
            step(Statement::Upsert, b"a", Value::Bytes(b"2")),
            step(Statement::Delete, b"twice", Value::None),
            step(Statement::Delete, b"gone", Value::None),
            step(Statement::AddCounter, b"n", Value::Delta(2)),
            step(Statement::AddCounter, b"n", Value::Delta(-5)),
            step(Statement::AddCounter, b"m", Value::Delta(1)),
        ];
        let refs: Vec<&Step<'_>> = steps.iter().collect();
        let (alone, merged) = plan(&refs);
        // The key written twice keeps both statements, in order; the lone delete stays itself.
        assert_eq!(alone, vec![1, 3, 4]);
        assert_eq!(merged.len(), 2);
        let upserts = &merged[0];
        assert_eq!(upserts.kind, ManyRows::Upsert);
        let keys: Vec<&[u8]> = upserts.rows.iter().map(|row| row.key).collect();
        assert_eq!(keys, vec![&b"a"[..], &b"b"[..]], "rows go in key order");
        let counters = &merged[1];
        assert_eq!(counters.kind, ManyRows::AddCounter);
        let sums: Vec<(&[u8], i64, Vec<usize>)> = counters
            .rows
            .iter()
            .map(|row| (row.key, row.value.delta(), row.steps.clone()))
            .collect();
        assert_eq!(
            sums,
            vec![(&b"m"[..], 1, vec![7]), (&b"n"[..], -3, vec![5, 6])]
        );
    }

    #[test]
    fn a_counter_key_also_written_otherwise_is_not_summed() {
        let steps = [
            step(Statement::Upsert, b"n", Value::Bytes(b"10")),
            step(Statement::AddCounter, b"n", Value::Delta(1)),
            step(Statement::AddCounter, b"n", Value::Delta(1)),
        ];
        let refs: Vec<&Step<'_>> = steps.iter().collect();
        let (alone, merged) = plan(&refs);
        assert_eq!(alone, vec![0, 1, 2]);
        assert!(merged.is_empty());
    }
}
