//! The outbound rules (SPEC §5, "The door and outbound calls"): where a step's URL may point.
//!
//! Every kind that sends HTTP (`http_request`, `publish_output`, `find_or_create`) goes through
//! these rules; the kinds only name their URL fields ([`crate::steps::StepKind::outbound_urls`]).
//!
//! 1. **Hosts from run data need an opt-in.** A URL template whose *host part* reads anything
//!    but `env.*` and `run.*` (the trigger input, a step's output, `error`) is refused at
//!    validation (`input_host`, with the step and the field) unless the step sets
//!    `allow_input_host: true`; the linter then warns (`lint_input_host`). See [`host_source`]
//!    for how the host part is found.
//! 2. **Such hosts are checked after DNS resolution** ([`OutboundPolicy`]): a host from run
//!    data that is, or resolves to, a non-public address ([`non_public`]: loopback, private
//!    RFC 1918 / RFC 4193, link-local, CGNAT, unspecified, multicast, documentation, reserved,
//!    cloud metadata) is refused before any connection (`url_not_allowed`) unless settings
//!    `outbound_allow` lists the host name or the address (an IP or a CIDR), on every port or,
//!    written with `:port` (`127.0.0.1:9000`, `crm.internal:8443`, `10.0.0.0/8:8080`,
//!    `[::1]:9000`), on that port only ([`OutboundAllow`] has the forms). The port is the
//!    request's: the URL's, or 80 / 443 by its scheme. So allowing a local sandbox's port does
//!    not open Fluxo's own `/metrics` or any other local port. The check is in the HTTP
//!    client's DNS resolver, so the connection goes to an address that was checked (no second
//!    lookup an attacker's DNS could answer differently), and IP-literal URLs are checked
//!    before sending. The resolver is told the port by its client: one client per port an
//!    entry names, one for the rest (`PolicyResolver`, [`crate::steps::http::LiveHttp`]).
//!    Connections for such calls are never pooled: every request and every redirect hop
//!    resolves and is checked again (a hop stays on its origin's port, rule 3). `localhost`
//!    and `*.localhost` are loopback without asking DNS (RFC 6761 §6.3). Hosts the author
//!    wrote, or took from `env.*`, are the author's choice and are not checked: the local
//!    sandbox through `{{ env.CRM_URL }}` keeps working.
//! 3. **Redirects stay within one origin** (scheme, host and port, RFC 6454): a redirect to
//!    another origin is not followed and fails the step with `redirect_not_followed` (naming
//!    the status and the target's origin), so the body and headers such as `X-Api-Key` are never
//!    sent to a host nobody configured. Same-origin redirects are followed up to
//!    [`MAX_REDIRECTS`].
//! 4. **Responses are capped** (`max_response_bytes`, default [`DEFAULT_MAX_RESPONSE_BYTES`]):
//!    the body is read as a stream and reading stops at the cap (`response_too_large`).

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;

/// Default of `max_response_bytes`: 10 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 10 * 1024 * 1024;
/// The largest `max_response_bytes` a step may set: 100 MiB (the body lands in the run record).
pub const MAX_MAX_RESPONSE_BYTES: u64 = 100 * 1024 * 1024;
/// Same-origin redirects followed at most (the limit browsers and reqwest use).
pub const MAX_REDIRECTS: usize = 10;
/// Process variable with extra `outbound_allow` entries, comma-separated, in the same forms
/// (for the CLI, which reads no settings file):
/// `FLUXO_OUTBOUND_ALLOW=127.0.0.1:9000,10.0.0.0/8,crm.internal:8443`.
pub const ALLOW_ENV: &str = "FLUXO_OUTBOUND_ALLOW";

// ---------------------------------------------------------------------------------------------
// 1. Where a URL template's host comes from
// ---------------------------------------------------------------------------------------------

/// Where the host of a URL template comes from ([`host_source`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostSource {
    /// Written in the workflow, or taken from `env.*` / `run.*`: the author's choice.
    Author,
    /// Rendered from run data: the variables read in the host part, as written
    /// (`input.url`, `steps.fetch.output.next`), sorted.
    Data(Vec<String>),
}

impl HostSource {
    /// True for [`HostSource::Data`].
    pub fn is_data(&self) -> bool {
        matches!(self, HostSource::Data(_))
    }
}

use crate::template::AUTHOR_ROOTS;

/// Where the host of URL template `url` comes from: a conservative textual analysis, then
/// minijinja's own parser.
///
/// 1. The template is cut into literal text and `{{ }}` / `{% %}` / `{# #}` blocks.
/// 2. The **host part** is everything before the first character of *literal* text that ends
///    the authority whatever the blocks render: `?` or `#`, or a `/` or `\` that is not part of
///    the slashes after `scheme:` (a slash next to another slash, or right after a `:`, does
///    not end it). `{{ env.CRM_URL }}/deals` → `{{ env.CRM_URL }}`;
///    `https://api.example.com/u/{{ input.id }}` → no block; `https://{{ input.domain }}/x`
///    and `{{ env.BASE }}{{ input.path }}` (the path could render `@evil.example`) → the input.
/// 3. The variables read in the host part are minijinja's `undeclared_variables` of it (so
///    `{% set h = input.h %}` counts as `input.h`); when the cut does not parse on its own (a
///    `{% if %}` spanning it) those of the whole template, a superset.
/// 4. Any variable but `env.*`, `run.*` and the global functions is run data: the trigger
///    input (`input.*`, `steps.<trigger>.output.*`), any step's output (an answer from a
///    remote server, or data copied from the input by a transform), `error.*`.
///
/// A host chosen by a condition on run data (`{% if input.eu %}…`) counts as run data too.
/// Assumed: `env.*` values are base URLs (`scheme://host[:port][/path]`), not fragments such
/// as `https:` that would leave the host to the text after them.
pub fn host_source(url: &str) -> HostSource {
    if !crate::template::is_template(url) {
        return HostSource::Author;
    }
    let cut = host_part_end(url);
    let vars = undeclared(&url[..cut]).or_else(|| undeclared(url));
    let Some(vars) = vars else {
        // Not a template minijinja parses: validation reports the syntax error.
        return HostSource::Author;
    };
    let data: BTreeSet<String> = vars
        .into_iter()
        .filter(|v| {
            let root = v.split(['.', '[']).next().unwrap_or(v);
            !AUTHOR_ROOTS.contains(&root)
        })
        .collect();
    if data.is_empty() {
        HostSource::Author
    } else {
        HostSource::Data(data.into_iter().collect())
    }
}

