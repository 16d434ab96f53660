//! Reads: one key, a prefix range in key order (or reversed) after a cursor, a table's size.
//! Each is one statement on a pooled connection, outside any transaction; gets of one table
//! that wait together share one.

use std::collections::HashMap;

use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::connection::{store_error, Pool};
use super::schema::{Statement, Tables};
use crate::spool::{prefix_successor, SpoolError};

/// The rows `sql` answers with `params`, on a pooled connection (prepared once on it).
async fn query(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, SpoolError> {
    let connection = pool.get().await?;
    let statement = connection.statement(sql).await.map_err(store_error)?;
    connection
        .client
        .query(&statement, params)
        .await
        .map_err(store_error)
}

pub(super) async fn get(
    pool: &Pool,
    tables: &Tables,
    table: &str,
    key: &[u8],
) -> Result<Option<Vec<u8>>, SpoolError> {
    let sql = Statement::Get.sql(tables.sql_name(table)?);
    let rows = query(pool, &sql, &[&key]).await?;
    Ok(rows.first().map(|row| row.get(0)))
}

/// The values of `keys` (of one table) in one statement, by key; absent keys are left out.
pub(super) async fn get_many(
    pool: &Pool,
    tables: &Tables,
    table: &str,
    keys: &[&[u8]],
) -> Result<HashMap<Vec<u8>, Vec<u8>>, SpoolError> {
    let sql = Statement::GetMany.sql(tables.sql_name(table)?);
    let rows = query(pool, &sql, &[&keys]).await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect())
}

pub(super) async fn count(pool: &Pool, tables: &Tables, table: &str) -> Result<u64, SpoolError> {
    let sql = Statement::Count.sql(tables.sql_name(table)?);
    let rows = query(pool, &sql, &[]).await?;
    let count = rows.first().map_or(0, |row| row.get::<_, i64>(0));
    Ok(u64::try_from(count).unwrap_or(0))
}

/// What a scan asks for, as `Spool::scan` takes it.
pub struct ScanRequest {
    pub table: String,
    pub prefix: Vec<u8>,
    pub cursor: Option<Vec<u8>>,
    pub reverse: bool,
    pub limit: usize,
}

pub(super) async fn scan(
    pool: &Pool,
    tables: &Tables,
    request: &ScanRequest,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>, SpoolError> {
    let table = tables.sql_name(&request.table)?;
    if request.limit == 0 {
        return Ok(Vec::new());
    }
    let range = KeyRange::of(request);
    let limit = i64::try_from(request.limit).unwrap_or(i64::MAX);
    let mut conditions = Vec::new();
    let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
    if let Some((bound, inclusive)) = &range.lower {
        params.push(bound);
        let op = if *inclusive { ">=" } else { ">" };
        conditions.push(format!("k {op} ${}", params.len()));
    }
    if let Some(bound) = &range.upper {
        params.push(bound);
        conditions.push(format!("k < ${}", params.len()));
    }
    params.push(&limit);
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    };
    let order = if request.reverse { "DESC" } else { "ASC" };
    let sql = format!(
        "SELECT k, v FROM {table}{filter} ORDER BY k {order} LIMIT ${}",
        params.len()
    );
    let rows = query(pool, &sql, &params).await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect())
}

/// The keys a scan may return: `lower` (inclusive or not) up to `upper` (exclusive), the same
/// bounds the LMDB spool computes, so both stores return the same rows.
#[derive(Debug, PartialEq)]
struct KeyRange {
    lower: Option<(Vec<u8>, bool)>,
    upper: Option<Vec<u8>>,
}

impl KeyRange {
    fn of(request: &ScanRequest) -> KeyRange {
        let prefix = request.prefix.as_slice();
        let prefix_end = prefix_successor(prefix);
        let cursor = request.cursor.as_deref();
        let lower = match (request.reverse, cursor) {
            (false, Some(c)) if c >= prefix => Some((c.to_vec(), false)),
            _ if prefix.is_empty() => None,
            _ => Some((prefix.to_vec(), true)),
        };
        let upper = match (request.reverse, cursor, prefix_end) {
            (true, Some(c), end) if end.as_deref().is_none_or(|e| c < e) => Some(c.to_vec()),
            (_, _, end) => end,
        };
        KeyRange { lower, upper }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(prefix: &[u8], cursor: Option<&[u8]>, reverse: bool) -> KeyRange {
        KeyRange::of(&ScanRequest {
            table: "t".into(),
            prefix: prefix.to_vec(),
            cursor: cursor.map(<[u8]>::to_vec),
            reverse,
            limit: 10,
        })
    }

    #[test]
    fn a_prefix_is_a_half_open_key_range() {
        assert_eq!(
            range(b"ab", None, false),
            KeyRange {
                lower: Some((b"ab".to_vec(), true)),
                upper: Some(b"ac".to_vec())
            }
        );
        assert_eq!(range(b"a\xff\xff", None, false).upper, Some(b"b".to_vec()));
        assert_eq!(range(b"\xff", None, false).upper, None);
        assert_eq!(
            range(b"", None, true),
            KeyRange {
                lower: None,
                upper: None
            }
        );
    }

    #[test]
    fn a_cursor_narrows_the_range_on_the_side_the_scan_moves_from() {
        assert_eq!(
            range(b"a", Some(b"ab"), false).lower,
            Some((b"ab".to_vec(), false))
        );
        assert_eq!(range(b"a", Some(b"ab"), true).upper, Some(b"ab".to_vec()));
        // A cursor past the prefix's range leaves the range as the prefix makes it.
        assert_eq!(range(b"a", Some(b"c"), true).upper, Some(b"b".to_vec()));
        assert_eq!(
            range(b"b", Some(b"a"), false).lower,
            Some((b"b".to_vec(), true))
        );
    }
}
