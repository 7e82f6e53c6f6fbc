//! `advanced.store` (and Blade's `storagePath`): which store the options name, read into a
//! [`StoreConfig`]. A PostgreSQL URL may hold a password: a wrong one is described without its
//! user-info and query.

use serde_json::Value;

use super::{check_postgres_url, check_sqlite_path, StoreConfig};
use crate::error::{Result, SdkError};
use crate::options::OptionsObject;

impl StoreConfig {
    /// Reads `advanced`: no `store` is in memory; `{ sqlite: path }` or `{ postgres: url }`.
    /// Blade's `storagePath` (with `persistSession` not `false`) means
    /// `{ sqlite: <storagePath>/sessions.db }`; an explicit `store` wins.
    pub fn read(advanced: &OptionsObject) -> Result<Self> {
        if let Some(value) = advanced.get("store") {
            let store = OptionsObject::of(
                value,
                "advanced.store",
                "an object like { sqlite: path } or { postgres: url }",
            )?;
            store.only(&["sqlite", "postgres"], &[])?;
            if store.get("sqlite").is_some() && store.get("postgres").is_some() {
                return Err(SdkError::config(
                    "advanced.store takes one database: { sqlite: path } or { postgres: url }, not both",
                )
                .at("advanced.store"));
            }
            if let Some(url) = store.secret("postgres")? {
                if url.trim().is_empty() {
                    return Err(store.error("postgres", "must be a postgres:// URL (got an empty string)"));
                }
                check_postgres_url(&url).map_err(|problem| store.error("postgres", problem))?;
                return Ok(StoreConfig::Postgres(url));
            }
            return match store.string("sqlite")?.filter(|path| !path.trim().is_empty()) {
                Some(path) => {
                    check_sqlite_path(&path).map_err(|problem| store.error("sqlite", problem))?;
                    Ok(StoreConfig::Sqlite(path.into()))
                }
                None => Err(SdkError::config(
                    "advanced.store must name its database: { sqlite: path } or { postgres: url }",
                )
                .at("advanced.store")),
            };
        }
        let persist = match advanced.get("persistSession") {
            None => true,
            Some(Value::Bool(persist)) => *persist,
            Some(other) => return Err(advanced.invalid("persistSession", "a boolean", other)),
        };
        match advanced.string("storagePath")? {
            Some(path) if persist && !path.trim().is_empty() => {
                Ok(StoreConfig::Sqlite(std::path::Path::new(&path).join("sessions.db")))
            }
            _ => Ok(StoreConfig::Memory),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(advanced: Value) -> Result<StoreConfig> {
        StoreConfig::read(&OptionsObject::of(&advanced, "advanced", "an object")?)
    }

    fn store_config(store: Value) -> Result<StoreConfig> {
        read(json!({ "store": store }))
    }

    #[test]
    fn the_store_is_sqlite_or_postgres() {
        assert_eq!(read(json!({})).unwrap(), StoreConfig::Memory);
        assert_eq!(
            store_config(json!({"sqlite": "/data/s.db"})).unwrap(),
            StoreConfig::Sqlite("/data/s.db".into())
        );
        for url in [
            "postgres://app:pw@db.internal:5432/agents?sslmode=verify-full",
            "postgresql://localhost/agents",
            "postgres:///agents?host=/var/run/postgresql",
        ] {
            assert_eq!(
                store_config(json!({ "postgres": url })).unwrap(),
                StoreConfig::Postgres(url.into())
            );
        }
    }

    #[test]
    fn a_storage_path_is_a_sqlite_file_in_it_unless_sessions_are_not_persisted() {
        assert_eq!(
            read(json!({"storagePath": "/data"})).unwrap(),
            StoreConfig::Sqlite("/data/sessions.db".into())
        );
        assert_eq!(
            read(json!({"storagePath": "/data", "persistSession": false})).unwrap(),
            StoreConfig::Memory
        );
        assert_eq!(
            read(json!({"storagePath": "/data", "store": {"sqlite": "/other/s.db"}})).unwrap(),
            StoreConfig::Sqlite("/other/s.db".into())
        );
        assert_eq!(
            read(json!({"persistSession": "no"})).unwrap_err().message,
            "advanced.persistSession must be a boolean (got \"no\")"
        );
    }

    #[test]
    fn a_bad_postgres_url_is_named_without_its_secrets() {
        const SECRET: &str = "s3cr3t-918273645";
        let cases = [
            (json!({"postgres": format!("postgres://app:{SECRET}@db:99999/x?password={SECRET}")}), "advanced.store.postgres must be a postgres:// URL (\"postgres://db:99999/x\": invalid port number)"),
            (json!({"postgres": format!("mysql://app:{SECRET}@db/x")}), "advanced.store.postgres must be a postgres:// URL (\"mysql://db/x\": the scheme is mysql)"),
            (json!({"postgres": format!("postgres://app:{SECRET}@db/x?sslmode={SECRET}")}), "advanced.store.postgres must be a postgres:// URL (\"postgres://db/x\": unknown value \"***\" for `ssl_mode`)"),
            (json!({"postgres": format!("postgres://db/x?pasword={SECRET}")}), "advanced.store.postgres must be a postgres:// URL (\"postgres://db/x\": unknown parameter pasword)"),
            (json!({"postgres": format!("{SECRET}")}), "advanced.store.postgres must be a postgres:// URL (\"s3cr3t-918273645\": relative URL without a base)"),
            (json!({"postgres": 918273645}), "advanced.store.postgres must be a string (got a number)"),
            (json!({"postgres": " "}), "advanced.store.postgres must be a postgres:// URL (got an empty string)"),
            (json!({"postgres": "postgres://db/x", "sqlite": "s.db"}), "advanced.store takes one database: { sqlite: path } or { postgres: url }, not both"),
            (json!({"mysql": "x"}), "advanced.store.mysql is not a known option (known here: sqlite, postgres)"),
            (json!({}), "advanced.store must name its database: { sqlite: path } or { postgres: url }"),
            (json!({"sqlite": ":memory:"}), "advanced.store.sqlite must be a file path (got \":memory:\"): an in-memory SQLite database (\":memory:\", or its shared-cache form \"file::memory:?cache=shared\") cannot hold the store, which uses several connections; for sessions kept in memory leave advanced.store out"),
        ];
        for (store, expected) in cases {
            let error = store_config(store.clone()).unwrap_err();
            assert_eq!(error.code, crate::error::ErrorCode::Config);
            assert_eq!(error.message, expected, "for {store}");
        }
    }

    #[test]
    fn a_postgres_store_shows_its_url_without_secrets() {
        let config = StoreConfig::Postgres("postgres://app:pw-918273645@db/x?password=918273645".into());
        assert_eq!(format!("{config:?}"), "Postgres(\"postgres://db/x\")");
    }
}