fn undeclared(src: &str) -> Option<std::collections::HashSet<String>> {
    let env = minijinja::Environment::new();
    let t = env.template_from_str(src).ok()?;
    Some(t.undeclared_variables(true))
}

/// Byte offset where the host part of template `s` ends (see [`host_source`]).
fn host_part_end(s: &str) -> usize {
    let b = s.as_bytes();
    let is_slash = |c: u8| c == b'/' || c == b'\\';
    // Which bytes are literal text (not inside a block).
    let mut literal = vec![true; b.len()];
    let mut i = 0;
    while i < b.len() {
        match block_end(s, i) {
            Some(end) => {
                literal[i..end].iter_mut().for_each(|l| *l = false);
                i = end;
            }
            None => i += 1,
        }
    }
    for i in (0..b.len()).filter(|&i| literal[i]) {
        let c = b[i];
        if c == b'?' || c == b'#' {
            return i;
        }
        if is_slash(c) {
            // Only literal neighbours count: a block next to the slash may render nothing.
            let prev = (i > 0 && literal[i - 1]).then(|| b[i - 1]);
            let next = (i + 1 < b.len() && literal[i + 1]).then(|| b[i + 1]);
            let in_slash_run =
                prev.is_some_and(|p| is_slash(p) || p == b':') || next.is_some_and(is_slash);
            if !in_slash_run {
                return i;
            }
        }
    }
    b.len()
}

