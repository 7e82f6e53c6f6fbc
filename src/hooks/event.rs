//! The session events callbacks can be registered for.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
    PostToolUseFailure,
    PermissionRequest,
    UserPromptSubmit,
    SessionStart,
    SessionEnd,
    TaskCompleted,
}

impl HookEvent {
    pub const ALL: [HookEvent; 8] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::PermissionRequest,
        HookEvent::UserPromptSubmit,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::TaskCompleted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::TaskCompleted => "TaskCompleted",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        HookEvent::ALL.into_iter().find(|event| event.name() == name)
    }

    /// Position in [`HookEvent::ALL`], for per-event tables.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Tool events turn callback failures into failed tool calls; the others propagate them.
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PostToolUseFailure
                | HookEvent::PermissionRequest
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_index_matches_all() {
        for (index, event) in HookEvent::ALL.into_iter().enumerate() {
            assert_eq!(HookEvent::parse(event.name()), Some(event));
            assert_eq!(event.index(), index);
        }
        assert_eq!(HookEvent::parse("StepStart"), None);
    }
}
