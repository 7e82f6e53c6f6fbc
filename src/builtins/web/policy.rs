//! Where WebFetch may go: Blade's `WebFetchSecurityPolicy` (the `webFetch` option). Only
//! http(s) URLs without embedded credentials; no local names (`localhost`, `*.local`) and no
//! non-public address, whether written in the URL or resolved from a name, unless
//! `allowPrivateNetwork`; `blockedHosts` refused, and with `allowedHosts` nothing else. Every
//! redirect hop is checked again. Refusals are Blade's texts.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use reqwest::Url;
use serde_json::Value;

use crate::error::Result;
use crate::options::OptionsObject;

/// The most of a response body kept when `maxResponseBytes` is not given.
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: usize = 5 * 1024 * 1024;
/// The largest `maxResponseBytes` accepted: a body is held in memory whole.
const MAX_RESPONSE_BYTES_LIMIT: u64 = 256 * 1024 * 1024;

/// The `webFetch` option, read and normalized. The default refuses private networks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebPolicy {
    /// `None`: any host (not blocked) may be fetched; `Some`: only those matching a pattern.
    allowed_hosts: Option<Vec<HostPattern>>,
    blocked_hosts: Vec<HostPattern>,
    pub(super) allow_private_network: bool,
    /// Bytes of a response body kept; the rest is not read.
    pub(super) max_response_bytes: usize,
}

impl Default for WebPolicy {
    fn default() -> Self {
        WebPolicy {
            allowed_hosts: None,
            blocked_hosts: Vec::new(),
            allow_private_network: false,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// A host name, an address, or `*.domain` (any name ending in `.domain`, not `domain` itself).
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Exact(String),
    Suffix(String),
}

impl HostPattern {
    /// `pattern` in the form URL hosts take (lower case, punycode, no brackets or final dot).
    fn parse(pattern: &str) -> Option<HostPattern> {
        let (wildcard, name) = match pattern.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        let name = host_form(name)?;
        Some(if wildcard {
            HostPattern::Suffix(format!(".{name}"))
        } else {
            HostPattern::Exact(name)
        })
    }

    fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(name) => host == name,
            HostPattern::Suffix(suffix) => host.ends_with(suffix.as_str()),
        }
    }
}

/// A host as a URL parser writes it, or `None` when `name` is not a host alone.
fn host_form(name: &str) -> Option<String> {
    let bare = name.trim_start_matches('[').trim_end_matches(']').trim_end_matches('.');
    if let Ok(address) = bare.parse::<IpAddr>() {
        return Some(address.to_string());
    }
    if bare.is_empty() || bare.contains(['*', '/', ':', '@', '?', '#']) {
        return None;
    }
    let url = Url::parse(&format!("http://{bare}/")).ok()?;
    url.host_str().map(normalize_host)
}

/// Blade's `normalizeHostname`: no brackets around an IPv6 address, no final dot, lower case.
fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

impl WebPolicy {
    /// A policy that lets WebFetch reach this machine and private networks (tests, local tools).
    pub fn allowing_private_network() -> WebPolicy {
        WebPolicy {
            allow_private_network: true,
            ..WebPolicy::default()
        }
    }

    /// `advanced.webFetch` (a session's `webFetch`): `{ allowedHosts?, blockedHosts?,
    /// allowPrivateNetwork?, maxResponseBytes? }`.
    pub fn read(advanced: &OptionsObject) -> Result<WebPolicy> {
        let Some(value) = advanced.get("webFetch") else {
            return Ok(WebPolicy::default());
        };
        let path = advanced.field("webFetch");
        let options = OptionsObject::of(
            value,
            &path,
            "an object ({ allowedHosts?, blockedHosts?, allowPrivateNetwork?, maxResponseBytes? })",
        )?;
        options.only(
            &[
                "allowedHosts",
                "blockedHosts",
                "allowPrivateNetwork",
                "maxResponseBytes",
            ],
            &[],
        )?;
        let allow_private_network = match options.get("allowPrivateNetwork") {
            None => false,
            Some(Value::Bool(on)) => *on,
            Some(other) => return Err(options.invalid("allowPrivateNetwork", "a boolean", other)),
        };
        let max_response_bytes = options
            .positive_integer("maxResponseBytes", MAX_RESPONSE_BYTES_LIMIT)?
            .map_or(DEFAULT_MAX_RESPONSE_BYTES, |bytes| bytes as usize);
        Ok(WebPolicy {
            allowed_hosts: patterns(&options, "allowedHosts")?,
            blocked_hosts: patterns(&options, "blockedHosts")?.unwrap_or_default(),
            allow_private_network,
            max_response_bytes,
        })
    }

