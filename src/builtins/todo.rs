//! TodoWrite: the session's todo list. Each call replaces the whole list; an item keeps its
//! id and times across calls when the model names it by id or by the same content. The answer
//! is the sorted list with its counts, as Blade's.

use std::sync::Mutex;

use serde_json::{json, Map, Value};

use super::input::{invalid, Fields};
use super::{iso_time, Answer, Talk};
use crate::ids;
use crate::sync::lock;

const DESCRIPTION: &str = "Creates and updates a structured task list for the current work, so that progress is \
tracked and the user can follow it. Each call sends the whole list (at least one item); items missing from it are \
dropped.\n\
Use it for work of three steps or more, when the user gives several tasks or asks for a todo list, and when new \
tasks turn up on the way. Skip it for a single trivial task or a purely conversational request.\n\
Each item has:\n\
- content: the task in imperative form (\"Run tests\");\n\
- activeForm: the same in present continuous form (\"Running tests\");\n\
- status: pending, in_progress or completed. Keep exactly one item in_progress while working (never more than \
one); mark an item completed as soon as it is fully done, not when tests fail or the work is partial;\n\
- priority (optional): high, medium (default) or low;\n\
- id (optional): keeps an item's identity when its content changes.\n\
Answers the list (completed first, then in progress, then pending; by priority within each) and its counts.";

const STATUSES: [&str; 3] = ["pending", "in_progress", "completed"];
const PRIORITIES: [&str; 3] = ["high", "medium", "low"];

/// Blade's text when more than one item is in progress (its manager's words).
const ONE_IN_PROGRESS: &str = "同时只能有一个任务处于 in_progress 状态";

pub(crate) fn side_effect() -> &'static str {
    "idempotent"
}

pub(crate) fn description() -> &'static str {
    DESCRIPTION
}

pub(crate) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "minItems": 1,
                "description": "The whole todo list",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "The item's id, to keep it across changes of its content"},
                        "content": {"type": "string", "minLength": 1, "description": "The task, imperative form"},
                        "status": {"type": "string", "enum": STATUSES},
                        "activeForm": {"type": "string", "minLength": 1, "description": "The task, present continuous form"},
                        "priority": {"type": "string", "enum": PRIORITIES, "default": "medium"},
                    },
                    "required": ["content", "status", "activeForm"],
                },
            },
        },
        "required": ["todos"],
        "additionalProperties": false,
    })
}

/// One item of the list, as it was last written.
#[derive(Debug, Clone, PartialEq)]
struct Todo {
    id: String,
    content: String,
    status: &'static str,
    active_form: String,
    priority: &'static str,
    created_at: String,
    started_at: Option<String>,
    completed_at: Option<String>,
    /// The model gave the id: it comes first in the item, as in Blade's answer.
    id_given: bool,
}

impl Todo {
    fn to_json(&self) -> Value {
        let mut item = Map::new();
        if self.id_given {
            item.insert("id".into(), json!(self.id));
        }
        item.insert("content".into(), json!(self.content));
        item.insert("status".into(), json!(self.status));
        item.insert("activeForm".into(), json!(self.active_form));
        item.insert("priority".into(), json!(self.priority));
        if !self.id_given {
            item.insert("id".into(), json!(self.id));
        }
        item.insert("createdAt".into(), json!(self.created_at));
        if let Some(started) = &self.started_at {
            item.insert("startedAt".into(), json!(started));
        }
        if let Some(completed) = &self.completed_at {
            item.insert("completedAt".into(), json!(completed));
        }
        Value::Object(item)
    }
}

/// What the model sent for one item.
struct Written<'a> {
    id: Option<&'a str>,
    content: &'a str,
    status: &'static str,
    active_form: &'a str,
    priority: &'static str,
}

/// The session's todo list.
#[derive(Default)]
pub(crate) struct Todos(Mutex<Vec<Todo>>);

