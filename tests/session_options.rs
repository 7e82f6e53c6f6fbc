//! Blade's `SessionOptions` (`createSession`) read by the same reader as `createAgent`'s
//! options: every key at the top, `provider` an object holding the connection, Blade's
//! permission forms; and `prompt`'s options taken in either shape.

use std::collections::HashMap;

use agent_runtime_hooks::agent::config::Shape;
use agent_runtime_hooks::agent::permission::{Form, Permission, Preset};
use agent_runtime_hooks::agent::AgentConfig;
use agent_runtime_hooks::host::Callable;
use agent_runtime_hooks::model::{ModelChoice, Provider};
use serde_json::{json, Value};

fn session(options: Value) -> Result<AgentConfig, String> {
    AgentConfig::read(&options, Shape::Session, &HashMap::new()).map_err(|error| error.message)
}

/// What an HTTP model choice holds: provider, base URL, key, headers, organization.
type Http = (Provider, String, Option<String>, Vec<(String, String)>, Option<String>);

fn http(config: &AgentConfig) -> Http {
    let ModelChoice::Http {
        provider,
        connection,
        organization,
        ..
    } = &config.model
    else {
        panic!("an HTTP model")
    };
    (
        *provider,
        connection.base_url.clone(),
        connection.api_key.clone(),
        connection.settings.headers.clone(),
        organization.clone(),
    )
}

#[test]
fn the_provider_object_names_the_provider_its_address_key_and_connection() {
    let config = session(json!({
        "provider": {"type": "openai-compatible", "apiKey": "k", "baseUrl": "http://127.0.0.1:9/v1",
                     "headers": {"x-team": "blue"}, "organization": "org", "requestTimeoutMs": 5000},
        "model": "m",
        "systemPrompt": "be brief",
        "hookTimeoutMs": 50,
        "allowedTools": [],
    }))
    .unwrap();
    let (provider, base_url, key, headers, organization) = http(&config);
    assert_eq!(provider, Provider::OpenAiCompatible);
    assert_eq!(base_url, "http://127.0.0.1:9/v1");
    assert_eq!(key.as_deref(), Some("k"));
    assert_eq!(headers, [("x-team".to_string(), "blue".to_string())]);
    assert_eq!(organization.as_deref(), Some("org"));
    assert_eq!(config.system_prompt.as_deref(), Some("be brief"));
    assert_eq!(config.hook_timeout_ms, 50);
    assert!(!config.tool_filter.offers("anything"), "allowedTools: [] offers none");
}

#[test]
fn azure_and_gemini_speak_chat_completions_at_their_addresses() {
    let azure = session(json!({
        "provider": {"type": "azure-openai", "apiKey": "k", "baseUrl": "https://res.openai.azure.com/"},
        "model": "gpt-4o-deploy",
    }))
    .unwrap();
    let (provider, base_url, ..) = http(&azure);
    assert_eq!(provider, Provider::AzureOpenAi);
    assert_eq!(
        base_url,
        "https://res.openai.azure.com/openai/deployments/gpt-4o-deploy"
    );
    let ModelChoice::Http { connection, .. } = &azure.model else {
        panic!()
    };
    assert_eq!(connection.settings.api_version.as_deref(), Some("2024-08-01-preview"));
    assert_eq!(
        session(json!({"provider": {"type": "azure-openai", "apiKey": "k"}, "model": "d"})).unwrap_err(),
        "provider.baseUrl is required for provider azure-openai: your resource's endpoint (https://<resource>.openai.azure.com)"
    );
    let gemini = session(json!({"provider": {"type": "gemini", "apiKey": "k", "baseUrl": "https://generativelanguage.googleapis.com"}, "model": "gemini-2.5-flash"})).unwrap();
    assert_eq!(
        http(&gemini).1,
        "https://generativelanguage.googleapis.com/v1beta/openai"
    );
}

