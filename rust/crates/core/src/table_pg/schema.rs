//! The schema: one table per Postwire table, `k bytea PRIMARY KEY, v bytea NOT NULL` (bytea
//! compares bytewise, as LMDB does, so scans return LMDB's order), and a version row that is
//! written when the schema is created and checked at every open.

use std::collections::HashMap;

use super::connection::{store_error, Connection};
use crate::spool::SpoolError;

/// The schema version this code creates and understands.
pub const SCHEMA_VERSION: i32 = 1;

/// Serializes schema creation between processes opening the store at once (`CREATE TABLE IF
/// NOT EXISTS` races on the catalog's unique indexes otherwise). An arbitrary constant.
const SCHEMA_LOCK: i64 = 0x706f_7374_7769_7265; // "postwire"

/// Each Postwire table's qualified SQL name, `"schema"."table"`.
pub(super) struct Tables {
    schema: String,
    qualified: HashMap<String, String>,
}

impl Tables {
    pub(super) fn new(schema: &str, names: &[String]) -> Result<Tables, SpoolError> {
        check_identifier(schema)?;
        let mut qualified = HashMap::new();
        for name in names {
            check_identifier(name)?;
            qualified.insert(name.clone(), format!("\"{schema}\".\"{name}\""));
        }
        Ok(Tables {
            schema: schema.to_string(),
            qualified,
        })
    }

    /// The SQL name of Postwire table `name`.
    pub(super) fn sql_name(&self, name: &str) -> Result<&str, SpoolError> {
        self.qualified
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| SpoolError::UnknownTable(name.to_string()))
    }

    /// Create what is missing and check the version, in one transaction under a lock.
    pub(super) async fn create(&self, connection: &Connection) -> Result<(), SpoolError> {
        let client = &connection.client;
        let schema = &self.schema;
        let mut ddl = format!(
            "BEGIN; SELECT pg_advisory_xact_lock({SCHEMA_LOCK}); \
             CREATE SCHEMA IF NOT EXISTS \"{schema}\"; \
             CREATE TABLE IF NOT EXISTS \"{schema}\"._schema_version (version integer NOT NULL);"
        );
        for table in self.qualified.values() {
            ddl.push_str(&format!(
                " CREATE TABLE IF NOT EXISTS {table} (k bytea PRIMARY KEY, v bytea NOT NULL);"
            ));
        }
        client.batch_execute(&ddl).await.map_err(store_error)?;
        let found = client
            .query_opt(
                &format!("SELECT max(version) FROM \"{schema}\"._schema_version"),
                &[],
            )
            .await
            .map_err(store_error)?
            .and_then(|row| row.get::<_, Option<i32>>(0));
        let checked = match found {
            Some(version) if version > SCHEMA_VERSION => Err(SpoolError::Invalid(format!(
                "the table store's schema \"{schema}\" is at version {version}, newer than this \
                 Postwire knows ({SCHEMA_VERSION}): run a Postwire at least as new as the one \
                 that upgraded it"
            ))),
            Some(_) => Ok(()),
            None => client
                .execute(
                    &format!("INSERT INTO \"{schema}\"._schema_version VALUES ($1)"),
                    &[&SCHEMA_VERSION],
                )
                .await
                .map(|_| ())
                .map_err(store_error),
        };
        let end = if checked.is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        client.batch_execute(end).await.map_err(store_error)?;
        checked
    }
}

/// Names are spliced into SQL: only plain lowercase identifiers are allowed.
fn check_identifier(name: &str) -> Result<(), SpoolError> {
    let mut chars = name.chars();
    let plain = matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && name.len() <= 63;
    if plain {
        Ok(())
    } else {
        Err(SpoolError::Invalid(format!(
            "'{name}' is not a plain lowercase SQL identifier"
        )))
    }
}

