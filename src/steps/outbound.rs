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
//!    `outbound_allow` lists the host name or the address (an IP or a CIDR). The check is in
//!    the HTTP client's DNS resolver, so the connection goes to an address that was checked
//!    (no second lookup an attacker's DNS could answer differently), and IP-literal URLs are
//!    checked before sending. Connections for such calls are never pooled: every request and
//!    every redirect hop resolves and is checked again. `localhost` and `*.localhost` are
//!    loopback without asking DNS (RFC 6761 §6.3). Hosts the author wrote, or took from
//!    `env.*`, are the author's choice and are not checked: the local sandbox through
//!    `{{ env.CRM_URL }}` keeps working.
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
/// Process variable with extra `outbound_allow` entries, comma-separated (for the CLI, which
/// reads no settings file): `FLUXO_OUTBOUND_ALLOW=127.0.0.1,10.0.0.0/8,crm.internal`.
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
/// may reach even though it is not public. A host name allows whatever it resolves to; an
/// address or block allows the addresses in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundAllow {
    hosts: Vec<String>,
    nets: Vec<(IpAddr, u8)>,
}

/// An `outbound_allow` entry that is neither a host name, an IP address nor a CIDR block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("outbound_allow[{index}] `{entry}` is not a host name, an IP address or a CIDR block (e.g. crm.internal, 127.0.0.1, 10.0.0.0/8, fd00::/8)")]
pub struct BadAllowEntry {
    /// The entry's position in the list (0-based).
    pub index: usize,
    /// The entry as given.
    pub entry: String,
}

impl OutboundAllow {
    /// Parse entries: `crm.internal`, `127.0.0.1`, `::1`, `[::1]`, `10.0.0.0/8`, `fd00::/8`.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, BadAllowEntry> {
        let mut allow = OutboundAllow::default();
        for (index, e) in entries.iter().enumerate() {
            let raw = e.as_ref().trim();
            let bad = || BadAllowEntry {
                index,
                entry: raw.to_string(),
            };
            if raw.is_empty() {
                return Err(bad());
            }
            let unbracket = |s: &str| {
                s.strip_prefix('[')
                    .and_then(|x| x.strip_suffix(']'))
                    .map(String::from)
                    .unwrap_or_else(|| s.to_string())
            };
            if let Some((addr, bits)) = raw.split_once('/') {
                let ip: IpAddr = unbracket(addr).parse().map_err(|_| bad())?;
                let bits: u8 = bits.parse().map_err(|_| bad())?;
                let max = if ip.is_ipv4() { 32 } else { 128 };
                if bits > max {
                    return Err(bad());
                }
                allow.nets.push((ip, bits));
            } else if let Ok(ip) = unbracket(raw).parse::<IpAddr>() {
                allow.nets.push((ip, if ip.is_ipv4() { 32 } else { 128 }));
            } else {
                let host = normal_host(raw);
                let label_ok = |l: &str| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.bytes()
                            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
                };
                if host.is_empty() || host.len() > 253 || !host.split('.').all(label_ok) {
                    return Err(bad());
                }
                allow.hosts.push(host);
            }
        }
        Ok(allow)
    }

    /// Entries from [`ALLOW_ENV`] (empty when unset; bad entries are skipped with a warning).
    pub fn from_process_env() -> Self {
        let Ok(v) = std::env::var(ALLOW_ENV) else {
            return Self::default();
        };
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

    /// Whether the host name is listed.
    pub fn allows_host(&self, host: &str) -> bool {
        let h = normal_host(host);
        self.hosts.contains(&h)
    }

    /// Whether the address is in a listed address or block (an IPv4-mapped IPv6 address also
    /// matches IPv4 entries).
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        let mapped = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
            _ => None,
        };
        self.nets.iter().any(|&(net, bits)| {
            [Some(ip), mapped]
                .into_iter()
                .flatten()
                .any(|ip| match (ip, net) {
                    (IpAddr::V4(a), IpAddr::V4(n)) => in_v4(a, n.octets(), bits as u32),
                    (IpAddr::V6(a), IpAddr::V6(n)) => in_v6(a, n, bits as u32),
                    _ => false,
                })
        })
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

    /// Check an IP-literal host (no DNS): `Err` when it is not public and not allowed.
    pub fn check_ip(&self, ip: IpAddr, what: &str) -> Result<(), Refused> {
        match non_public(ip) {
            Some(why) if !self.allow().allows_ip(ip) => {
                Err(not_allowed(what, &ip.to_string(), why))
            }
            _ => Ok(()),
        }
    }

    /// Check the host of `url` when it is an IP literal (a name is checked when resolved).
    pub fn check_url(&self, url: &reqwest::Url, what: &str) -> Result<(), Refused> {
        match ip_host(url) {
            Some(ip) => self.check_ip(ip, what),
            None => Ok(()),
        }
    }

    /// Resolve `host` and keep the addresses a host from run data may reach (every one when
    /// the name is listed); `Err` when none is left.
    pub async fn resolve_checked(
        &self,
        host: &str,
    ) -> Result<Vec<IpAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let name = normal_host(host);
        let allow = self.allow();
        if allow.allows_host(&name) {
            return Ok(self.lookup.lookup(&name).await?);
        }
        if is_localhost_name(&name) {
            return Err(Box::new(not_allowed(
                host,
                host,
                "loopback (a localhost name, RFC 6761)",
            )));
        }
        let addrs = self.lookup.lookup(&name).await?;
        let mut refused = Vec::new();
        let kept: Vec<IpAddr> = addrs
            .into_iter()
            .filter(|&ip| match non_public(ip) {
                Some(why) if !allow.allows_ip(ip) => {
                    refused.push(format!("{ip} is {why}"));
                    false
                }
                _ => true,
            })
            .collect();
        if kept.is_empty() && !refused.is_empty() {
            return Err(Box::new(Refused {
                code: "url_not_allowed",
                message: format!(
                    "{host} resolves only to addresses a host from run data may not reach: {}. \
                     List the host or the address in settings outbound_allow to allow it",
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

fn not_allowed(what: &str, addr: &str, why: &str) -> Refused {
    let at = if what == addr {
        format!("{addr} is")
    } else {
        format!("{what}: {addr} is")
    };
    Refused {
        code: "url_not_allowed",
        message: format!(
            "{at} {why}, which a host from run data may not reach. List it in settings \
             outbound_allow to allow it"
        ),
    }
}

/// The HTTP client's resolver: checks (hosts from run data) or not (hosts the author chose).
pub(crate) struct PolicyResolver {
    pub policy: Arc<OutboundPolicy>,
    pub checked: bool,
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let checked = self.checked;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let ips = if checked {
                policy.resolve_checked(&host).await?
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
        assert!(a.allows_ip("127.0.0.1".parse().unwrap()));
        assert!(a.allows_ip("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!a.allows_ip("127.0.0.2".parse().unwrap()));
        assert!(a.allows_ip("10.200.0.1".parse().unwrap()));
        assert!(a.allows_ip("::1".parse().unwrap()));
        assert!(a.allows_ip("fd12::1".parse().unwrap()));
        assert!(a.allows_host("crm.internal"));
        assert!(!a.allows_host("other.internal"));
        for bad in ["", "10.0.0.0/33", "a b", "http://x", "x/y", "::1/200"] {
            assert!(OutboundAllow::parse(&[bad]).is_err(), "{bad}");
        }
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