impl Todos {
    /// Replaces the list with `written`, keeping the id and times of the items it names again;
    /// refused (the list unchanged) when more than one item is in progress.
    fn replace(&self, written: &[Written<'_>], now: &str) -> Result<Vec<Todo>, &'static str> {
        let mut list = lock(&self.0);
        let next: Vec<Todo> = written
            .iter()
            .map(|item| {
                let existing = list
                    .iter()
                    .find(|todo| item.id == Some(todo.id.as_str()) || todo.content == item.content);
                let kept = |time: fn(&Todo) -> &Option<String>| existing.and_then(|todo| time(todo).clone());
                let since = |status: &str, time: fn(&Todo) -> &Option<String>| {
                    kept(time).or_else(|| (item.status == status).then(|| now.to_string()))
                };
                Todo {
                    id: item
                        .id
                        .filter(|id| !id.is_empty())
                        .map(str::to_string)
                        .or_else(|| existing.map(|todo| todo.id.clone()))
                        .unwrap_or_else(ids::uuid),
                    content: item.content.to_string(),
                    status: item.status,
                    active_form: item.active_form.to_string(),
                    priority: item.priority,
                    created_at: existing.map_or_else(|| now.to_string(), |todo| todo.created_at.clone()),
                    started_at: since("in_progress", |todo| &todo.started_at),
                    completed_at: since("completed", |todo| &todo.completed_at),
                    id_given: item.id.is_some(),
                }
            })
            .collect();
        if next.iter().filter(|todo| todo.status == "in_progress").count() > 1 {
            return Err(ONE_IN_PROGRESS);
        }
        *list = next;
        Ok(sorted(&list))
    }
}

/// Completed first, then in progress, then pending; by priority within each (a stable sort).
fn sorted(list: &[Todo]) -> Vec<Todo> {
    let rank = |choices: &[&str], value: &str| choices.iter().position(|choice| *choice == value);
    let mut sorted = list.to_vec();
    sorted.sort_by_key(|todo| {
        (
            rank(&["completed", "in_progress", "pending"], todo.status),
            rank(&PRIORITIES, todo.priority),
        )
    });
    sorted
}

/// `{ total, completed, inProgress, pending }`.
fn stats(list: &[Todo]) -> Value {
    let count = |status: &str| list.iter().filter(|todo| todo.status == status).count();
    json!({
        "total": list.len(),
        "completed": count("completed"),
        "inProgress": count("in_progress"),
        "pending": count("pending"),
    })
}

pub(crate) fn todo_write(input: &Map<String, Value>, call: &super::Call<'_>, talk: &Talk<'_>) -> Answer {
    let written = match read(input) {
        Ok(written) => written,
        Err(answer) => return answer,
    };
    (talk.progress)(json!({"kind": "progress", "message": "Updating TODO list...", "data": {"total": written.len()}}));
    let now = iso_time(std::time::SystemTime::now());
    match call.state.todos.replace(&written, &now) {
        Err(message) => Answer::error(format!("Update failed: {message}")),
        Ok(list) => {
            let stats = stats(&list);
            (talk.progress)(json!({
                "kind": "progress",
                "message": format!("TODO list updated ({}/{} completed)", stats["completed"], stats["total"]),
                "completed": stats["completed"],
                "total": stats["total"],
            }));
            let todos: Vec<Value> = list.iter().map(Todo::to_json).collect();
            Answer::json(&json!({"todos": todos, "stats": stats}))
        }
    }
}

const TOOL: &str = "TodoWrite";

fn read(input: &Map<String, Value>) -> Result<Vec<Written<'_>>, Answer> {
    let fields = Fields::of(TOOL, input);
    let items = match fields.get("todos") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        got => return Err(invalid(TOOL, "todos", got, "an array of at least one item")),
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let at = |field: &str| format!("todos[{index}].{field}");
            let Value::Object(item) = item else {
                return Err(invalid(TOOL, &format!("todos[{index}]"), Some(item), "an object"));
            };
            let text = |field: &str, required: bool| match item.get(field).filter(|value| !value.is_null()) {
                None if !required => Ok(None),
                Some(Value::String(text)) if !required || !text.is_empty() => Ok(Some(text.as_str())),
                got => Err(invalid(TOOL, &at(field), got, "a non-empty string")),
            };
            let choice = |field: &str, choices: &[&'static str], default: Option<&'static str>| {
                match item.get(field).filter(|value| !value.is_null()) {
                    None => default,
                    Some(Value::String(text)) => choices.iter().find(|choice| **choice == text).copied(),
                    _ => None,
                }
                .ok_or_else(|| {
                    invalid(
                        TOOL,
                        &at(field),
                        item.get(field),
                        &format!("one of {}", choices.join(", ")),
                    )
                })
            };
            Ok(Written {
                id: text("id", false)?,
                content: text("content", true)?.unwrap_or_default(),
                status: choice("status", &STATUSES, None)?,
                active_form: text("activeForm", true)?.unwrap_or_default(),
                priority: choice("priority", &PRIORITIES, Some("medium"))?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::{Builtin, Call, State, Workspace};
    use std::sync::Mutex as StdMutex;
    use tokio_util::sync::CancellationToken;

    fn write(state: &State, todos: Value, progress: &StdMutex<Vec<Value>>) -> Answer {
        let input = json!({ "todos": todos });
        let workspace = Workspace::default();
        let call = Call {
            workspace: &workspace,
            state,
            cancel: CancellationToken::new(),
        };
        let report = |value: Value| progress.lock().unwrap().push(value);
        let talk = Talk {
            person: &crate::builtins::Nobody,
            progress: &report,
        };
        todo_write(input.as_object().unwrap(), &call, &talk)
    }

    fn item(content: &str, status: &str) -> Value {
        json!({"content": content, "status": status, "activeForm": format!("{content}ing")})
    }

    #[test]
    fn the_list_is_answered_sorted_with_its_counts() {
        let state = State::default();
        let progress = StdMutex::default();
        let answer = write(
            &state,
            json!([
                item("Verify", "pending"),
                item("Write tests", "in_progress"),
                item("Plan", "completed")
            ]),
            &progress,
        );
        assert!(!answer.failed, "{}", answer.text);
        let sent: Value = serde_json::from_str(&answer.text).unwrap();
        let contents: Vec<&str> = sent["todos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["content"].as_str().unwrap())
            .collect();
        assert_eq!(contents, ["Plan", "Write tests", "Verify"]);
        assert_eq!(
            sent["stats"],
            json!({"total": 3, "completed": 1, "inProgress": 1, "pending": 1})
        );
        // Blade's item: its fields in Blade's order, times only for the states reached.
        let planned = sent["todos"][0].as_object().unwrap();
        let keys: Vec<&str> = planned.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "content",
                "status",
                "activeForm",
                "priority",
                "id",
                "createdAt",
                "completedAt"
            ]
        );
        assert_eq!(planned["priority"], "medium");
        assert!(sent["todos"][1]["startedAt"].is_string());
        assert!(sent["todos"][2].get("startedAt").is_none());
        assert!(answer.text.starts_with("{\n  \"todos\": [\n    {\n"), "{}", answer.text);
        assert_eq!(
            *progress.lock().unwrap(),
            [
                json!({"kind": "progress", "message": "Updating TODO list...", "data": {"total": 3}}),
                json!({"kind": "progress", "message": "TODO list updated (1/3 completed)", "completed": 1, "total": 3}),
            ]
        );
    }

    #[test]
    fn an_item_named_again_keeps_its_id_and_times() {
        let state = State::default();
        let progress = StdMutex::default();
        let first: Value =
            serde_json::from_str(&write(&state, json!([item("Build", "in_progress")]), &progress).text).unwrap();
        let first = &first["todos"][0];
        let second = write(
            &state,
            json!([item("Build", "completed"), {"id": "mine", "content": "Ship", "status": "pending", "activeForm": "Shipping", "priority": "high"}]),
            &progress,
        );
        let second: Value = serde_json::from_str(&second.text).unwrap();
        let built = &second["todos"][0];
        assert_eq!(built["id"], first["id"]);
        assert_eq!(built["createdAt"], first["createdAt"]);
        assert_eq!(built["startedAt"], first["startedAt"]);
        assert!(built["completedAt"].is_string());
        let shipped = second["todos"][1].as_object().unwrap();
        assert_eq!(shipped.keys().next().map(String::as_str), Some("id"));
        assert_eq!(shipped["id"], "mine");
        assert_eq!(shipped["priority"], "high");
        // Named by its id, an item keeps it whatever its content now says.
        let third = write(
            &state,
            json!([{"id": "mine", "content": "Ship it", "status": "pending", "activeForm": "Shipping it"}]),
            &progress,
        );
        let third: Value = serde_json::from_str(&third.text).unwrap();
        assert_eq!(third["todos"][0]["createdAt"], shipped["createdAt"]);
        assert_eq!(third["stats"]["total"], 1);
    }

    #[test]
    fn two_items_in_progress_fail_and_keep_the_list() {
        let state = State::default();
        let progress = StdMutex::default();
        write(&state, json!([item("A", "pending")]), &progress);
        let answer = write(
            &state,
            json!([item("A", "in_progress"), item("B", "in_progress")]),
            &progress,
        );
        assert_eq!(
            (answer.text.as_str(), answer.failed),
            ("Update failed: 同时只能有一个任务处于 in_progress 状态", true)
        );
        assert_eq!(lock(&state.todos.0)[0].status, "pending");
        // The first progress came before the failure; the second never did.
        assert_eq!(progress.lock().unwrap().len(), 3);
    }

    #[test]
    fn bad_input_names_the_field() {
        let state = State::default();
        let progress = StdMutex::default();
        let error = |todos: Value| {
            let answer = write(&state, todos, &progress);
            assert!(answer.failed);
            answer.text
        };
        assert_eq!(
            error(json!([])),
            "Invalid input for TodoWrite: todos must be an array of at least one item (got an array)"
        );
        assert_eq!(
            error(json!("a list")),
            "Invalid input for TodoWrite: todos must be an array of at least one item (got a string)"
        );
        assert_eq!(
            error(json!([item("A", "pending"), item("B", "done")])),
            "Invalid input for TodoWrite: todos[1].status must be one of pending, in_progress, completed (got a string)"
        );
        assert_eq!(
            error(json!([{"status": "pending", "activeForm": "x"}])),
            "Invalid input for TodoWrite: todos[0].content must be a non-empty string (got nothing)"
        );
        assert_eq!(
            error(json!([{"content": "", "status": "pending", "activeForm": "x"}])),
            "Invalid input for TodoWrite: todos[0].content must be a non-empty string (got a string)"
        );
        assert_eq!(
            error(json!([{"content": "A", "status": "pending", "activeForm": "x", "priority": 1}])),
            "Invalid input for TodoWrite: todos[0].priority must be one of high, medium, low (got a number)"
        );
        assert_eq!(
            error(json!([3])),
            "Invalid input for TodoWrite: todos[0] must be an object (got a number)"
        );
        let missing = write(&state, Value::Null, &progress);
        assert_eq!(
            missing.text,
            "Invalid input for TodoWrite: todos must be an array of at least one item (got nothing)"
        );
        assert!(progress.lock().unwrap().is_empty());
        assert_eq!(Builtin::TodoWrite.side_effect(), "idempotent");
    }
}