/// The statements a batch or a read runs, by what they do to one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Statement {
    /// `$1` key, `$2` value: set.
    Upsert,
    /// `$1` key, `$2` value: add if absent; returns a row only if it added.
    InsertIfAbsent,
    /// `$1` key.
    Delete,
    /// `$1` key: the value, row locked until the transaction ends.
    SelectForUpdate,
    /// `$1` key, `$2` delta: add to an ASCII decimal integer (absent: 0), saturating as LMDB's.
    AddCounter,
    /// `$1` key.
    Get,
    /// `$1` keys (an array): the rows of those present, as `k, v`.
    GetMany,
    /// No parameters.
    Count,
}

/// The statements that write many rows at once, `$1` the keys (distinct) and `$2` the values
/// or deltas, row for row: a group commit's rows of one kind and table share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum ManyRows {
    Upsert,
    /// Returns the keys it added.
    InsertIfAbsent,
    /// `$1` only.
    Delete,
    AddCounter,
}

impl ManyRows {
    /// The kind that writes `statement`'s rows, if it has one.
    pub(super) fn of(statement: Statement) -> Option<ManyRows> {
        match statement {
            Statement::Upsert => Some(ManyRows::Upsert),
            Statement::InsertIfAbsent => Some(ManyRows::InsertIfAbsent),
            Statement::Delete => Some(ManyRows::Delete),
            Statement::AddCounter => Some(ManyRows::AddCounter),
            _ => None,
        }
    }

    pub(super) fn sql(self, table: &str) -> String {
        const ROWS: &str = "SELECT * FROM unnest($1::bytea[], $2::bytea[])";
        match self {
            ManyRows::Upsert => format!(
                "INSERT INTO {table} (k, v) {ROWS} ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
            ),
            ManyRows::InsertIfAbsent => {
                format!("INSERT INTO {table} (k, v) {ROWS} ON CONFLICT (k) DO NOTHING RETURNING k")
            }
            ManyRows::Delete => format!("DELETE FROM {table} WHERE k = ANY($1::bytea[])"),
            ManyRows::AddCounter => format!(
                "INSERT INTO {table} AS t (k, v) SELECT d.k, convert_to(d.n::text, 'UTF8') \
                 FROM unnest($1::bytea[], $2::bigint[]) AS d(k, n) \
                 ON CONFLICT (k) DO UPDATE SET v = convert_to(GREATEST(LEAST( \
                 encode(t.v, 'escape')::bigint::numeric + encode(EXCLUDED.v, 'escape')::numeric, \
                 9223372036854775807), -9223372036854775808)::bigint::text, 'UTF8')"
            ),
        }
    }
}

impl Statement {
    pub(super) fn sql(self, table: &str) -> String {
        match self {
            Statement::Upsert => format!(
                "INSERT INTO {table} (k, v) VALUES ($1, $2) \
                 ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
            ),
            Statement::InsertIfAbsent => format!(
                "INSERT INTO {table} (k, v) VALUES ($1, $2) ON CONFLICT (k) DO NOTHING RETURNING k"
            ),
            Statement::Delete => format!("DELETE FROM {table} WHERE k = $1"),
            Statement::SelectForUpdate => format!("SELECT v FROM {table} WHERE k = $1 FOR UPDATE"),
            Statement::AddCounter => format!(
                "INSERT INTO {table} AS t (k, v) VALUES ($1, convert_to($2::bigint::text, 'UTF8')) \
                 ON CONFLICT (k) DO UPDATE SET v = convert_to(GREATEST(LEAST( \
                 encode(t.v, 'escape')::bigint::numeric + $2::bigint, 9223372036854775807), \
                 -9223372036854775808)::bigint::text, 'UTF8')"
            ),
            Statement::Get => format!("SELECT v FROM {table} WHERE k = $1"),
            Statement::GetMany => format!("SELECT k, v FROM {table} WHERE k = ANY($1::bytea[])"),
            Statement::Count => format!("SELECT count(*) FROM {table}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_identifiers_reach_sql() {
        assert!(check_identifier("email_index").is_ok());
        assert!(check_identifier("_schema").is_ok());
        for bad in ["", "Emails", "a-b", "1a", "a\"; DROP TABLE x; --"] {
            assert!(check_identifier(bad).is_err(), "{bad}");
        }
    }
}