#[test]
fn what_a_provider_lacks_is_named() {
    assert_eq!(
        session(json!({"model": "m"})).unwrap_err(),
        "provider is required: pass { type: 'openai-compatible', apiKey, baseUrl } (or 'openai', 'anthropic', 'deepseek', 'azure-openai', 'gemini')"
    );
    assert_eq!(
        session(json!({"provider": {"apiKey": "k"}, "model": "m"})).unwrap_err(),
        "provider.type is required: one of openai, openai-compatible, anthropic, deepseek, azure-openai, gemini"
    );
    assert_eq!(
        session(json!({"provider": {"type": "golden-path-demo"}, "model": "m"})).unwrap_err(),
        "provider.type must be one of openai, openai-compatible, anthropic, deepseek, azure-openai, gemini (got \"golden-path-demo\")"
    );
    assert_eq!(
        session(json!({"provider": {"type": "anthropic"}, "model": "m"})).unwrap_err(),
        "provider.apiKey is required for provider anthropic: pass provider.apiKey or set ANTHROPIC_API_KEY"
    );
    assert_eq!(
        session(json!({"provider": "openai", "model": "m"})).unwrap_err(),
        "provider must be an object ({ type, apiKey?, baseUrl?, … }) (got \"openai\")"
    );
    assert!(
        session(json!({"provider": {"type": "openai", "apiKey": "k", "colour": 1}, "model": "m"}))
            .unwrap_err()
            .starts_with("provider.colour is not a known option")
    );
    assert!(
        session(json!({"provider": {"type": "openai", "apiKey": "k"}, "model": "m", "advanced": {}}))
            .unwrap_err()
            .starts_with("advanced is not a known option")
    );
    assert!(session(
        json!({"provider": {"type": "openai", "apiKey": "k", "headers": {"bad name": "x"}}, "model": "m"})
    )
    .unwrap_err()
    .starts_with("provider.headers has \"bad name\""));
}

#[test]
fn blade_permission_forms_become_one_permission() {
    let base = json!({"provider": {"type": "openai", "apiKey": "k"}, "model": "m"});
    let with = |extra: Value| {
        let mut options = base.clone();
        options
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        session(options)
    };
    assert_eq!(
        with(json!({"permissionMode": "plan"})).unwrap().permission,
        Some(Permission::Preset(Preset::Plan))
    );
    assert_eq!(
        with(json!({"permissionMode": "autoEdit"})).unwrap().permission,
        Some(Permission::Preset(Preset::AcceptEdits))
    );
    assert_eq!(
        with(json!({"canUseTool": {"$function": 3}})).unwrap().permission,
        Some(Permission::CanUseTool(Callable(3)))
    );
    // Blade picks `permissionHandler ?? canUseTool`.
    assert_eq!(
        with(json!({"canUseTool": {"$function": 3}, "permissionHandler": {"$function": 4}}))
            .unwrap()
            .permission,
        Some(Permission::Function(Callable(4)))
    );
    // Plan mode denies what is not read-only whatever a handler would say.
    assert_eq!(
        with(json!({"canUseTool": {"$function": 3}, "permissionMode": "plan"}))
            .unwrap()
            .permission,
        Some(Permission::PlanThen(Callable(3), Form::CanUseTool))
    );
    assert_eq!(
        with(json!({"permissionMode": "sometimes"})).unwrap_err(),
        "permissionMode must be 'default', 'autoEdit', 'yolo' or 'plan' (got \"sometimes\")"
    );
    assert_eq!(
        with(json!({"canUseTool": true})).unwrap_err(),
        "canUseTool must be a function (got true)"
    );
}

#[test]
fn keys_blade_has_and_this_runtime_does_not_build_are_reported_by_their_own_names() {
    let config = session(json!({
        "provider": {"type": "openai", "apiKey": "k", "id": "main"},
        "model": "m",
        "skills": [],
        "durableStoreTimeoutMs": 10,
    }))
    .unwrap();
    let mut unsupported = config.unsupported.clone();
    unsupported.sort();
    assert_eq!(unsupported, ["durableStoreTimeoutMs", "provider.id", "skills"]);
}

#[test]
fn prompt_takes_either_shape() {
    assert_eq!(
        Shape::of_prompt(&json!({"model": "m", "provider": {"type": "openai"}})),
        Shape::Session
    );
    assert_eq!(Shape::of_prompt(&json!({"model": "m", "hooks": {}})), Shape::Session);
    assert_eq!(
        Shape::of_prompt(&json!({"model": "m", "provider": "openai"})),
        Shape::Agent
    );
    assert_eq!(
        Shape::of_prompt(&json!({"model": "m", "advanced": {"hooks": {}}})),
        Shape::Agent
    );
    assert_eq!(
        Shape::of_prompt(&json!({"model": "m", "systemPrompt": "s"})),
        Shape::Agent
    );
}
