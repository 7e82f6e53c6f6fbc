//! AskUserQuestion: questions for the person using the agent, answered through the
//! confirmation handler (`type: 'askUserQuestion'`, with the questions; it answers `{
//! approved, answers: { [header]: label | label[] } }`). With nobody to ask it fails, as Blade's.

use serde_json::{json, Map, Value};

use super::input::invalid;
use super::{Answer, Reply, Talk};

const DESCRIPTION: &str = "Asks the user one to four questions while you work, each with two to four choices: to \
learn their preferences, clear up an ambiguous instruction, or have them decide between implementation choices. \
The user can always answer in their own words instead of a choice, so add no \"Other\" option. Set multiSelect when \
several choices can be picked together. If you recommend a choice, put it first and end its label with \
\"(Recommended)\". Answers `User answers:` with one `header: answer` line per question.";

const TOOL: &str = "AskUserQuestion";

/// Blade's text when nobody can be asked.
pub(crate) const NO_HANDLER: &str =
    "No confirmation handler available. Cannot ask user questions in non-interactive mode.";

pub(crate) const CANCELLED: &str = "User cancelled the question prompt without providing answers.";

const NO_ANSWERS: &str = "The question was approved but no answers were collected. This can happen in sessions \
where structured question UI is not available. Please ask the user directly in your response or make reasonable \
assumptions based on context.";

pub(crate) fn side_effect() -> &'static str {
    "non_idempotent"
}

pub(crate) fn description() -> &'static str {
    DESCRIPTION
}

pub(crate) fn schema() -> Value {
    let option = json!({
        "type": "object",
        "properties": {
            "label": {"type": "string", "description": "The choice as the user sees it (1-5 words)"},
            "description": {"type": "string", "description": "What the choice means or leads to"},
        },
        "required": ["label", "description"],
    });
    json!({
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "minItems": 1,
                "maxItems": 4,
                "description": "The questions (1-4)",
                "items": {
                    "type": "object",
                    "properties": {
                        "question": {"type": "string", "description": "The whole question, ending with a question mark"},
                        "header": {"type": "string", "maxLength": 12, "description": "A very short label for the question (at most 12 characters): \"Auth method\", \"Library\""},
                        "options": {"type": "array", "minItems": 2, "maxItems": 4, "items": option, "description": "The choices (2-4)"},
                        "multiSelect": {"type": "boolean", "default": false, "description": "Several choices may be picked"},
                    },
                    "required": ["question", "header", "options"],
                },
            },
        },
        "required": ["questions"],
        "additionalProperties": false,
    })
}

pub(crate) async fn ask_user_question(input: &Map<String, Value>, talk: &Talk<'_>) -> Answer {
    let questions = match read(input) {
        Ok(questions) => questions,
        Err(answer) => return answer,
    };
    let mut request = Map::new();
    request.insert("type".into(), json!("askUserQuestion"));
    request.insert("title".into(), json!("Questions from the agent"));
    request.insert("message".into(), json!("Please answer the following questions:"));
    request.insert("questions".into(), Value::Array(questions));
    match talk.person.confirm(request).await {
        Reply::Answered(answer) if answer.get("approved").and_then(Value::as_bool) != Some(true) => {
            Answer::ok(CANCELLED)
        }
        Reply::Answered(answer) => match answer.get("answers") {
            Some(Value::Object(answers)) if !answers.is_empty() => {
                let lines: Vec<String> = answers
                    .iter()
                    .map(|(header, answer)| format!("{header}: {}", shown(answer)))
                    .collect();
                Answer::ok(format!("User answers:\n{}", lines.join("\n")))
            }
            _ => Answer::ok(NO_ANSWERS),
        },
        Reply::Nobody => Answer::error(NO_HANDLER),
        Reply::Failed(message) => Answer::error(format!("Failed to ask user questions: {message}")),
    }
}

