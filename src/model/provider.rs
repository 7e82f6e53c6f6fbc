//! The model providers, and how the options choose one: `model`, `provider`, `baseUrl` /
//! `baseURL`, `apiKey` and `advanced.connection`, read into a [`ModelChoice`] that builds its
//! client. A provider starts here: a [`Provider`] variant, its name, default URL and key
//! variable, and its client in [`ModelChoice::build`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::anthropic::AnthropicClient;
use super::openai::OpenAiClient;
use super::scripted::{parse_turns, Script, ScriptedModel, ScriptedTurn};
use super::{display_url, Connection, HttpSettings, Model};
use crate::error::{Result, SdkError};
use crate::host::{Callable, Host};
use crate::js_value::{callable, describe, whole_number, MAX_SAFE_INTEGER, MAX_TIMER_MS};
use crate::options::OptionsObject;

/// Environment variables the options may fall back on (each provider's key variable, and the
/// base-URL variables the official SDKs read); the binding reads exactly these.
pub const ENV_VARS: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "DEEPSEEK_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    OpenAiCompatible,
    Anthropic,
    DeepSeek,
    /// Chat Completions at `{baseUrl}/openai/deployments/{model}`, `api-version`, an `api-key`
    /// header (as Blade's `azure-openai` without a resource name).
    AzureOpenAi,
    /// Google's OpenAI-compatible endpoint (`…/v1beta/openai`); Gemini's own wire format is not
    /// spoken here.
    Gemini,
}

/// What Azure is sent without `apiVersion` (Blade's default).
const AZURE_API_VERSION: &str = "2024-08-01-preview";
const GEMINI_OPENAI_URL: &str = "https://generativelanguage.googleapis.com/v1beta/openai";

impl Provider {
    /// Every provider, in the order error texts list them.
    pub const ALL: [Provider; 6] = [
        Provider::OpenAi,
        Provider::OpenAiCompatible,
        Provider::Anthropic,
        Provider::DeepSeek,
        Provider::AzureOpenAi,
        Provider::Gemini,
    ];

    fn parse(text: &str) -> Option<Self> {
        Provider::ALL.into_iter().find(|provider| provider.name() == text)
    }

    /// `None`: the provider has no public address (an Azure resource is the user's own).
    fn default_base_url(self) -> Option<&'static str> {
        match self {
            Provider::OpenAi | Provider::OpenAiCompatible => Some("https://api.openai.com/v1"),
            Provider::Anthropic => Some("https://api.anthropic.com"),
            Provider::DeepSeek => Some("https://api.deepseek.com"),
            Provider::AzureOpenAi => None,
            Provider::Gemini => Some(GEMINI_OPENAI_URL),
        }
    }

    /// As the option spells it.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::OpenAiCompatible => "openai-compatible",
            Provider::Anthropic => "anthropic",
            Provider::DeepSeek => "deepseek",
            Provider::AzureOpenAi => "azure-openai",
            Provider::Gemini => "gemini",
        }
    }

    /// Where the address comes from when `baseUrl` is not given, as the official OpenAI and
    /// Anthropic SDKs read it (one of [`ENV_VARS`]).
    fn base_url_variable(self) -> Option<&'static str> {
        match self {
            Provider::OpenAi | Provider::OpenAiCompatible => Some("OPENAI_BASE_URL"),
            Provider::Anthropic => Some("ANTHROPIC_BASE_URL"),
            Provider::DeepSeek | Provider::AzureOpenAi | Provider::Gemini => None,
        }
    }

    /// Where the key comes from when `apiKey` is not given (one of [`ENV_VARS`]).
    fn key_variable(self) -> &'static str {
        match self {
            Provider::OpenAi | Provider::OpenAiCompatible => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::DeepSeek => "DEEPSEEK_API_KEY",
            Provider::AzureOpenAi => "AZURE_OPENAI_API_KEY",
            Provider::Gemini => "GEMINI_API_KEY",
        }
    }
}

// Made once per agent: the size of the HTTP variant costs nothing worth boxing it for.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum ModelChoice {
    Http {
        provider: Provider,
        model: String,
        connection: Connection,
        organization: Option<String>,
        project: Option<String>,
    },
    /// Shared with every model built from it: a long script is not copied per session.
    ScriptedTurns(Arc<[ScriptedTurn]>),
    ScriptedFunction(Callable),
}

/// Where the options name the provider, its address and its key: `createAgent`'s options
/// themselves (`provider: 'anthropic'`, `baseUrl`, `apiKey`), or a session's `provider` object
/// (`{ type, baseUrl, apiKey }`).
pub enum Endpoint<'a> {
    Named(OptionsObject<'a>),
    Object(OptionsObject<'a>),
}

impl<'a> Endpoint<'a> {
    fn fields(&self) -> &OptionsObject<'a> {
        match self {
            Endpoint::Named(fields) | Endpoint::Object(fields) => fields,
        }
    }

    /// The field naming the provider.
    fn provider_field(&self) -> &'static str {
        match self {
            Endpoint::Named(_) => "provider",
            Endpoint::Object(_) => "type",
        }
    }
}

