//! EnterPlanMode and ExitPlanMode: the model asks to plan before it changes anything, and
//! presents its plan when done. The person answers through the confirmation handler (`type:
//! 'enterPlanMode'` / `'exitPlanMode'`); with nobody to ask, both go ahead, with Blade's texts.
//! The switch itself is the agent's: the answer carries it ([`ModeChange`]).

use serde_json::{json, Map, Value};

use super::input::Fields;
use super::{Answer, Builtin, ModeChange, Reply, Talk};

const ENTER: &str = "Asks to switch into plan mode before working on a complex task: one with several valid \
approaches, architectural decisions, changes across many files, or requirements that need exploring first. In plan \
mode only read-only tools run (Read, Glob, Grep, WebFetch, Task, AskUserQuestion …); Write, Edit, Bash and every \
other tool that changes something are refused. Explore, design the approach, then present the plan with \
ExitPlanMode.\n\
The user may decline: then work on the task directly. Do not use it for simple or obvious changes, small fixes, or \
research-only questions.";

const EXIT: &str = "Presents the implementation plan for the user's approval and leaves plan mode. Call it only in \
plan mode, once the plan is complete (summary, steps, files affected, how it will be tested) and you have explained \
it in text; not for research tasks. Pass the whole plan, in markdown, as plan. Approved, you go on with the \
changes; rejected, the run stops and the user gives feedback. Resolve open questions with AskUserQuestion first.";

const ENTER_REQUEST: &str = "The assistant requests to enter Plan mode for this complex task. In Plan mode, the \
assistant will:\n\n1. Research the codebase thoroughly (read-only)\n2. Understand existing patterns and \
architecture\n3. Design an implementation approach\n4. Present a detailed plan for your approval\n\nDo you want to \
enter Plan mode?";

const ENTER_APPROVED: &str = "✅ User approved entering Plan mode.\n\nYou are now in PLAN MODE. Remember:\n- Use \
ONLY read-only tools: Read, Glob, Grep, WebFetch, WebSearch, Task\n- DO NOT use Edit, Write, Bash, or any \
file-modifying tools\n- When your research is complete, call ExitPlanMode with your implementation plan\n- For pure \
research questions, answer directly without ExitPlanMode\n\nBegin your research now.";

const ENTER_DECLINED: &str = "⚠️ User declined to enter Plan mode.\n\nProceed with the task directly without \
planning phase. You can still use search tools to understand the codebase as needed, but implement the solution \
directly.";

/// Blade's text when nobody can confirm; plan mode is entered all the same.
pub(crate) const ENTER_UNCONFIRMED: &str = "Plan mode requested but no interactive confirmation available.\n\n\
Proceeding with research phase. Use read-only tools to explore the codebase, then call ExitPlanMode with your \
implementation plan when ready.";

const EXIT_REQUEST: &str = "The assistant has finished planning and is ready for your review.\n\n⚠️ Before \
approving, please verify:\n1. The assistant has written a detailed plan to the plan file\n2. The plan includes \
implementation steps, affected files, and testing methods\n3. You have seen text explanations from the assistant \
(not just tool calls)\n\nIf the assistant only made tool calls without presenting a plan summary,\nplease reject \
and ask for a proper plan.";

const EXIT_APPROVED: &str = "✅ Plan approved by user. Plan mode exited; you can proceed to code changes.";

/// Blade's text when nobody can confirm; plan mode is left all the same.
pub(crate) const EXIT_UNCONFIRMED: &str =
    "✅ Plan mode exit requested. No interactive confirmation available.\nProceeding with implementation.";

pub(crate) fn side_effect() -> &'static str {
    "non_idempotent"
}

pub(crate) fn description(tool: Builtin) -> &'static str {
    match tool {
        Builtin::EnterPlanMode => ENTER,
        _ => EXIT,
    }
}

pub(crate) fn schema(tool: Builtin) -> Value {
    match tool {
        Builtin::EnterPlanMode => json!({"type": "object", "properties": {}, "additionalProperties": false}),
        _ => json!({
            "type": "object",
            "properties": {
                "plan": {"type": "string", "description": "The complete implementation plan, in markdown"},
            },
            "required": ["plan"],
            "additionalProperties": false,
        }),
    }
}

/// Blade's confirmation details.
fn details(kind: &str, title: &str, message: &str, details: &str) -> Map<String, Value> {
    let mut request = Map::new();
    request.insert("type".into(), json!(kind));
    request.insert("title".into(), json!(title));
    request.insert("message".into(), json!(message));
    request.insert("details".into(), json!(details));
    request
}

fn approved(answer: &Map<String, Value>) -> bool {
    answer.get("approved").and_then(Value::as_bool) == Some(true)
}

pub(crate) async fn enter_plan_mode(talk: &Talk<'_>) -> Answer {
    let request = details(
        "enterPlanMode",
        "Enter plan mode?",
        ENTER_REQUEST,
        "Plan mode enables systematic research before implementation",
    );
    match talk.person.confirm(request).await {
        Reply::Answered(answer) if approved(&answer) => Answer::ok(ENTER_APPROVED).switching(ModeChange::EnterPlan),
        Reply::Answered(_) => Answer::ok(ENTER_DECLINED),
        Reply::Nobody => Answer::ok(ENTER_UNCONFIRMED).switching(ModeChange::EnterPlan),
        Reply::Failed(message) => Answer::error(format!("Confirmation flow error: {message}")),
    }
}

