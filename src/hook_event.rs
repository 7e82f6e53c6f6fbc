//! Hook events: the eight session events of the inline-hook contract, and the lifecycle events
//! of the server-side contract, with their aliases (`beforeToolCall` = PreToolUse, …). Ground
//! floor: hooks dispatch them and webhook configs are checked against them, so the vocabulary
//! imports nothing.

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
    StepStart,
    StepEnd,
    StopFailure,
    HumanInterventionRequest,
    HumanInterventionResult,
    HumanInterventionStop,
    PreCompact,
    PostCompact,
    CompactFailure,
    SubagentStart,
    SubagentStarted,
    SubagentFailure,
}

pub const EVENT_COUNT: usize = 20;

impl HookEvent {
    pub const ALL: [HookEvent; EVENT_COUNT] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::PermissionRequest,
        HookEvent::UserPromptSubmit,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::TaskCompleted,
        HookEvent::StepStart,
        HookEvent::StepEnd,
        HookEvent::StopFailure,
        HookEvent::HumanInterventionRequest,
        HookEvent::HumanInterventionResult,
        HookEvent::HumanInterventionStop,
        HookEvent::PreCompact,
        HookEvent::PostCompact,
        HookEvent::CompactFailure,
        HookEvent::SubagentStart,
        HookEvent::SubagentStarted,
        HookEvent::SubagentFailure,
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
            HookEvent::StepStart => "StepStart",
            HookEvent::StepEnd => "StepEnd",
            HookEvent::StopFailure => "StopFailure",
            HookEvent::HumanInterventionRequest => "HumanInterventionRequest",
            HookEvent::HumanInterventionResult => "HumanInterventionResult",
            HookEvent::HumanInterventionStop => "HumanInterventionStop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::PostCompact => "PostCompact",
            HookEvent::CompactFailure => "CompactFailure",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStarted => "SubagentStarted",
            HookEvent::SubagentFailure => "SubagentFailure",
        }
    }

    /// The lifecycle alias of the server-side contract, where there is one.
    pub fn alias(self) -> Option<&'static str> {
        Some(match self {
            HookEvent::PreToolUse => "beforeToolCall",
            HookEvent::PostToolUse => "afterToolCall",
            HookEvent::PostToolUseFailure => "onToolCallError",
            HookEvent::TaskCompleted => "onComplete",
            HookEvent::StopFailure => "onError",
            HookEvent::StepStart => "beforeStep",
            HookEvent::StepEnd => "afterStep",
            HookEvent::HumanInterventionRequest => "beforeHumanIntervention",
            HookEvent::HumanInterventionResult => "afterHumanIntervention",
            HookEvent::HumanInterventionStop => "onStopByHumanIntervention",
            HookEvent::PreCompact => "beforeCompact",
            HookEvent::PostCompact => "afterCompact",
            HookEvent::CompactFailure => "onCompactError",
            HookEvent::SubagentStart => "beforeCallAgent",
            HookEvent::SubagentStarted => "afterCallAgent",
            HookEvent::SubagentFailure => "onCallAgentError",
            _ => return None,
        })
    }

    /// A canonical name or an alias.
    pub fn parse(name: &str) -> Option<Self> {
        HookEvent::ALL
            .into_iter()
            .find(|event| event.name() == name || event.alias() == Some(name))
    }

    /// Every accepted type name, canonical names first, for error messages.
    pub fn all_names() -> Vec<&'static str> {
        let mut names: Vec<&'static str> = HookEvent::ALL.iter().map(|event| event.name()).collect();
        names.extend(HookEvent::ALL.iter().filter_map(|event| event.alias()));
        names
    }

    /// Position in [`HookEvent::ALL`], for per-event tables.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The eight events of the inline-hook contract: callbacks decide (continue/skip/abort) and
    /// their errors count. On the other, lifecycle events, hooks observe and errors are logged.
    pub fn is_session_event(self) -> bool {
        matches!(
            self,
            HookEvent::SessionStart
                | HookEvent::UserPromptSubmit
                | HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PostToolUseFailure
                | HookEvent::PermissionRequest
                | HookEvent::TaskCompleted
                | HookEvent::SessionEnd
        )
    }

    /// Tool events: their errors fail the call, and matchers apply to them.
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PostToolUseFailure
                | HookEvent::PermissionRequest
        )
    }

    /// Only these may carry result controls (`responseHandling: 'toolCall'`).
    pub fn allows_control(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_round_trip() {
        for (index, event) in HookEvent::ALL.into_iter().enumerate() {
            assert_eq!(HookEvent::parse(event.name()), Some(event));
            if let Some(alias) = event.alias() {
                assert_eq!(HookEvent::parse(alias), Some(event));
            }
            assert_eq!(event.index(), index);
        }
        assert_eq!(HookEvent::parse("beforeToolCall"), Some(HookEvent::PreToolUse));
        assert_eq!(HookEvent::parse("onError"), Some(HookEvent::StopFailure));
        assert_eq!(HookEvent::parse("onUserPrompt"), None);
        assert_eq!(HookEvent::all_names().len(), 20 + 16);
    }

    #[test]
    fn the_eight_contract_events_are_session_events() {
        let session: Vec<_> = HookEvent::ALL
            .into_iter()
            .filter(|event| event.is_session_event())
            .map(HookEvent::name)
            .collect();
        assert_eq!(
            session,
            [
                "PreToolUse",
                "PostToolUse",
                "PostToolUseFailure",
                "PermissionRequest",
                "UserPromptSubmit",
                "SessionStart",
                "SessionEnd",
                "TaskCompleted"
            ]
        );
    }
}
