//! What a connection must never show: its API key, its header values, and the user-info and
//! query values of its URL. Model errors are masked with it where they leave the client, and
//! URLs are shown without user-info and query.

use std::borrow::Cow;

/// What replaces a secret in a text.
pub const MASK: &str = "***";
/// Shorter values are not masked: they would blot out ordinary words and numbers (a header
/// `x-retry: 1`), and a secret that short protects nothing.
const SHORTEST: usize = 4;

/// The secret values of one connection, longest first (so a secret containing another is masked
/// whole).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    values: Vec<String>,
}

impl Secrets {
    /// From a URL's user-info and query values, an API key and header values.
    pub fn new<'a>(url: Option<&str>, others: impl IntoIterator<Item = &'a str>) -> Secrets {
        let mut secrets = Secrets::default();
        if let Some(url) = url {
            secrets.add_url(url);
        }
        for value in others {
            secrets.add(value);
        }
        secrets
    }

    /// Adds `value`, as given and percent-decoded (a URL may carry either form).
    pub fn add(&mut self, value: &str) {
        for form in [Cow::Borrowed(value), percent_decode(value)] {
            let form = form.trim();
            if form.chars().count() >= SHORTEST && !self.values.iter().any(|known| known == form) {
                self.values.push(form.to_string());
            }
        }
        self.values.sort_by_key(|value| std::cmp::Reverse(value.len()));
    }

    /// Adds a header's value, and its credentials alone when it is `<scheme> <credentials>`
    /// (`Bearer <token>`): a server may echo just the token.
    pub fn add_header(&mut self, value: &str) {
        self.add(value);
        if let Some((scheme, credentials)) = value.trim().split_once(' ') {
            if !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphabetic()) {
                self.add(credentials);
            }
        }
    }

    /// Adds the user name, password and query values of `url` (text, parsed or not).
    pub fn add_url(&mut self, url: &str) {
        let (before_query, query) = match url.split_once('?') {
            Some((before, after)) => (before, Some(after.split('#').next().unwrap_or(""))),
            None => (url.split('#').next().unwrap_or(url), None),
        };
        if let Some(user_info) = user_info(before_query) {
            for part in user_info.split(':') {
                self.add(part);
            }
            self.add(user_info);
            // The HTTP client sends user-info as `Authorization: Basic <base64>`, which a server
            // may echo too.
            let (user, password) = user_info.split_once(':').unwrap_or((user_info, ""));
            self.add(&base64(
                format!("{}:{}", percent_decode(user), percent_decode(password)).as_bytes(),
            ));
        }
        for pair in query.unwrap_or("").split('&') {
            let value = pair.split_once('=').map_or(pair, |(_, value)| value);
            self.add(value);
            self.add(&value.replace('+', " "));
        }
    }

    /// `text` with every secret replaced by `***`.
    pub fn mask<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for secret in &self.values {
            if text.contains(secret.as_str()) {
                text = Cow::Owned(text.replace(secret.as_str(), MASK));
            }
        }
        text
    }

    /// The start of `text` with its secrets masked first (a cut must not leave half a secret).
    pub fn excerpt(&self, text: &str, limit: usize) -> String {
        crate::text::excerpt(&self.mask(text), limit)
    }
}

/// The user-info of a URL text (`user:password` in `https://user:password@host/`), if any.
fn user_info(url: &str) -> Option<&str> {
    let start = url.find("://").map_or(0, |at| at + 3);
    let authority = &url[start..];
    let authority = &authority[..authority.find('/').unwrap_or(authority.len())];
    authority.rfind('@').map(|at| &authority[..at])
}

/// `url` without user-info, query and fragment: what errors may show of it. Works on any text,
/// so a value that is not a valid URL is shown as safely as one that is.
pub fn display_url(url: &str) -> String {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    let url = &url[..end];
    match user_info(url) {
        Some(info) => {
            let start = url.find("://").map_or(0, |at| at + 3);
            format!("{}{}", &url[..start], &url[start + info.len() + 1..])
        }
        None => url.to_string(),
    }
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, byte)| n | u32::from(*byte) << (16 - 8 * i));
        for i in 0..4 {
            if i <= group.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `%XX` sequences decoded; anything else (and invalid UTF-8 after decoding) left as it is.
fn percent_decode(text: &str) -> Cow<'_, str> {
    if !text.contains('%') {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_or(Cow::Borrowed(text), Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_user_info_query_or_fragment() {
        assert_eq!(
            display_url("https://me:pa%40ss@gw.example/v1/?api-key=abc&x=1#frag"),
            "https://gw.example/v1/"
        );
        assert_eq!(display_url("http://127.0.0.1:9/v1"), "http://127.0.0.1:9/v1");
        assert_eq!(display_url("collector@x:4318?k=v"), "x:4318");
        // An `@` after the authority is part of the path, not user-info.
        assert_eq!(display_url("http://h/a@b"), "http://h/a@b");
    }

    #[test]
    fn a_header_value_is_masked_whole_and_by_its_credentials_alone() {
        let mut secrets = Secrets::default();
        secrets.add_header("Bearer tok-123456");
        secrets.add_header("plain-value-42");
        assert_eq!(
            secrets.mask("auth Bearer tok-123456, echoed tok-123456, plain-value-42"),
            "auth ***, echoed ***, ***"
        );
        // A value with spaces that is not `<scheme> <credentials>` is masked whole only.
        let mut odd = Secrets::default();
        odd.add_header("a-1 b-2345");
        assert_eq!(odd.mask("a-1 b-2345 / b-2345"), "*** / b-2345");
    }

    #[test]
    fn every_secret_of_a_connection_is_masked_in_both_its_forms() {
        let secrets = Secrets::new(
            Some("https://alice:s3cr%2Ft@h/v1?api-key=KEY%2B1&flag&q=a+b+c"),
            ["sk-live-123", "x", "tenant-value"],
        );
        let text = "alice s3cr%2Ft s3cr/t KEY%2B1 KEY+1 a b c sk-live-123 tenant-value x flag";
        // A bare query item (`?KEY`) counts as a value: some gateways take the key that way.
        assert_eq!(secrets.mask(text), "*** *** *** *** *** *** *** *** x ***");
        assert!(matches!(secrets.mask("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn user_info_is_also_masked_as_the_basic_authorization_the_client_sends() {
        assert_eq!(base64(b"alice:s3cr/t"), "YWxpY2U6czNjci90");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"a"), "YQ==");
        let secrets = Secrets::new(Some("http://alice:s3cr%2Ft@h/"), []);
        assert_eq!(secrets.mask("Basic YWxpY2U6czNjci90"), "Basic ***");
    }

    #[test]
    fn an_excerpt_never_keeps_half_a_secret() {
        let secrets = Secrets::new(None, ["0123456789"]);
        assert_eq!(secrets.excerpt("abc 0123456789 def", 7), "abc ***…");
    }
}
