//! What a connection pooler in front of PostgreSQL (PgBouncer) refuses, and the fix an error
//! names: a refused startup parameter, or the traces of transaction pooling (a named prepared
//! statement found on a server connection another client prepared it on, or missing from the
//! one this client was given).

/// The URL parameter that makes the store work through transaction pooling (`?pgbouncer=true`).
pub const SWITCH: &str = "pgbouncer";

/// `cause` with the fix appended when it is a pooler's refusal (it names no secret: a pooler's
/// words about a startup parameter or a statement name).
pub fn explain(cause: String) -> String {
    match fix(&cause) {
        Some(fix) => format!("{cause} ({fix})"),
        None => cause,
    }
}

fn fix(cause: &str) -> Option<&'static str> {
    if cause.contains("unsupported startup parameter") {
        return Some(
            "a connection pooler refused a startup parameter the URL asks for: leave `options` out of the URL, \
             or add the parameter to PgBouncer's ignore_startup_parameters",
        );
    }
    let prepared = cause.contains("prepared statement \"sqlx_s_")
        && (cause.contains("already exists") || cause.contains("does not exist"));
    if prepared || cause.contains("unnamed prepared statement does not exist") {
        return Some(
            "the URL leads to a connection pooler in transaction mode, which hands each transaction another server \
             connection: add pgbouncer=true to the URL's query",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::explain;

    #[test]
    fn a_poolers_refusal_names_the_fix_and_other_causes_are_kept() {
        let startup = explain("error returned from database: unsupported startup parameter: options".into());
        assert!(
            startup.ends_with("add the parameter to PgBouncer's ignore_startup_parameters)"),
            "{startup}"
        );
        for cause in [
            "error returned from database: prepared statement \"sqlx_s_1\" already exists",
            "error returned from database: prepared statement \"sqlx_s_12\" does not exist",
            "error returned from database: unnamed prepared statement does not exist",
        ] {
            assert!(
                explain(cause.into()).ends_with("add pgbouncer=true to the URL's query)"),
                "{cause}"
            );
        }
        let other = "error returned from database: relation \"leases\" does not exist";
        assert_eq!(explain(other.into()), other);
        let own = "error returned from database: prepared statement \"mine\" already exists";
        assert_eq!(explain(own.into()), own);
    }
}