/// If a block (`{{`, `{%`, `{#`) opens at `i`, the index just past its end (or the text's
/// end when it never closes). String literals inside `{{ }}` and `{% %}` are skipped.
fn block_end(s: &str, i: usize) -> Option<usize> {
    let b = s.as_bytes();
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let close: &[u8] = match b.get(i + 1) {
        Some(b'{') => b"}}",
        Some(b'%') => b"%}",
        Some(b'#') => b"#}",
        _ => return None,
    };
    let comment = close == b"#}";
    let mut j = i + 2;
    while j < b.len() {
        let c = b[j];
        if !comment && (c == b'"' || c == b'\'') {
            j += 1;
            while j < b.len() && b[j] != c {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            j += 1;
            continue;
        }
        if b[j..].starts_with(close) {
            return Some(j + 2);
        }
        j += 1;
    }
    Some(b.len())
}

// ---------------------------------------------------------------------------------------------
// 2. Addresses
// ---------------------------------------------------------------------------------------------

/// Why `ip` is not a public address a host from run data may reach, or `None` when it is one.
/// IPv4-mapped (`::ffff:a.b.c.d`), NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`) addresses are
/// judged by the IPv4 address they carry. Sources: the IANA special-purpose address registries
/// (RFC 6890) and the RFCs named in each reason.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits)
    };
    (u128::from(ip) & mask) == (u128::from(net) & mask)
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    const RULES: &[([u8; 4], u32, &str)] = &[
        ([169, 254, 169, 254], 32, "the cloud metadata address"),
        ([0, 0, 0, 0], 8, "unspecified (\"this network\", RFC 1122)"),
        ([10, 0, 0, 0], 8, "private (RFC 1918)"),
        ([100, 64, 0, 0], 10, "shared CGNAT space (RFC 6598)"),
        ([127, 0, 0, 0], 8, "loopback (RFC 1122)"),
        ([169, 254, 0, 0], 16, "link-local (RFC 3927)"),
        ([172, 16, 0, 0], 12, "private (RFC 1918)"),
        ([192, 0, 0, 0], 24, "IETF protocol assignments (RFC 6890)"),
        ([192, 0, 2, 0], 24, "documentation (RFC 5737)"),
        ([192, 88, 99, 0], 24, "reserved (6to4 relay, RFC 7526)"),
        ([192, 168, 0, 0], 16, "private (RFC 1918)"),
        ([198, 18, 0, 0], 15, "benchmarking (RFC 2544)"),
        ([198, 51, 100, 0], 24, "documentation (RFC 5737)"),
        ([203, 0, 113, 0], 24, "documentation (RFC 5737)"),
        ([224, 0, 0, 0], 4, "multicast (RFC 5771)"),
        (
            [240, 0, 0, 0],
            4,
            "reserved or broadcast (RFC 1112, RFC 919)",
        ),
    ];
    RULES
        .iter()
        .find(|(net, bits, _)| in_v4(ip, *net, *bits))
        .map(|(_, _, why)| *why)
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return non_public_v4(v4);
    }
    let seg = ip.segments();
    let v6 = |s: [u16; 8]| Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]);
    if ip == v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254]) {
        return Some("the cloud metadata address");
    }
    if ip.is_unspecified() {
        return Some("unspecified (RFC 4291)");
    }
    if ip.is_loopback() {
        return Some("loopback (RFC 4291)");
    }
    // NAT64 (RFC 6052) and 6to4 (RFC 3056): judged by the IPv4 address inside.
    if in_v6(ip, v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0]), 96) {
        let o = ip.octets();
        return non_public_v4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    if seg[0] == 0x2002 {
        let o = ip.octets();
        return non_public_v4(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    const RULES: &[([u16; 8], u32, &str)] = &[
        (
            [0, 0, 0, 0, 0, 0, 0, 0],
            96,
            "reserved (IPv4-compatible, RFC 4291)",
        ),
        (
            [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
            48,
            "local-use NAT64 (RFC 8215)",
        ),
        ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only (RFC 6666)"),
        (
            [0x2001, 0, 0, 0, 0, 0, 0, 0],
            32,
            "a Teredo tunnel (RFC 4380)",
        ),
        (
            [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
            32,
            "documentation (RFC 3849)",
        ),
        (
            [0xfc00, 0, 0, 0, 0, 0, 0, 0],
            7,
            "private (unique local, RFC 4193)",
        ),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local (RFC 4291)"),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local (RFC 3879)"),
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast (RFC 4291)"),
    ];
    RULES
        .iter()
        .find(|(net, bits, _)| in_v6(ip, v6(*net), *bits))
        .map(|(_, _, why)| *why)
}

/// Whether `host` (lower case, no trailing dot) is a localhost name: loopback by definition
/// (RFC 6761 §6.3), never asked of DNS.
fn is_localhost_name(host: &str) -> bool {
    host == "localhost" || host.ends_with(".localhost")
}

/// A host name as compared: lower case, without a trailing dot.
fn normal_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

// ---------------------------------------------------------------------------------------------
// The allowlist
// ---------------------------------------------------------------------------------------------

/// Settings `outbound_allow`: host names, IP addresses and CIDR blocks a host from run data
/// may reach even though it is not public, each on every port or, written with `:port`, on
/// that port only. A host name allows whatever it resolves to; an address or block allows the
/// addresses in it.
///
/// | entry | allows |
/// | --- | --- |
/// | `crm.internal` | the name, whatever it resolves to, on every port |
/// | `crm.internal:8443` | the name on port 8443 only |
/// | `127.0.0.1`, `::1`, `[::1]` | the address on every port |
/// | `127.0.0.1:9000`, `[::1]:9000` | the address on port 9000 only |
/// | `10.0.0.0/8`, `fd00::/8`, `[fd00::]/8` | the block on every port |
/// | `10.0.0.0/8:8080`, `[fd00::]/8:8080`, `[fd00::/8]:8080` | the block on port 8080 only |
///
/// The port is the one the request goes to: the URL's, or 80 / 443 by its scheme. It is 1 to
/// 65535; `name:` (an empty port) is refused rather than read as every port. An IPv6 address
/// or block with a port is written in brackets: without them every `:` belongs to the address
/// (`::1:8080` is the address `::1:8080`, on every port, as before ports existed), and a form
/// that only parses with its last `:…` taken as a port (`fd00::/8:8080`, `::1:99999`) is
/// refused with the bracketed spelling.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundAllow {
    /// Host names (lower case, no trailing dot), each with its one port (`None`: every port).
    hosts: Vec<(String, Option<u16>)>,
    /// Blocks (an address is a block of 32 or 128 bits), each with its one port.
    nets: Vec<(IpAddr, u8, Option<u16>)>,
}

/// An `outbound_allow` entry that is not one of the forms of [`OutboundAllow`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("outbound_allow[{index}] `{entry}`: {why}. An entry is a host name, an IP address or a CIDR block, with `:port` to allow that port only (e.g. crm.internal, crm.internal:8443, 127.0.0.1, 127.0.0.1:9000, 10.0.0.0/8, 10.0.0.0/8:8080, fd00::/8, [::1]:8080, [fd00::]/8:8080)")]
pub struct BadAllowEntry {
    /// The entry's position in the list (0-based).
    pub index: usize,
    /// The entry as given.
    pub entry: String,
    /// What is wrong with it (`port 0 is not a port a request can go to (1 to 65535)`).
    pub why: String,
}

/// What an entry allows, before its port.
enum Target {
    Host(String),
    Net(IpAddr, u8),
}

/// One entry (trimmed): its target and its port (`None`: every port), or why it is none.
fn parse_entry(raw: &str) -> Result<(Target, Option<u16>), String> {
    if raw.is_empty() {
        return Err("the entry is empty".into());
    }
    if raw.contains("://") {
        return Err(
            "a URL: write only the host, address or block (and `:port` to limit it to \
                    one port), without the scheme or a path"
                .into(),
        );
    }
    if raw.chars().any(char::is_whitespace) {
        return Err("it has a space".into());
    }
    let (target, port, bracketed) = if let Some(rest) = raw.strip_prefix('[') {
        let (inner, after) = rest
            .split_once(']')
            .ok_or("an address in brackets lacks its `]`")?;
        let (bits, port) = match after.split_once(':') {
            Some((b, p)) => (b, Some(p)),
            None => (after, None),
        };
        if !(bits.is_empty() || bits.starts_with('/')) {
            return Err(format!(
                "`{after}` after `]` is neither `/bits` nor `:port`"
            ));
        }
        (format!("{inner}{bits}"), port, true)
    } else {
        match raw.split_once(':') {
            None => (raw.to_string(), None, false),
            Some((t, p)) if !p.contains(':') => (t.to_string(), Some(p), false),
            // Two or more `:`: IPv6 without brackets, where every `:` is the address's.
            Some(_) => {
                if let Err(e) = parse_net(raw) {
                    if let Some((t, p)) = raw.rsplit_once(':') {
                        let digits = !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
                        if digits && parse_net(t).is_ok() {
                            let (a, bits) = t
                                .split_once('/')
                                .map_or((t, String::new()), |(a, b)| (a, format!("/{b}")));
                            return Err(format!(
                                "an IPv6 address or block with a port goes in brackets: \
                                 `[{a}]{bits}:{p}`"
                            ));
                        }
                    }
                    // An address with a bad prefix length: say that.
                    if let Some((a, _)) = raw.split_once('/') {
                        if a.parse::<IpAddr>().is_ok() {
                            return Err(e);
                        }
                    }
                    let why = "not an IPv6 address or block, and a host name has at most one \
                               `:` (before its port)";
                    return Err(why.into());
                }
                (raw.to_string(), None, false)
            }
        }
    };
    let port = port.map(parse_port).transpose()?;
    if target.is_empty() {
        return Err("nothing before the `:port`".into());
    }
    if bracketed || target.contains('/') || target.parse::<IpAddr>().is_ok() {
        let (ip, bits) = parse_net(&target).map_err(|e| {
            if bracketed {
                format!("{e} (brackets hold an IP address or block)")
            } else {
                e
            }
        })?;
        return Ok((Target::Net(ip, bits), port));
    }
    let host = normal_host(&target);
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    };
    if host.is_empty() || host.len() > 253 || !host.split('.').all(label_ok) {
        return Err(format!(
            "`{target}` is neither an IP address nor a host name (letters, digits, `-` and `_` \
             in labels separated by `.`)"
        ));
    }
    Ok((Target::Host(host), port))
}

/// `addr` or `addr/bits` (either family), without brackets.
fn parse_net(s: &str) -> Result<(IpAddr, u8), String> {
    match s.split_once('/') {
        Some((addr, bits)) => {
            let ip: IpAddr = addr
                .parse()
                .map_err(|_| format!("`{addr}` before `/` is not an IP address"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            match bits.parse::<u8>() {
                Ok(b) if b <= max => Ok((ip, b)),
                _ => Err(format!("`/{bits}` is not a prefix length from 0 to {max}")),
            }
        }
        None => {
            let ip: IpAddr = s
                .parse()
                .map_err(|_| format!("`{s}` is not an IP address"))?;
            Ok((ip, if ip.is_ipv4() { 32 } else { 128 }))
        }
    }
}

/// The text after an entry's `:`: a port from 1 to 65535.
fn parse_port(p: &str) -> Result<u16, String> {
    if p.is_empty() {
        return Err("the port after `:` is missing (leave out the `:` to allow every port)".into());
    }
    if !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("port `{p}` is not a number"));
    }
    match p.parse::<u32>() {
        Ok(0) => Err("port 0 is not a port a request can go to (1 to 65535)".into()),
        Ok(n) if n <= u32::from(u16::MAX) => Ok(n as u16),
        _ => Err(format!("port `{p}` is over 65535")),
    }
}

/// Whether an entry with port `entry` covers a request to `port` (`None`: a port not known,
/// which only an entry for every port covers).
fn port_covers(entry: Option<u16>, port: Option<u16>) -> bool {
    entry.is_none() || entry == port
}

/// How an allowlist entry for `addr` on `port` is written (`127.0.0.1:9000`, `[::1]:9000`).
fn entry_with_port(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

impl OutboundAllow {
    /// Parse entries (each trimmed), in the forms of [`OutboundAllow`]: `crm.internal`,
    /// `crm.internal:8443`, `127.0.0.1`, `127.0.0.1:9000`, `::1`, `[::1]`, `[::1]:9000`,
    /// `10.0.0.0/8`, `10.0.0.0/8:8080`, `fd00::/8`, `[fd00::]/8:8080`.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, BadAllowEntry> {
        let mut allow = OutboundAllow::default();
        for (index, e) in entries.iter().enumerate() {
            let raw = e.as_ref().trim();
            let (target, port) = parse_entry(raw).map_err(|why| BadAllowEntry {
                index,
                entry: raw.to_string(),
                why,
            })?;
            match target {
                Target::Host(h) => allow.hosts.push((h, port)),
                Target::Net(ip, bits) => allow.nets.push((ip, bits, port)),
            }
        }
        Ok(allow)
    }

    /// Entries from [`ALLOW_ENV`] (empty when unset; bad entries are skipped with a warning).
    pub fn from_process_env() -> Self {
        match std::env::var(ALLOW_ENV) {
            Ok(v) => Self::from_env_value(&v),
            Err(_) => Self::default(),
        }
    }

    /// Comma-separated entries as [`ALLOW_ENV`] gives them, each parsed as a settings entry;
    /// a bad one is skipped with a warning naming it and what is wrong.
    pub fn from_env_value(v: &str) -> Self {
        let mut allow = Self::default();
        for e in v.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match Self::parse(&[e]) {
                Ok(one) => allow.extend(one),
                Err(err) => tracing::warn!("{ALLOW_ENV}: {err}; ignored"),
            }
        }
        allow
    }

    fn extend(&mut self, other: OutboundAllow) {
        self.hosts.extend(other.hosts);
        self.nets.extend(other.nets);
    }

    /// Whether the host name is listed for a request to `port` (`None`: a port not known, so
    /// only entries without a port count).
    pub fn allows_host(&self, host: &str, port: Option<u16>) -> bool {
        let h = normal_host(host);
        self.hosts
            .iter()
            .any(|(name, p)| *name == h && port_covers(*p, port))
    }

    /// Whether the address is in a listed address or block for a request to `port` (`None`:
    /// a port not known, so only entries without a port count). An IPv4-mapped IPv6 address
    /// also matches IPv4 entries.
    pub fn allows_ip(&self, ip: IpAddr, port: Option<u16>) -> bool {
        let mapped = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
            _ => None,
        };
        self.nets.iter().any(|&(net, bits, p)| {
            port_covers(p, port)
                && [Some(ip), mapped]
                    .into_iter()
                    .flatten()
                    .any(|ip| match (ip, net) {
                        (IpAddr::V4(a), IpAddr::V4(n)) => in_v4(a, n.octets(), bits as u32),
                        (IpAddr::V6(a), IpAddr::V6(n)) => in_v6(a, n, bits as u32),
                        _ => false,
                    })
        })
    }

    /// Whether some entry is limited to `port` (requests to it need a resolver that knows
    /// their port: see `PolicyResolver`).
    pub fn names_port(&self, port: u16) -> bool {
        self.hosts.iter().any(|&(_, p)| p == Some(port))
            || self.nets.iter().any(|&(_, _, p)| p == Some(port))
    }
}

