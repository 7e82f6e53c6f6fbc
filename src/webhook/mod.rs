//! Webhook transport, delivered from Rust with one shared `reqwest` client: strict configuration,
//! header templates resolved at send time, payloads, notifications, result controls and their
//! decisions. It knows the `HookEvent` vocabulary and nothing else of hooks.

pub mod config;
pub mod decision;
pub mod deliver;
pub mod payload;

pub use config::{Delivery, Handling, OnError, WebhookConfig};
pub use deliver::{DeliveryError, Environment};