impl ModelChoice {
    /// Reads `model` of `options`, the provider, address and key of `endpoint`, and the settings
    /// of `connection` (`advanced.connection`, or the session's `provider`). `env` holds the
    /// values of [`ENV_VARS`] that are set.
    pub fn read(
        options: &OptionsObject,
        endpoint: &Endpoint,
        connection: &OptionsObject,
        env: &HashMap<String, String>,
    ) -> Result<Self> {
        let model = options.get("model").ok_or_else(|| {
            SdkError::config("model is required: pass a model id such as \"gpt-4o-mini\", or scriptedModel(...)")
                .at("model")
        })?;
        let Value::String(id) = model else {
            return scripted(model, "model");
        };
        if id.trim().is_empty() {
            return Err(SdkError::config("model must not be empty").at("model"));
        }
        let fields = endpoint.fields();
        let provider_field = endpoint.provider_field();
        if let Endpoint::Object(_) = endpoint {
            if options.get("provider").is_none() {
                return Err(SdkError::config(
                    "provider is required: pass { type: 'openai-compatible', apiKey, baseUrl } (or 'openai', 'anthropic', 'deepseek', 'azure-openai', 'gemini')",
                ).at("provider"));
            }
            if fields.get(provider_field).is_none() {
                return Err(fields.error(
                    provider_field,
                    format_args!("is required: one of {}", Provider::ALL.map(Provider::name).join(", ")),
                ));
            }
        }
        let provider_text = fields.string(provider_field)?;
        let base_url = match (fields.string("baseUrl")?, fields.string("baseURL")?) {
            (Some(a), Some(b)) if a != b => {
                return Err(SdkError::config(format!(
                    "{} and {} are both set and differ (\"{}\" and \"{}\"): pass only one",
                    fields.field("baseUrl"),
                    fields.field("baseURL"),
                    display_url(&a),
                    display_url(&b)
                ))
                .at(&fields.field("baseUrl")))
            }
            (a, b) => a.or(b),
        };
        let provider = match provider_text.as_deref() {
            None => Provider::OpenAi,
            Some(text) => Provider::parse(text).ok_or_else(|| {
                fields.error(
                    provider_field,
                    format_args!(
                        "must be one of {} (got \"{text}\")",
                        Provider::ALL.map(Provider::name).join(", ")
                    ),
                )
            })?,
        };
        let field = fields.field(if fields.get("baseUrl").is_some() {
            "baseUrl"
        } else {
            "baseURL"
        });
        if let Some(url) = &base_url {
            check_http_url(url, &field)?;
        }
        // No baseUrl: the provider's variable, when set (an empty one counts as unset).
        let base_url = match (base_url, provider.base_url_variable()) {
            (None, Some(variable)) => match env.get(variable).filter(|url| !url.is_empty()) {
                Some(url) => {
                    check_http_url(url, variable)?;
                    Some(url.clone())
                }
                None => None,
            },
            (base_url, _) => base_url,
        };
        let api_key = fields
            .secret("apiKey")?
            .or_else(|| env.get(provider.key_variable()).cloned())
            .filter(|key| !key.is_empty());
        // It is sent in a header: a key no header can carry (CR, LF) is named here, not at the
        // first request (and never shown).
        if api_key
            .as_deref()
            .is_some_and(|key| reqwest::header::HeaderValue::from_str(key).is_err())
        {
            return Err(fields.error("apiKey", "is not a valid header value"));
        }
        if api_key.is_none() && base_url.is_none() {
            return Err(SdkError::config(format!(
                "{} is required for provider {}: pass {} or set {}",
                fields.field("apiKey"),
                provider_text.as_deref().unwrap_or("openai"),
                fields.field("apiKey"),
                provider.key_variable()
            ))
            .at(&fields.field("apiKey")));
        }
        let mut settings = http_settings(connection)?;
        let base_url = match (provider, base_url) {
            (Provider::AzureOpenAi, None) => return Err(fields.error(
                "baseUrl",
                "is required for provider azure-openai: your resource's endpoint (https://<resource>.openai.azure.com)",
            )),
            (Provider::AzureOpenAi, Some(url)) => {
                settings
                    .api_version
                    .get_or_insert_with(|| AZURE_API_VERSION.to_string());
                azure_deployment_url(&url, id)
            }
            (Provider::Gemini, Some(url)) => gemini_url(url),
            (provider, url) => url.unwrap_or_else(|| provider.default_base_url().unwrap_or_default().to_string()),
        };
        Ok(ModelChoice::Http {
            provider,
            model: id.clone(),
            connection: Connection::new(base_url, api_key, settings),
            organization: connection.string("organization")?,
            project: connection.string("projectId")?,
        })
    }

