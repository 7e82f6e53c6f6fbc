//! Webhook hooks, delivered from Rust with one shared `reqwest` client: strict configuration,
//! header templates resolved at send time, payloads, notifications, result controls and their
//! decisions, and the environment's hooks (`AGENT_HOOK_WEBHOOK_*`).

pub mod config;
pub mod decision;
pub mod deliver;
pub mod environment;
pub mod payload;

pub use config::WebhookConfig;
pub use deliver::{DeliveryError, Environment};
