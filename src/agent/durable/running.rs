//! The sub-agents at work in a session's current turn (SPEC §8.7), as of their last turn
//! boundaries: what a crash must not lose of a tree that has not paused. Each sub-agent's
//! boundary replaces the session's `running` value with every snapshot the tree holds; the
//! session's own save clears it (nothing of the tree is at work then, or the pause holds it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Message;
use crate::store;

/// A sub-agent at work inside a `Task` call, as of its last turn boundary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunningChild {
    /// The `Task` call ids from the root's down to the one that started it.
    pub chain: Vec<String>,
    /// Sub-agent names from the root's child down to this one.
    pub agent_path: Vec<String>,
    /// Its run's id (`subOperationId`).
    pub operation_id: String,
    /// Its conversation at the boundary, without its system prompt.
    #[serde(with = "store::stored_messages")]
    pub messages: Vec<Message>,
    /// The model turns it has taken.
    pub turns: u32,
}

/// Every snapshot of the tree at work, by place (its `chain`).
#[derive(Debug, Default)]
pub struct Running(BTreeMap<Vec<String>, RunningChild>);

impl Running {
    /// `child`'s snapshot replaces its last one.
    pub fn update(&mut self, child: RunningChild) {
        self.0.insert(child.chain.clone(), child);
    }

    /// A finished sub-agent is no longer at work.
    pub fn finished(&mut self, chain: &[String]) {
        self.0.remove(chain);
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// What the session's `running` value holds: the snapshots in place order.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self.0.values().collect::<Vec<_>>()).unwrap_or_default()
    }
}

/// The stored `running` value read back; one that cannot be read is taken as none (it only
/// saves model turns: the calls themselves are judged by the effects ledger either way).
pub fn read(value: Option<&serde_json::Value>) -> Vec<RunningChild> {
    value
        .and_then(|value| serde_json::from_value(value.clone()).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::UserContent;

    fn child(chain: &[&str], turns: u32) -> RunningChild {
        RunningChild {
            chain: chain.iter().map(|id| id.to_string()).collect(),
            agent_path: vec!["worker".into()],
            operation_id: "run".into(),
            messages: vec![Message::User {
                content: UserContent::Text("do it".into()),
            }],
            turns,
        }
    }

    #[test]
    fn a_boundary_replaces_its_own_snapshot_and_reads_back() {
        let mut running = Running::default();
        running.update(child(&["b"], 1));
        running.update(child(&["a"], 1));
        running.update(child(&["a"], 2));
        let value = running.to_value();
        assert_eq!(read(Some(&value)), vec![child(&["a"], 2), child(&["b"], 1)]);
        running.finished(&["a".to_string()]);
        assert_eq!(read(Some(&running.to_value())), vec![child(&["b"], 1)]);
        assert_eq!(read(Some(&serde_json::json!({"not": "a list"}))), vec![]);
        assert_eq!(read(None), vec![]);
    }
}