// ---------------------------------------------------------------------------------------------
// The policy and the resolver
// ---------------------------------------------------------------------------------------------

/// A call refused by the outbound rules (never retried).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// `url_not_allowed`, `redirect_not_followed` or `response_too_large`.
    pub code: &'static str,
    pub message: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refused {}

/// Resolves host names (the system resolver, or a fixed table in tests).
#[async_trait]
pub trait Lookup: Send + Sync + 'static {
    /// Every address of `host`.
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>>;
}

/// The system resolver (`getaddrinfo`, on tokio's blocking pool).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemLookup;

#[async_trait]
impl Lookup for SystemLookup {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, 0))
            .await?
            .map(|a| a.ip())
            .collect())
    }
}

/// The outbound allowlist and the resolver, shared by the engine and its HTTP clients.
pub struct OutboundPolicy {
    /// Settings `outbound_allow` plus [`ALLOW_ENV`].
    allow: RwLock<OutboundAllow>,
    /// [`ALLOW_ENV`] entries, kept when settings replace theirs.
    process: OutboundAllow,
    lookup: Arc<dyn Lookup>,
}

impl fmt::Debug for OutboundPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboundPolicy")
            .field("allow", &self.allow())
            .finish_non_exhaustive()
    }
}

impl Default for OutboundPolicy {
    fn default() -> Self {
        Self::new(Arc::new(SystemLookup))
    }
}

