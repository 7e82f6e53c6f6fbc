//! The names MCP tools are offered as, `mcp__<server>__<tool>`, kept unambiguous: a server name
//! holds no `__` and neither starts nor ends with `_`, so the first `__` after `mcp__` always
//! ends the server's name and no two (server, tool) pairs give one name. Every name is one a
//! model API accepts as a function name.

/// The longest name offered to the model: OpenAI's limit for function names (Anthropic's is
/// the same or longer), so a request never fails for a tool's name.
pub const MAX_TOOL_NAME: usize = 64;
/// What `mcp__` and `__` take of `MAX_TOOL_NAME`, with a one-character tool name.
pub const MAX_SERVER_NAME: usize = MAX_TOOL_NAME - "mcp__".len() - "__".len() - 1;

/// The name a server's tool is offered as.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
}

/// The characters model APIs accept in a function name.
fn in_alphabet(name: &str) -> bool {
    name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Why `name` cannot name a server, if it cannot.
pub fn server_name_problem(name: &str) -> Option<String> {
    let problem = if name.is_empty() || !in_alphabet(name) {
        "must be letters, digits, '_' or '-'"
    } else if name.contains("__") || name.starts_with('_') || name.ends_with('_') {
        // `h` with tool `b__c` and `h__b` with tool `c` would both be `mcp__h__b__c`.
        "may not hold '__' or start or end with '_' (tool names would be ambiguous)"
    } else if name.len() > MAX_SERVER_NAME {
        return Some(format!(
            "must be at most {MAX_SERVER_NAME} characters (its tools' names are at most {MAX_TOOL_NAME})"
        ));
    } else {
        return None;
    };
    Some(problem.to_string())
}

/// Why the tool a server lists as `tool` cannot be offered, if it cannot.
pub fn tool_name_problem(server: &str, tool: &str) -> Option<String> {
    if tool.is_empty() {
        return Some("its name is empty".into());
    }
    if !in_alphabet(tool) {
        return Some("its name is not only letters, digits, '_' or '-'".into());
    }
    let length = tool_name(server, tool).len();
    if length > MAX_TOOL_NAME {
        return Some(format!(
            "its full name would be {length} characters, more than the {MAX_TOOL_NAME} model APIs accept"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_named_after_their_server() {
        assert_eq!(tool_name("everything", "echo"), "mcp__everything__echo");
    }

    #[test]
    fn server_names_that_could_make_two_tools_one_name_are_refused() {
        let long = "s".repeat(MAX_SERVER_NAME);
        let too_long = "s".repeat(MAX_SERVER_NAME + 1);
        let table: &[(&str, Option<&str>)] = &[
            ("files", None),
            ("my-files", None),
            ("a_b", None),
            ("A1", None),
            (&long, None),
            ("", Some("must be letters, digits, '_' or '-'")),
            ("a b", Some("must be letters, digits, '_' or '-'")),
            ("a\nb", Some("must be letters, digits, '_' or '-'")),
            ("é", Some("must be letters, digits, '_' or '-'")),
            (
                "h__b",
                Some("may not hold '__' or start or end with '_' (tool names would be ambiguous)"),
            ),
            (
                "h_",
                Some("may not hold '__' or start or end with '_' (tool names would be ambiguous)"),
            ),
            (
                "_h",
                Some("may not hold '__' or start or end with '_' (tool names would be ambiguous)"),
            ),
            (
                "_",
                Some("may not hold '__' or start or end with '_' (tool names would be ambiguous)"),
            ),
            (
                &too_long,
                Some("must be at most 56 characters (its tools' names are at most 64)"),
            ),
        ];
        for (name, expected) in table {
            assert_eq!(server_name_problem(name).as_deref(), *expected, "server name {name:?}");
        }
    }

    #[test]
    fn tool_names_a_model_api_would_refuse_are_named() {
        let fits = "t".repeat(MAX_TOOL_NAME - "mcp__s__".len());
        let over = "t".repeat(MAX_TOOL_NAME - "mcp__s__".len() + 1);
        let huge = "t".repeat(10 * 1024);
        let table: &[(&str, Option<&str>)] = &[
            ("echo", None),
            ("get-sum", None),
            ("b__c", None),
            ("_private", None),
            (&fits, None),
            ("", Some("its name is empty")),
            ("a\nb", Some("its name is not only letters, digits, '_' or '-'")),
            ("a\u{0}b", Some("its name is not only letters, digits, '_' or '-'")),
            ("files.read", Some("its name is not only letters, digits, '_' or '-'")),
            ("read file", Some("its name is not only letters, digits, '_' or '-'")),
            (
                &over,
                Some("its full name would be 65 characters, more than the 64 model APIs accept"),
            ),
            (
                &huge,
                Some("its full name would be 10248 characters, more than the 64 model APIs accept"),
            ),
        ];
        for (tool, expected) in table {
            assert_eq!(tool_name_problem("s", tool).as_deref(), *expected, "tool name {tool:?}");
        }
    }

    #[test]
    fn no_two_valid_pairs_share_a_name() {
        let servers = ["h", "h-b", "hb", "h_b", "b", "a1"];
        let tools = ["c", "b__c", "_c", "c_", "__c", "b_c", "-c"];
        let mut seen = std::collections::HashMap::new();
        for server in servers {
            assert_eq!(server_name_problem(server), None);
            for tool in tools {
                if let Some(other) = seen.insert(tool_name(server, tool), (server, tool)) {
                    panic!("{server}/{tool} and {other:?} share a name");
                }
            }
        }
    }
}