/// An answer as JavaScript prints it in a template: a list joined with `, `.
fn shown(answer: &Value) -> String {
    match answer {
        Value::String(text) => text.clone(),
        Value::Array(items) => items.iter().map(shown).collect::<Vec<_>>().join(", "),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// The questions, checked against the schema, as the handler is given them (`multiSelect` set).
fn read(input: &Map<String, Value>) -> Result<Vec<Value>, Answer> {
    let list = |field: &str, value: Option<&Value>, min: usize, max: usize| match value {
        Some(Value::Array(items)) if (min..=max).contains(&items.len()) => Ok(items.clone()),
        got => Err(invalid(TOOL, field, got, &format!("an array of {min} to {max} items"))),
    };
    let object = |field: &str, value: &Value| match value {
        Value::Object(object) => Ok(object.clone()),
        got => Err(invalid(TOOL, field, Some(got), "an object")),
    };
    let text = |field: String, object: &Map<String, Value>, name: &str, max: Option<usize>| {
        let what = max.map_or_else(
            || "a string".to_string(),
            |max| format!("a string of at most {max} characters"),
        );
        match object.get(name) {
            Some(Value::String(text)) if max.is_none_or(|max| text.chars().count() <= max) => Ok(json!(text)),
            got => Err(invalid(TOOL, &format!("{field}.{name}"), got, &what)),
        }
    };
    let given = input.get("questions").filter(|value| !value.is_null());
    let mut questions = Vec::new();
    for (index, question) in list("questions", given, 1, 4)?.iter().enumerate() {
        let at = format!("questions[{index}]");
        let question = object(&at, question)?;
        let given = question.get("options").filter(|value| !value.is_null());
        let mut options = Vec::new();
        for (which, option) in list(&format!("{at}.options"), given, 2, 4)?.iter().enumerate() {
            let here = format!("{at}.options[{which}]");
            let option = object(&here, option)?;
            options.push(json!({
                "label": text(here.clone(), &option, "label", None)?,
                "description": text(here, &option, "description", None)?,
            }));
        }
        let multi_select = match question.get("multiSelect") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(value)) => *value,
            got => return Err(invalid(TOOL, &format!("{at}.multiSelect"), got, "a boolean")),
        };
        questions.push(json!({
            "question": text(at.clone(), &question, "question", None)?,
            "header": text(at, &question, "header", Some(12))?,
            "multiSelect": multi_select,
            "options": options,
        }));
    }
    Ok(questions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::testing::{answering, Answering};
    use crate::builtins::{Nobody, Person};
    use std::sync::Mutex;

    fn framework() -> Value {
        json!({"questions": [{
            "question": "Which framework?",
            "header": "Framework",
            "multiSelect": false,
            "options": [
                {"label": "React", "description": "Popular UI library"},
                {"label": "Vue", "description": "Progressive framework"},
            ],
        }]})
    }

    fn ask(person: &dyn Person, input: Value) -> Answer {
        let talk = Talk {
            person,
            progress: &|_| {},
        };
        futures::executor::block_on(ask_user_question(input.as_object().unwrap(), &talk))
    }

    #[test]
    fn answers_are_sent_one_line_per_header() {
        let person = answering(json!({"approved": true, "answers": {"Framework": "React"}}));
        let answer = ask(&person, framework());
        assert_eq!(
            (answer.text.as_str(), answer.failed),
            ("User answers:\nFramework: React", false)
        );
        let asked = &person.asked.lock().unwrap()[0];
        assert_eq!(asked["type"], "askUserQuestion");
        assert_eq!(asked["message"], "Please answer the following questions:");
        assert_eq!(
            Value::Array(vec![asked["questions"][0].clone()]),
            framework()["questions"]
        );
        let several = ask(
            &answering(json!({"approved": true, "answers": {"Features": ["TypeScript", "ESLint"], "Style": "tabs"}})),
            framework(),
        );
        assert_eq!(several.text, "User answers:\nFeatures: TypeScript, ESLint\nStyle: tabs");
    }

    #[test]
    fn a_cancel_no_answers_nobody_and_a_failure_say_so_in_blades_words() {
        assert_eq!(ask(&answering(json!({"approved": false})), framework()).text, CANCELLED);
        let empty = ask(&answering(json!({"approved": true, "answers": {}})), framework());
        assert!(empty
            .text
            .starts_with("The question was approved but no answers were collected."));
        assert!(!empty.failed);
        let nobody = ask(&Nobody, framework());
        assert_eq!((nobody.text.as_str(), nobody.failed), (NO_HANDLER, true));
        let broken = Answering {
            reply: Reply::Failed("Handler failed".into()),
            asked: Mutex::default(),
        };
        let failed = ask(&broken, framework());
        assert_eq!(
            (failed.text.as_str(), failed.failed),
            ("Failed to ask user questions: Handler failed", true)
        );
    }

    #[test]
    fn bad_questions_name_the_field_and_ask_nobody() {
        let person = answering(json!({"approved": true}));
        let error = |input: Value| ask(&person, input).text;
        assert_eq!(
            error(json!({})),
            "Invalid input for AskUserQuestion: questions must be an array of 1 to 4 items (got nothing)"
        );
        assert_eq!(
            error(json!({"questions": []})),
            "Invalid input for AskUserQuestion: questions must be an array of 1 to 4 items (got an array)"
        );
        let mut one_option = framework();
        one_option["questions"][0]["options"] = json!([{"label": "React", "description": "x"}]);
        assert_eq!(
            error(one_option),
            "Invalid input for AskUserQuestion: questions[0].options must be an array of 2 to 4 items (got an array)"
        );
        let mut long_header = framework();
        long_header["questions"][0]["header"] = json!("A header too long");
        assert_eq!(
            error(long_header),
            "Invalid input for AskUserQuestion: questions[0].header must be a string of at most 12 characters (got a string)"
        );
        let mut no_label = framework();
        no_label["questions"][0]["options"][1] = json!({"description": "x"});
        assert_eq!(
            error(no_label),
            "Invalid input for AskUserQuestion: questions[0].options[1].label must be a string (got nothing)"
        );
        let mut multi = framework();
        multi["questions"][0]["multiSelect"] = json!("yes");
        assert_eq!(
            error(multi),
            "Invalid input for AskUserQuestion: questions[0].multiSelect must be a boolean (got a string)"
        );
        assert!(person.asked.lock().unwrap().is_empty());
        // multiSelect defaults to false.
        let mut unset = framework();
        unset["questions"][0].as_object_mut().unwrap().remove("multiSelect");
        ask(&person, unset);
        assert_eq!(person.asked.lock().unwrap()[0]["questions"][0]["multiSelect"], false);
    }
}