    /// A sub-agent's `model` (at `path`): a model id, on this choice's provider and connection
    /// (which a scripted model does not have), or `scriptedModel(...)`.
    pub fn child(&self, value: &Value, path: &str) -> Result<Self> {
        let Value::String(id) = value else {
            return scripted(value, path);
        };
        match self.with_id(id) {
            None => Err(SdkError::config(format!(
                "{path} is a model id, which needs the agent's own model to be a model id too (it is scriptedModel(...)); give the sub-agent scriptedModel(...)"
            )).at(path)),
            Some(_) if id.trim().is_empty() => Err(SdkError::config(format!("{path} must not be empty")).at(path)),
            Some(choice) => Ok(choice),
        }
    }

    /// The same provider and connection with another model id (`setModel`); `None` for a
    /// scripted model.
    pub fn with_id(&self, id: &str) -> Option<Self> {
        let ModelChoice::Http {
            provider,
            connection,
            organization,
            project,
            ..
        } = self
        else {
            return None;
        };
        Some(ModelChoice::Http {
            provider: *provider,
            model: id.to_string(),
            connection: connection.clone(),
            organization: organization.clone(),
            project: project.clone(),
        })
    }

    /// `supportedModels()`'s `name` and `provider`.
    pub fn name(&self) -> (String, &'static str) {
        match self {
            ModelChoice::Http { provider, model, .. } => (model.clone(), provider.name()),
            ModelChoice::ScriptedTurns(_) | ModelChoice::ScriptedFunction(_) => ("scripted".into(), "scripted"),
        }
    }

    /// The model client of this choice.
    pub fn build(&self, host: Arc<dyn Host>) -> Arc<dyn Model> {
        match self {
            ModelChoice::Http {
                provider: Provider::Anthropic,
                model,
                connection,
                ..
            } => Arc::new(AnthropicClient {
                model: model.clone(),
                connection: connection.clone(),
            }),
            ModelChoice::Http {
                provider:
                    provider @ (Provider::OpenAi
                    | Provider::OpenAiCompatible
                    | Provider::DeepSeek
                    | Provider::AzureOpenAi
                    | Provider::Gemini),
                model,
                connection,
                organization,
                project,
            } => Arc::new(OpenAiClient {
                model: model.clone(),
                connection: connection.clone(),
                organization: organization.clone(),
                project: project.clone(),
                completion_tokens_field: *provider == Provider::OpenAi,
                key_header: *provider == Provider::AzureOpenAi,
            }),
            ModelChoice::ScriptedTurns(turns) => Arc::new(ScriptedModel::new(Script::Turns(Arc::clone(turns)), host)),
            ModelChoice::ScriptedFunction(function) => Arc::new(ScriptedModel::new(Script::Function(*function), host)),
        }
    }
}

/// `scriptedModel(...)` at `path` (its function, or its turns), or the error for a value that
/// is neither that nor a model id.
fn scripted(value: &Value, path: &str) -> Result<ModelChoice> {
    match value {
        Value::Object(object) if object.get("kind").and_then(Value::as_str) == Some("scripted") => {
            if let Some(function) = object.get("script").and_then(callable) {
                return Ok(ModelChoice::ScriptedFunction(function));
            }
            let turns = object.get("turns").unwrap_or(&Value::Null);
            parse_turns(turns, &format!("{path}.turns")).map(|turns| ModelChoice::ScriptedTurns(turns.into()))
        }
        other => Err(SdkError::config(format!(
            "{path} must be a model id string or scriptedModel(...) (got {})",
            describe(other)
        ))
        .at(path)),
    }
}

/// Azure's deployment address: `{baseUrl}/openai/deployments/{model}`, unless `baseUrl` already
/// names a deployment (as Blade builds it).
fn azure_deployment_url(base_url: &str, model: &str) -> String {
    let url = base_url.split('?').next().unwrap_or_default().trim_end_matches('/');
    if url.contains("/openai/deployments/") {
        url.to_string()
    } else {
        format!("{url}/openai/deployments/{model}")
    }
}

/// Google's own address speaks Gemini's wire format, which is not spoken here: its
/// OpenAI-compatible path is used instead. Any other address is taken as it is.
fn gemini_url(base_url: String) -> String {
    let official = base_url.contains("generativelanguage.googleapis.com");
    if official && !base_url.contains("/openai") {
        GEMINI_OPENAI_URL.to_string()
    } else {
        base_url
    }
}