    /// Blade's `assertWebFetchUrl`: whether WebFetch may send a request to `url`.
    pub(super) fn check_url(&self, url: &Url) -> std::result::Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "WebFetch only supports HTTP(S) URLs, received {}:",
                url.scheme()
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("WebFetch URLs must not contain embedded credentials".to_string());
        }
        let host = normalize_host(url.host_str().unwrap_or_default());
        let local_name = host == "localhost" || host.ends_with(".localhost") || host.ends_with(".local");
        if local_name && !self.allow_private_network {
            return Err(format!("WebFetch blocked local hostname: {host}"));
        }
        if self.blocked_hosts.iter().any(|pattern| pattern.matches(&host)) {
            return Err(format!("WebFetch blocked host by policy: {host}"));
        }
        if let Some(allowed) = &self.allowed_hosts {
            if !allowed.iter().any(|pattern| pattern.matches(&host)) {
                return Err(format!("WebFetch host is not in the allowlist: {host}"));
            }
        }
        if !self.allow_private_network {
            // The URL parser has written every form of an address (`0x7f.1`) as the usual one.
            if let Ok(address) = host.parse::<IpAddr>() {
                check_public(address)?;
            }
        }
        Ok(())
    }
}

/// An array of host patterns, each named by its index when it is not one.
fn patterns(options: &OptionsObject, name: &str) -> Result<Option<Vec<HostPattern>>> {
    let Some(value) = options.get(name) else {
        return Ok(None);
    };
    let Value::Array(items) = value else {
        return Err(options.invalid(name, "an array of host names", value));
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            item.as_str().and_then(HostPattern::parse).ok_or_else(|| {
                options.invalid(
                    &format!("{name}[{index}]"),
                    "a host name, an IP address or *.domain",
                    item,
                )
            })
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Blade's `assertPublicAddress`.
pub(super) fn check_public(address: IpAddr) -> std::result::Result<(), String> {
    if is_public(address) {
        Ok(())
    } else {
        Err(format!("WebFetch blocked non-public network address: {address}"))
    }
}

/// Blade's private ranges (`PRIVATE_RANGES`), plus the deprecated IPv6 site-local block.
pub(super) fn is_public(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(address) => !V4_PRIVATE.iter().any(|(network, bits)| in_v4(address, *network, *bits)),
        IpAddr::V6(address) => !V6_PRIVATE.iter().any(|(network, bits)| in_v6(address, *network, *bits)),
    }
}

const V4_PRIVATE: &[(Ipv4Addr, u32)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8),
    (Ipv4Addr::new(10, 0, 0, 0), 8),
    (Ipv4Addr::new(100, 64, 0, 0), 10),
    (Ipv4Addr::new(127, 0, 0, 0), 8),
    (Ipv4Addr::new(169, 254, 0, 0), 16),
    (Ipv4Addr::new(172, 16, 0, 0), 12),
    (Ipv4Addr::new(192, 0, 0, 0), 24),
    (Ipv4Addr::new(192, 0, 2, 0), 24),
    (Ipv4Addr::new(192, 88, 99, 0), 24),
    (Ipv4Addr::new(192, 168, 0, 0), 16),
    (Ipv4Addr::new(198, 18, 0, 0), 15),
    (Ipv4Addr::new(198, 51, 100, 0), 24),
    (Ipv4Addr::new(203, 0, 113, 0), 24),
    (Ipv4Addr::new(224, 0, 0, 0), 4),
    (Ipv4Addr::new(240, 0, 0, 0), 4),
];