pub(crate) async fn exit_plan_mode(input: &Map<String, Value>, talk: &Talk<'_>) -> Answer {
    let plan = match Fields::of("ExitPlanMode", input).required_string("plan") {
        Ok(plan) => plan,
        Err(answer) => return answer,
    };
    let mut request = details(
        "exitPlanMode",
        "Approve the plan?",
        EXIT_REQUEST,
        "After approval, the assistant will exit Plan mode and begin implementation.",
    );
    if !plan.is_empty() {
        request.insert("planContent".into(), json!(plan));
    }
    match talk.person.confirm(request).await {
        Reply::Answered(answer) if approved(&answer) => {
            let target = answer.get("targetMode").and_then(Value::as_str).map(str::to_string);
            Answer::ok(EXIT_APPROVED).switching(ModeChange::LeavePlan { target })
        }
        // Rejected: plan mode stays and the run stops, for the person's feedback.
        Reply::Answered(answer) => {
            let feedback = answer
                .get("feedback")
                .and_then(Value::as_str)
                .filter(|feedback| !feedback.is_empty())
                .unwrap_or("No specific feedback provided.");
            Answer {
                stop: true,
                ..Answer::ok(format!(
                    "⚠️ Plan rejected by user. Awaiting user feedback.\n\n{feedback}\n\nThe agent has stopped and \
                     control is returned to the user. The user can now provide additional information or clarification."
                ))
            }
        }
        Reply::Nobody => Answer::ok(EXIT_UNCONFIRMED).switching(ModeChange::LeavePlan { target: None }),
        Reply::Failed(message) => Answer::error(format!("Confirmation flow error: {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::testing::{answering, Answering};
    use crate::builtins::Person;
    use std::sync::Mutex;

    fn talk(person: &dyn Person) -> Talk<'_> {
        Talk {
            person,
            progress: &|_| {},
        }
    }

    fn exit(person: &dyn Person, input: Value) -> Answer {
        futures::executor::block_on(exit_plan_mode(input.as_object().unwrap(), &talk(person)))
    }

    #[test]
    fn entering_asks_and_switches_only_when_approved_or_nobody_can_say() {
        let enter = |person: &dyn Person| futures::executor::block_on(enter_plan_mode(&talk(person)));
        let yes = answering(json!({"approved": true}));
        let answer = enter(&yes);
        assert_eq!(
            (answer.text.as_str(), answer.mode.as_deref()),
            (ENTER_APPROVED, Some(&ModeChange::EnterPlan))
        );
        let asked = &yes.asked.lock().unwrap()[0];
        assert_eq!(asked["type"], "enterPlanMode");
        assert!(asked["message"]
            .as_str()
            .unwrap()
            .ends_with("Do you want to enter Plan mode?"));
        let no = enter(&answering(json!({"approved": false})));
        assert_eq!(
            (no.text.as_str(), no.mode.as_deref(), no.failed),
            (ENTER_DECLINED, None, false)
        );
        let nobody = enter(&crate::builtins::Nobody);
        assert_eq!(
            (nobody.text.as_str(), nobody.mode.as_deref()),
            (ENTER_UNCONFIRMED, Some(&ModeChange::EnterPlan))
        );
        let broken = Answering {
            reply: Reply::Failed("it threw".into()),
            asked: Mutex::default(),
        };
        let failed = enter(&broken);
        assert_eq!(
            (failed.text.as_str(), failed.failed, failed.mode.as_deref()),
            ("Confirmation flow error: it threw", true, None)
        );
    }

    #[test]
    fn exiting_presents_the_plan_and_leaves_when_approved() {
        let person = answering(json!({"approved": true, "targetMode": "autoEdit"}));
        let answer = exit(&person, json!({"plan": "# Plan\n\n1. Add tests"}));
        assert_eq!(answer.text, EXIT_APPROVED);
        assert_eq!(
            answer.mode.as_deref(),
            Some(&ModeChange::LeavePlan {
                target: Some("autoEdit".into())
            })
        );
        let asked = &person.asked.lock().unwrap()[0];
        assert_eq!(asked["type"], "exitPlanMode");
        assert_eq!(asked["planContent"], "# Plan\n\n1. Add tests");
        let nobody = exit(&crate::builtins::Nobody, json!({"plan": "p"}));
        assert_eq!(
            (nobody.text.as_str(), nobody.mode.as_deref(), nobody.stop),
            (EXIT_UNCONFIRMED, Some(&ModeChange::LeavePlan { target: None }), false)
        );
        assert_eq!(
            EXIT_UNCONFIRMED,
            "✅ Plan mode exit requested. No interactive confirmation available.\nProceeding with implementation."
        );
    }

    #[test]
    fn a_rejected_plan_stays_in_plan_mode_and_stops_the_run() {
        let rejected = exit(
            &answering(json!({"approved": false, "feedback": "Use SQLite."})),
            json!({"plan": "p"}),
        );
        assert_eq!(
            rejected.text,
            "⚠️ Plan rejected by user. Awaiting user feedback.\n\nUse SQLite.\n\nThe agent has stopped and control is \
             returned to the user. The user can now provide additional information or clarification."
        );
        assert_eq!(
            (rejected.mode.as_deref(), rejected.stop, rejected.failed),
            (None, true, false)
        );
        let silent = exit(&answering(json!({"approved": false})), json!({"plan": "p"}));
        assert!(
            silent.text.contains("\n\nNo specific feedback provided.\n\n"),
            "{}",
            silent.text
        );
    }

    #[test]
    fn a_plan_must_be_a_string() {
        let answer = exit(&crate::builtins::Nobody, json!({"plan": 3}));
        assert_eq!(
            (answer.text.as_str(), answer.failed, answer.mode.as_deref()),
            (
                "Invalid input for ExitPlanMode: plan must be a string (got a number)",
                true,
                None
            )
        );
        let missing = exit(&crate::builtins::Nobody, json!({}));
        assert_eq!(
            missing.text,
            "Invalid input for ExitPlanMode: plan must be a string (got nothing)"
        );
    }
}