fn check_http_url(url: &str, field: &str) -> Result<()> {
    // Shown without user-info and query: they may hold a key.
    let shown = display_url(url);
    let parsed = reqwest::Url::parse(url).map_err(|error| {
        SdkError::config(format!("{field} must be an http(s) URL (\"{shown}\": {error})")).at(field)
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(SdkError::config(format!(
            "{field} must be an http(s) URL (\"{shown}\" uses {})",
            parsed.scheme()
        ))
        .at(field));
    }
    Ok(())
}

fn http_settings(connection: &OptionsObject) -> Result<HttpSettings> {
    let defaults = HttpSettings::default();
    let headers = match connection.get("headers") {
        None => Vec::new(),
        Some(value) => {
            let headers = OptionsObject::of(
                value,
                &connection.field("headers"),
                "an object of header names to strings",
            )?;
            let mut pairs = Vec::new();
            for name in headers.map().keys() {
                let Some(text) = headers.secret(name)? else { continue };
                if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    return Err(SdkError::config(format!(
                        "{} has \"{name}\", which is not a valid header name",
                        headers.path()
                    ))
                    .at(headers.path()));
                }
                if reqwest::header::HeaderValue::from_str(&text).is_err() {
                    return Err(
                        SdkError::config(format!("{} is not a valid header value", headers.field(name)))
                            .at(&headers.field(name)),
                    );
                }
                pairs.push((name.clone(), text));
            }
            pairs
        }
    };
    Ok(HttpSettings {
        headers,
        request_timeout: connection
            .positive_integer("requestTimeoutMs", MAX_TIMER_MS)?
            .map_or(defaults.request_timeout, Duration::from_millis),
        max_retries: match connection.get("maxRetries") {
            None => defaults.max_retries,
            Some(value) => whole_number(value)
                .filter(|n| *n <= 10)
                .ok_or_else(|| connection.invalid("maxRetries", "an integer from 0 to 10", value))?
                as u32,
        },
        stream: match connection.get("stream") {
            None => defaults.stream,
            Some(Value::Bool(flag)) => *flag,
            Some(other) => return Err(connection.invalid("stream", "a boolean", other)),
        },
        max_response_bytes: connection
            .positive_integer("maxResponseBytes", MAX_SAFE_INTEGER)?
            .map_or(defaults.max_response_bytes, |bytes| {
                usize::try_from(bytes).unwrap_or(usize::MAX)
            }),
        stream_idle_timeout: connection
            .positive_integer("streamIdleTimeoutMs", MAX_TIMER_MS)?
            .map(Duration::from_millis),
        api_version: connection.string("apiVersion")?.filter(|version| !version.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_binding_reads_every_providers_key_and_base_url_variable_and_no_other() {
        let mut variables: Vec<&str> = Provider::ALL.map(Provider::key_variable).to_vec();
        variables.extend(Provider::ALL.into_iter().filter_map(Provider::base_url_variable));
        variables.sort();
        variables.dedup();
        let mut expected = ENV_VARS.to_vec();
        expected.sort();
        assert_eq!(variables, expected);
        for provider in Provider::ALL {
            assert_eq!(Provider::parse(provider.name()), Some(provider));
        }
    }

    #[test]
    fn a_child_model_takes_the_parents_provider_and_connection() {
        let options = json!({"model": "claude", "provider": "anthropic", "apiKey": "k"});
        let options = OptionsObject::of(&options, "options", "an object").unwrap();
        let parent = ModelChoice::read(
            &options,
            &Endpoint::Named(
                OptionsObject::of(
                    &json!({"model": "claude", "provider": "anthropic", "apiKey": "k"}),
                    "options",
                    "",
                )
                .unwrap(),
            ),
            &OptionsObject::empty("advanced.connection"),
            &HashMap::new(),
        )
        .unwrap();
        let child = parent.child(&json!("claude-haiku"), "advanced.agents.a.model").unwrap();
        assert_eq!(child.name(), ("claude-haiku".to_string(), "anthropic"));
        let ModelChoice::Http { connection, .. } = child else {
            panic!("http model")
        };
        assert_eq!(connection.api_key.as_deref(), Some("k"));
        let scripted = ModelChoice::ScriptedFunction(Callable(1));
        assert_eq!(
            scripted.child(&json!("m"), "advanced.agents.a.model").unwrap_err().message,
            "advanced.agents.a.model is a model id, which needs the agent's own model to be a model id too (it is scriptedModel(...)); give the sub-agent scriptedModel(...)"
        );
        assert_eq!(
            parent
                .child(&json!(" "), "advanced.agents.a.model")
                .unwrap_err()
                .message,
            "advanced.agents.a.model must not be empty"
        );
        assert_eq!(
            parent.child(&json!(3), "advanced.agents.a.model").unwrap_err().message,
            "advanced.agents.a.model must be a model id string or scriptedModel(...) (got 3)"
        );
    }
}
