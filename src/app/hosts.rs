//! The names this server answers to (SPEC §5, "The door"): its bound address and the
//! settings' `allowed_hosts`. The HTTP adapter's door (`server::door`) reads a request's
//! `Host` and asks these rules; the settings use case replaces them when `allowed_hosts`
//! changes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::settings::{Host, HostPort};

/// Default port of `http` URIs (RFC 9110 §4.2.1): a `Host` without a port means this one.
const HTTP_DEFAULT_PORT: u16 = 80;

/// The hosts a server answers to: its bound address and the settings' `allowed_hosts`.
#[derive(Debug, Clone)]
pub struct HostRules {
    bound: SocketAddr,
    extra: Vec<HostPort>,
}

impl HostRules {
    /// The rules of a server bound to `bound`, with `allowed_hosts` from the settings (entries
    /// that do not parse are skipped: the settings are validated before they are applied).
    pub fn new(bound: SocketAddr, allowed_hosts: &[String]) -> HostRules {
        HostRules {
            bound,
            extra: allowed_hosts
                .iter()
                .filter_map(|h| HostPort::parse(h).ok())
                .collect(),
        }
    }

    /// Whether `host` (as parsed from the request) is one of this server's names.
    pub fn allows(&self, host: &HostPort) -> bool {
        let port = host.port.unwrap_or(HTTP_DEFAULT_PORT);
        if port == self.bound.port() {
            let own = match &host.host {
                Host::Name(n) => n == "localhost",
                Host::Ip(ip) => {
                    *ip == IpAddr::V4(Ipv4Addr::LOCALHOST)
                        || *ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
                        || *ip == self.bound.ip()
                        || self.bound.ip().is_unspecified()
                }
            };
            if own {
                return true;
            }
        }
        self.extra
            .iter()
            .any(|e| e.host == host.host && e.port.is_none_or(|p| p == port))
    }

    /// The names this server answers to, for a problem's `detail`.
    pub fn describe(&self) -> String {
        let p = self.bound.port();
        let mut names = vec![
            format!("localhost:{p}"),
            format!("127.0.0.1:{p}"),
            format!("[::1]:{p}"),
        ];
        if self.bound.ip().is_unspecified() {
            names.push(format!("any IP address:{p}"));
        } else if !self.bound.ip().is_loopback() {
            names.push(self.bound.to_string());
        }
        names.extend(self.extra.iter().map(|h| match h.port {
            Some(_) => h.to_string(),
            None => format!("{h}:<any port>"),
        }));
        names.join(", ")
    }
}