const V6_PRIVATE: &[(Ipv6Addr, u32)] = &[
    (Ipv6Addr::UNSPECIFIED, 128),
    (Ipv6Addr::LOCALHOST, 128),
    // IPv4-mapped: the whole block, a mapped public address included (as Blade).
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0), 96),
    (Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96),
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48),
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64),
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23),
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16),
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7),
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10),
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8),
];

fn in_v4(address: Ipv4Addr, network: Ipv4Addr, bits: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    u32::from(address) & mask == u32::from(network) & mask
}

fn in_v6(address: Ipv6Addr, network: Ipv6Addr, bits: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
    u128::from(address) & mask == u128::from(network) & mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(options: Value) -> Result<WebPolicy> {
        let advanced = json!({"webFetch": options});
        WebPolicy::read(&OptionsObject::of(&advanced, "advanced", "an object").unwrap())
    }

    fn check(policy: &WebPolicy, url: &str) -> std::result::Result<(), String> {
        policy.check_url(&Url::parse(url).unwrap())
    }

    #[test]
    fn blades_unsafe_targets_are_refused_by_default() {
        let default = WebPolicy::default();
        for (url, refusal) in [
            (
                "file:///etc/passwd",
                "WebFetch only supports HTTP(S) URLs, received file:",
            ),
            (
                "ftp://example.com/x",
                "WebFetch only supports HTTP(S) URLs, received ftp:",
            ),
            ("http://localhost/admin", "WebFetch blocked local hostname: localhost"),
            ("http://LOCALHOST./admin", "WebFetch blocked local hostname: localhost"),
            (
                "http://api.localhost/",
                "WebFetch blocked local hostname: api.localhost",
            ),
            (
                "http://printer.local/",
                "WebFetch blocked local hostname: printer.local",
            ),
            (
                "http://127.0.0.1:8080",
                "WebFetch blocked non-public network address: 127.0.0.1",
            ),
            // Other spellings of loopback, as the URL parser reads them.
            (
                "http://2130706433/",
                "WebFetch blocked non-public network address: 127.0.0.1",
            ),
            (
                "http://0x7f.1/",
                "WebFetch blocked non-public network address: 127.0.0.1",
            ),
            ("http://0/", "WebFetch blocked non-public network address: 0.0.0.0"),
            (
                "http://169.254.169.254/latest/meta-data/",
                "WebFetch blocked non-public network address: 169.254.169.254",
            ),
            (
                "http://10.1.2.3/",
                "WebFetch blocked non-public network address: 10.1.2.3",
            ),
            ("http://[::1]/admin", "WebFetch blocked non-public network address: ::1"),
            (
                "http://[fc00::1]/admin",
                "WebFetch blocked non-public network address: fc00::1",
            ),
            (
                "http://[::ffff:127.0.0.1]/",
                "WebFetch blocked non-public network address: ::ffff:127.0.0.1",
            ),
            (
                "http://[fe80::1]/",
                "WebFetch blocked non-public network address: fe80::1",
            ),
            (
                "https://user:pw@example.com/",
                "WebFetch URLs must not contain embedded credentials",
            ),
            (
                "https://user@example.com/",
                "WebFetch URLs must not contain embedded credentials",
            ),
        ] {
            assert_eq!(check(&default, url), Err(refusal.to_string()), "{url}");
        }
        assert_eq!(check(&default, "https://example.com/a"), Ok(()));
        assert_eq!(check(&default, "http://93.184.216.34/"), Ok(()));
        assert_eq!(check(&default, "http://[2606:4700::1111]/"), Ok(()));
    }

    #[test]
    fn private_networks_when_allowed() {
        let open = policy(json!({"allowPrivateNetwork": true})).unwrap();
        assert_eq!(open, WebPolicy::allowing_private_network());
        for url in [
            "http://127.0.0.1:8080",
            "http://localhost/",
            "http://[::1]/",
            "http://10.0.0.1/",
        ] {
            assert_eq!(check(&open, url), Ok(()), "{url}");
        }
        // Schemes and credentials stay refused.
        assert!(check(&open, "file:///etc/passwd").is_err());
        assert!(check(&open, "http://a:b@127.0.0.1/").is_err());
    }

    #[test]
    fn allowlists_and_blocklists_as_blade_matches_them() {
        let allowed = policy(json!({"allowedHosts": ["*.example.com", "Exact.ORG."]})).unwrap();
        assert_eq!(check(&allowed, "https://api.example.com/resource"), Ok(()));
        assert_eq!(check(&allowed, "https://exact.org/"), Ok(()));
        assert_eq!(
            check(&allowed, "https://example.com/"),
            Err("WebFetch host is not in the allowlist: example.com".into()),
            "*.domain does not match the domain itself"
        );
        assert_eq!(
            check(&allowed, "https://example.net/resource"),
            Err("WebFetch host is not in the allowlist: example.net".into())
        );
        assert_eq!(
            check(&allowed, "https://evilexample.com/"),
            Err("WebFetch host is not in the allowlist: evilexample.com".into())
        );
        let blocked = policy(json!({"blockedHosts": ["*.example.com"]})).unwrap();
        assert_eq!(
            check(&blocked, "https://api.example.com/resource"),
            Err("WebFetch blocked host by policy: api.example.com".into())
        );
        // An empty allowlist allows nothing.
        let none = policy(json!({"allowedHosts": []})).unwrap();
        assert!(check(&none, "https://example.com/").is_err());
        // Names in other scripts match their punycode form.
        let idn = policy(json!({"allowedHosts": ["bücher.example"]})).unwrap();
        assert_eq!(check(&idn, "https://BÜCHER.example/"), Ok(()));
        // An allowed private host still needs allowPrivateNetwork.
        let loopback = policy(json!({"allowedHosts": ["127.0.0.1"]})).unwrap();
        assert!(check(&loopback, "http://127.0.0.1/").is_err());
    }

    #[test]
    fn bad_options_are_named() {
        for (options, message) in [
            (json!(true), "advanced.webFetch must be an object ({ allowedHosts?, blockedHosts?, allowPrivateNetwork?, maxResponseBytes? }) (got true)"),
            (json!({"allowPrivateNetwork": "yes"}), "advanced.webFetch.allowPrivateNetwork must be a boolean (got \"yes\")"),
            (json!({"allowedHosts": "example.com"}), "advanced.webFetch.allowedHosts must be an array of host names (got \"example.com\")"),
            (json!({"blockedHosts": ["ok.com", "http://x.com/"]}), "advanced.webFetch.blockedHosts[1] must be a host name, an IP address or *.domain (got \"http://x.com/\")"),
            (json!({"allowedHosts": ["*"]}), "advanced.webFetch.allowedHosts[0] must be a host name, an IP address or *.domain (got \"*\")"),
            (json!({"allowedHosts": [3]}), "advanced.webFetch.allowedHosts[0] must be a host name, an IP address or *.domain (got 3)"),
            (json!({"maxResponseBytes": 0}), "advanced.webFetch.maxResponseBytes must be a positive integer no greater than 268435456 (got 0)"),
            (json!({"allowPrivate": true}), "advanced.webFetch.allowPrivate is not a known option (known here: allowedHosts, blockedHosts, allowPrivateNetwork, maxResponseBytes)"),
        ] {
            assert_eq!(policy(options).unwrap_err().message, message);
        }
        assert_eq!(
            policy(json!({"maxResponseBytes": 1000})).unwrap().max_response_bytes,
            1000
        );
        let none = json!({});
        assert_eq!(
            WebPolicy::read(&OptionsObject::of(&none, "advanced", "an object").unwrap()).unwrap(),
            WebPolicy::default()
        );
    }

    #[test]
    fn address_ranges() {
        for private in [
            "100.64.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "224.0.0.1",
            "255.255.255.255",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "ff02::1",
            "fec0::1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["172.32.0.1", "100.128.0.1", "8.8.8.8", "2a00:1450::1"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