impl OutboundPolicy {
    /// A policy resolving through `lookup`, allowing what [`ALLOW_ENV`] lists.
    pub fn new(lookup: Arc<dyn Lookup>) -> Self {
        let process = OutboundAllow::from_process_env();
        OutboundPolicy {
            allow: RwLock::new(process.clone()),
            process,
            lookup,
        }
    }

    /// Replace the settings' entries (the process's stay).
    pub fn set_allow(&self, settings: OutboundAllow) {
        let mut all = self.process.clone();
        all.extend(settings);
        *self.allow.write().unwrap_or_else(|e| e.into_inner()) = all;
    }

    /// The entries in force.
    pub fn allow(&self) -> OutboundAllow {
        self.allow.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Check an IP-literal host (no DNS) for a request to `port` (`None`: a port not known,
    /// so only `outbound_allow` entries without a port count): `Err` when it is not public and
    /// not allowed.
    pub fn check_ip(&self, ip: IpAddr, port: Option<u16>, what: &str) -> Result<(), Refused> {
        match non_public(ip) {
            Some(why) if !self.allow().allows_ip(ip, port) => {
                Err(not_allowed(what, &ip.to_string(), why, port))
            }
            _ => Ok(()),
        }
    }

    /// Check the host of `url` when it is an IP literal, on the port the request goes to (the
    /// URL's, or its scheme's default); a name is checked when resolved.
    pub fn check_url(&self, url: &reqwest::Url, what: &str) -> Result<(), Refused> {
        match ip_host(url) {
            Some(ip) => self.check_ip(ip, url.port_or_known_default(), what),
            None => Ok(()),
        }
    }

    /// Resolve `host` for a request to `port` (`None`: a port not known, so only
    /// `outbound_allow` entries without a port count) and keep the addresses a host from run
    /// data may reach there (every one when the name is listed for that port); `Err` when none
    /// is left.
    pub async fn resolve_checked(
        &self,
        host: &str,
        port: Option<u16>,
    ) -> Result<Vec<IpAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let name = normal_host(host);
        let allow = self.allow();
        if allow.allows_host(&name, port) {
            return Ok(self.lookup.lookup(&name).await?);
        }
        if is_localhost_name(&name) {
            return Err(Box::new(not_allowed(
                host,
                host,
                "loopback (a localhost name, RFC 6761)",
                port,
            )));
        }
        let addrs = self.lookup.lookup(&name).await?;
        let mut refused = Vec::new();
        let kept: Vec<IpAddr> = addrs
            .into_iter()
            .filter(|&ip| match non_public(ip) {
                Some(why) if !allow.allows_ip(ip, port) => {
                    refused.push(format!("{ip} is {why}"));
                    false
                }
                _ => true,
            })
            .collect();
        if kept.is_empty() && !refused.is_empty() {
            let (on, hint) = match port {
                Some(p) => (
                    format!(" on port {p}"),
                    format!(" (with `:{p}` for that port only)"),
                ),
                None => (String::new(), String::new()),
            };
            return Err(Box::new(Refused {
                code: "url_not_allowed",
                message: format!(
                    "{host} resolves only to addresses a host from run data may not reach{on}: \
                     {}. List the host or the address in settings outbound_allow to allow \
                     it{hint}",
                    refused.join("; ")
                ),
            }));
        }
        Ok(kept)
    }

    /// Resolve `host` without checking (hosts the author chose).
    pub async fn resolve(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        self.lookup.lookup(host).await
    }
}

fn not_allowed(what: &str, addr: &str, why: &str, port: Option<u16>) -> Refused {
    let at = if what == addr {
        format!("{addr} is")
    } else {
        format!("{what}: {addr} is")
    };
    let (on, hint) = match port {
        Some(p) => (
            format!(" on port {p}"),
            format!(" (`{}` for that port only)", entry_with_port(addr, p)),
        ),
        None => (String::new(), String::new()),
    };
    Refused {
        code: "url_not_allowed",
        message: format!(
            "{at} {why}, which a host from run data may not reach{on}. List it in settings \
             outbound_allow to allow it{hint}"
        ),
    }
}

/// The HTTP client's resolver: checks (hosts from run data) or not (hosts the author chose).
///
/// reqwest hands a resolver the host name only, and the connection then goes to the answered
/// addresses on the URL's port. So a checking resolver is built for one port: its client is
/// used only for URLs to that port (same-origin redirects keep it), and it checks each
/// address with that port ([`OutboundPolicy::resolve_checked`]). With `port: None` it checks
/// with only the `outbound_allow` entries that allow every port, which is right for any port
/// no entry names (the transport keeps one such client, and one per named port).
pub(crate) struct PolicyResolver {
    pub policy: Arc<OutboundPolicy>,
    pub checked: bool,
    /// The port of every request through this resolver's client, if it is one port.
    pub port: Option<u16>,
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let checked = self.checked;
        let port = self.port;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let ips = if checked {
                policy.resolve_checked(&host, port).await?
            } else {
                policy.resolve(&host).await?
            };
            let addrs: Vec<SocketAddr> = ips.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect();
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The [`Refused`] somewhere in an error's source chain (the resolver's answer, through
/// hyper's connect error and reqwest's).
pub(crate) fn refused_in(e: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<Refused>() {
            return Some(r.clone());
        }
        cur = err.source();
    }
    None
}

/// The host of `url` when it is an IP literal. The URL parser (WHATWG rules) has already
/// turned every IPv4 form (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`) into dotted decimal.
pub fn ip_host(url: &reqwest::Url) -> Option<IpAddr> {
    let h = url.host_str()?;
    let h = h
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(h);
    h.parse().ok()
}

/// `scheme://host:port` of a URL (the port made explicit), for same-origin checks
/// (RFC 6454 §4).
pub fn origin(u: &reqwest::Url) -> String {
    format!(
        "{}://{}:{}",
        u.scheme(),
        u.host_str().unwrap_or(""),
        u.port_or_known_default().unwrap_or(0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(v: &[&str]) -> HostSource {
        HostSource::Data(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn host_source_reads_only_the_host_part() {
        use HostSource::Author;
        for (url, want) in [
            ("https://api.example.com/x", Author),
            ("{{ env.CRM_URL }}/deals", Author),
            ("{{ env.CRM_URL }}/deals/{{ input.id }}?q={{ input.q }}", Author),
            ("https://api.example.com/u/{{ input.id }}", Author),
            ("https://api.example.com?u={{ input.id }}", Author),
            ("https://api.example.com#{{ input.id }}", Author),
            ("http://{{ env.HOST }}:{{ env.PORT }}/x/{{ input.id }}", Author),
            ("{{ env.CRM_URL }}/runs/{{ run.id }}", Author),
            ("{{ input.url }}", data(&["input.url"])),
            ("https://{{ input.domain }}/x", data(&["input.domain"])),
            ("{{ env.BASE }}{{ input.path }}", data(&["input.path"])),
            ("https://api.example.com{{ input.path }}", data(&["input.path"])),
            ("https://{{ input.user }}@api.example.com/", data(&["input.user"])),
            ("{{ env.S }}://{{ input.h }}/x", data(&["input.h"])),
            ("https:/{{ input.h }}/x", data(&["input.h"])),
            ("https:{{ input.h }}", data(&["input.h"])),
            ("{{ steps.hook.output.url }}", data(&["steps.hook.output.url"])),
            ("{{ steps.fetch.output.body.next }}", data(&["steps.fetch.output.body.next"])),
            ("{% set h = input.h %}https://{{ h }}/x", data(&["input.h"])),
            (
                "{% if input.eu %}https://eu.example.com{% else %}https://us.example.com{% endif %}/x",
                data(&["input.eu"]),
            ),
            ("{{ env.CRM_URL ~ input.path }}", data(&["input.path"])),
            ("https://{{ '}}' }}{{ input.h }}/", data(&["input.h"])),
            ("{{ error.message }}", data(&["error.message"])),
        ] {
            assert_eq!(host_source(url), want, "{url}");
        }
    }

    #[test]
    fn addresses() {
        let np = |s: &str| non_public(s.parse().unwrap());
        for s in [
            "127.0.0.1",
            "127.9.9.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "fd00:ec2::254",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::1",
            "::7f00:1",
            "2001:db8::1",
            "198.18.0.1",
        ] {
            assert!(np(s).is_some(), "{s} is not public");
        }
        assert_eq!(np("169.254.169.254"), Some("the cloud metadata address"));
        assert_eq!(np("fd00:ec2::254"), Some("the cloud metadata address"));
        for s in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "64:ff9b::808:808",
        ] {
            assert!(np(s).is_none(), "{s} is public");
        }
    }

    #[test]
    fn allowlist() {
        let a = OutboundAllow::parse(&[
            "127.0.0.1",
            "10.0.0.0/8",
            "CRM.Internal.",
            "[::1]",
            "fd00::/8",
        ])
        .unwrap();
        // Entries without a port allow every port, and a port not known.
        for port in [None, Some(80), Some(9000)] {
            let ip = |s: &str| a.allows_ip(s.parse().unwrap(), port);
            assert!(ip("127.0.0.1"));
            assert!(ip("::ffff:127.0.0.1"));
            assert!(!ip("127.0.0.2"));
            assert!(ip("10.200.0.1"));
            assert!(ip("::1"));
            assert!(ip("fd12::1"));
            assert!(a.allows_host("crm.internal", port));
            assert!(!a.allows_host("other.internal", port));
        }
        assert!(!a.names_port(80));
        for bad in ["", "10.0.0.0/33", "a b", "http://x", "x/y", "::1/200"] {
            assert!(OutboundAllow::parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_entry_with_a_port_allows_that_port_only() {
        let a = OutboundAllow::parse(&[
            "127.0.0.1:9000",
            " CRM.Internal.:8443 ",
            "10.0.0.0/8:8080",
            "[::1]:9000",
            "[fd00::]/8:8080",
            "[fd12::/16]:7000",
            "[192.168.1.1]:81",
            "svc.internal",
            "172.16.0.0/12:65535",
            "localhost:8787",
        ])
        .unwrap();
        let ip = |s: &str, port: Option<u16>| a.allows_ip(s.parse().unwrap(), port);
        assert!(ip("127.0.0.1", Some(9000)));
        assert!(ip("::ffff:127.0.0.1", Some(9000)));
        assert!(!ip("127.0.0.1", Some(9001)));
        assert!(!ip("127.0.0.1", Some(80)));
        assert!(
            !ip("127.0.0.1", None),
            "a port not known is no port of an entry"
        );
        assert!(!ip("127.0.0.2", Some(9000)));
        assert!(ip("10.200.0.1", Some(8080)));
        assert!(!ip("10.200.0.1", Some(80)));
        assert!(ip("::1", Some(9000)));
        assert!(!ip("::1", Some(8080)));
        assert!(ip("fd12::1", Some(8080)));
        assert!(ip("fd12::1", Some(7000)));
        assert!(!ip("fd13::1", Some(7000)));
        assert!(ip("192.168.1.1", Some(81)));
        assert!(!ip("192.168.1.2", Some(81)));
        assert!(ip("172.31.0.1", Some(65535)));
        assert!(!ip("172.31.0.1", Some(65534)));
        assert!(a.allows_host("crm.internal", Some(8443)));
        assert!(a.allows_host("CRM.internal.", Some(8443)));
        assert!(!a.allows_host("crm.internal", Some(443)));
        assert!(!a.allows_host("crm.internal", None));
        assert!(a.allows_host("svc.internal", Some(1)));
        assert!(a.allows_host("svc.internal", None));
        assert!(a.allows_host("localhost", Some(8787)));
        assert!(!a.allows_host("localhost", Some(8788)));
        for p in [9000, 8443, 8080, 7000, 81, 65535, 8787] {
            assert!(a.names_port(p), "{p}");
        }
        for p in [80, 443, 9001] {
            assert!(!a.names_port(p), "{p}");
        }

        // Without brackets every `:` of an IPv6 address is the address's (as before ports).
        let a = OutboundAllow::parse(&["::1:8080", "fd00::/8"]).unwrap();
        assert!(a.allows_ip("::1:8080".parse().unwrap(), Some(1)));
        assert!(!a.allows_ip("::1".parse().unwrap(), Some(8080)));
        assert!(a.allows_ip("fd00::9".parse().unwrap(), Some(8080)));
    }

    #[test]
    fn a_bad_entry_says_what_is_wrong_with_it() {
        for (bad, why) in [
            ("127.0.0.1:0", "port 0 is not a port"),
            ("127.0.0.1:65536", "port `65536` is over 65535"),
            ("crm.internal:99999999999999999999", "is over 65535"),
            ("crm.internal:", "the port after `:` is missing"),
            ("[::1]:", "the port after `:` is missing"),
            ("10.0.0.0/8:", "the port after `:` is missing"),
            ("crm.internal:http", "port `http` is not a number"),
            ("crm.internal:+80", "port `+80` is not a number"),
            ("crm.internal:-1", "port `-1` is not a number"),
            (
                "fd00::/8:8080",
                "an IPv6 address or block with a port goes in brackets: `[fd00::]/8:8080`",
            ),
            (
                "::ffff:127.0.0.1:80",
                "goes in brackets: `[::ffff:127.0.0.1]:80`",
            ),
            ("::1:99999", "goes in brackets: `[::1]:99999`"),
            ("[::1]:99999", "port `99999` is over 65535"),
            ("a:b:c", "a host name has at most one `:`"),
            ("[::1", "lacks its `]`"),
            (
                "[::1]8080",
                "`8080` after `]` is neither `/bits` nor `:port`",
            ),
            ("[crm.internal]:80", "brackets hold an IP address"),
            ("[fd00::/8]/8", "is not a prefix length"),
            (
                "10.0.0.0/33:80",
                "`/33` is not a prefix length from 0 to 32",
            ),
            ("fd00::/129", "`/129` is not a prefix length from 0 to 128"),
            ("crm/8:80", "`crm` before `/` is not an IP address"),
            ("http://127.0.0.1:9000", "a URL"),
            (":8080", "nothing before the `:port`"),
            ("crm internal:80", "it has a space"),
            (
                "crm!.internal:80",
                "is neither an IP address nor a host name",
            ),
            ("", "the entry is empty"),
        ] {
            let e = OutboundAllow::parse(&["ok.internal", bad]).unwrap_err();
            assert_eq!(e.index, 1, "{bad}");
            assert_eq!(e.entry, bad.trim(), "{bad}");
            assert!(e.why.contains(why), "{bad}: {}", e.why);
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("outbound_allow[1] `{bad}`: {}", e.why)),
                "{msg}"
            );
            for example in [
                "crm.internal:8443",
                "127.0.0.1:9000",
                "10.0.0.0/8:8080",
                "[::1]:8080",
            ] {
                assert!(msg.contains(example), "{msg}");
            }
        }
    }

    #[test]
    fn the_process_variable_takes_the_same_forms() {
        let a = OutboundAllow::from_env_value(
            " 127.0.0.1:9000, ,10.0.0.0/8:8080,crm.internal,[::1]:443,127.0.0.2:0,fd00::/8:80",
        );
        assert_eq!(
            a,
            OutboundAllow::parse(&[
                "127.0.0.1:9000",
                "10.0.0.0/8:8080",
                "crm.internal",
                "[::1]:443"
            ])
            .unwrap(),
            "the bad entries (port 0, an IPv6 block with a port without brackets) are skipped"
        );
        assert!(a.allows_ip("127.0.0.1".parse().unwrap(), Some(9000)));
        assert!(!a.allows_ip("127.0.0.1".parse().unwrap(), Some(9001)));
        assert!(!a.allows_ip("127.0.0.2".parse().unwrap(), Some(1)));
        assert_eq!(OutboundAllow::from_env_value(""), OutboundAllow::default());
    }

    /// A fixed table of names (the unit tests ask no DNS).
    struct Table(Vec<(&'static str, &'static str)>);

    #[async_trait]
    impl Lookup for Table {
        async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
            let ips: Vec<IpAddr> = self
                .0
                .iter()
                .filter(|(n, _)| *n == host)
                .map(|(_, ip)| ip.parse().unwrap())
                .collect();
            if ips.is_empty() {
                Err(std::io::Error::new(std::io::ErrorKind::NotFound, host))
            } else {
                Ok(ips)
            }
        }
    }

    #[tokio::test]
    async fn the_policy_checks_the_port_a_request_goes_to() {
        let p = OutboundPolicy::new(Arc::new(Table(vec![
            ("svc.test", "127.0.0.1"),
            ("crm.internal", "10.0.0.1"),
            ("localhost", "127.0.0.1"),
        ])));
        p.set_allow(
            OutboundAllow::parse(&[
                "127.0.0.1:9000",
                "[::1]:443",
                "crm.internal:8443",
                "localhost:8787",
            ])
            .unwrap(),
        );
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        // IP literals: the URL's port, or its scheme's.
        assert!(p.check_url(&url("http://127.0.0.1:9000/x"), "x").is_ok());
        let e = p
            .check_url(&url("http://127.0.0.1:9001/x"), "GET x")
            .unwrap_err();
        assert_eq!(e.code, "url_not_allowed");
        assert!(e.message.contains("127.0.0.1 is loopback"), "{}", e.message);
        assert!(e.message.contains("on port 9001"), "{}", e.message);
        assert!(
            e.message.contains("`127.0.0.1:9001` for that port only"),
            "{}",
            e.message
        );
        assert!(p.check_url(&url("http://127.0.0.1/x"), "x").is_err());
        assert!(p.check_url(&url("https://[::1]/x"), "x").is_ok());
        let e = p.check_url(&url("http://[::1]/x"), "x").unwrap_err();
        assert!(
            e.message.contains("`[::1]:80` for that port only"),
            "{}",
            e.message
        );
        assert!(p.check_ip("127.0.0.1".parse().unwrap(), None, "x").is_err());

        // Names: every address checked with the port.
        assert_eq!(
            p.resolve_checked("svc.test", Some(9000)).await.unwrap(),
            vec!["127.0.0.1".parse::<IpAddr>().unwrap()]
        );
        for port in [Some(9001), None] {
            let e = p.resolve_checked("svc.test", port).await.unwrap_err();
            let r = refused_in(e.as_ref()).expect("refused");
            assert_eq!(r.code, "url_not_allowed");
            assert!(r.message.contains("127.0.0.1 is loopback"), "{}", r.message);
        }
        let e = p.resolve_checked("svc.test", Some(9001)).await.unwrap_err();
        assert!(e.to_string().contains("on port 9001"), "{e}");
        assert!(p.resolve_checked("crm.internal", Some(8443)).await.is_ok());
        assert!(p.resolve_checked("crm.internal", Some(443)).await.is_err());
        assert!(p.resolve_checked("crm.internal", None).await.is_err());
        // A localhost name is loopback without DNS: allowed by name on its port only.
        assert!(p.resolve_checked("localhost", Some(8787)).await.is_ok());
        let e = p
            .resolve_checked("localhost", Some(8788))
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("`localhost:8788` for that port only"),
            "{e}"
        );
    }

    #[test]
    fn url_forms_parse_to_the_address_they_reach() {
        // WHATWG URL parsing (the url crate) normalises every IPv4 form, so checking the
        // parsed host covers them all.
        let p = OutboundPolicy::default();
        for u in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::1]/",
            "http://0.0.0.0/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[fd00:ec2::254]/",
        ] {
            let url = reqwest::Url::parse(u).unwrap();
            let e = p.check_url(&url, u).unwrap_err();
            assert_eq!(e.code, "url_not_allowed", "{u}");
        }
        assert!(p
            .check_url(&reqwest::Url::parse("http://93.184.216.34/").unwrap(), "x")
            .is_ok());
    }
}
