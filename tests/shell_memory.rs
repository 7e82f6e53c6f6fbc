//! A command printing a gigabyte leaves Bash's memory flat: the output is read as it comes and
//! only its two ends are kept. Alone in its process, so the peak RSS is this test's own.

use agent_runtime_hooks::builtins::{Builtin, Call, State, Workspace};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// A `VmRSS`/`VmHWM` line of /proc/self/status, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|line| line.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_gigabyte_of_output_keeps_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace {
        roots: vec![dir.path().into()],
        cwd: Some(dir.path().into()),
    };
    let state = State::default();
    let call = Call {
        workspace: &workspace,
        state: &state,
        cancel: CancellationToken::new(),
    };
    let before = status_kib("VmRSS:");
    let input = json!({"command": "yes | head -c 1000000000", "timeout": 300_000});
    let answer = Builtin::Bash.run(input.as_object().unwrap(), call).await;
    let peak = status_kib("VmHWM:");
    assert!(!answer.failed, "{}", answer.text);
    let result: Value = serde_json::from_str(&answer.text).unwrap();
    assert_eq!(result["exit_code"], 0);
    let stdout = result["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("y\ny\n") && stdout.ends_with("y\ny"));
    assert!(stdout.contains("(499999900 lines truncated, showing first 50 and last 50 of 500000000 total)"));
    assert_eq!(
        result["truncation_info"],
        format!(
            "Output truncated: stdout: 500000000 lines → 103 lines ({} of 999999999 chars kept)",
            stdout.chars().count()
        )
    );
    let growth_mib = peak.saturating_sub(before) / 1024;
    assert!(growth_mib < 64, "peak RSS grew by {growth_mib} MiB");
}
