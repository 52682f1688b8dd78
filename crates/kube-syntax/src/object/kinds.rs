//! The spec of the built-in kinds clusterset writes, checked as the API server's validation
//! checks them: Service, EndpointSlice (with its addresses, FQDNs and ports), Lease, Event (both
//! APIs), the keys of ConfigMap and Secret data, and Deployment.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use serde_json::Value;

use super::{items, problems_error, string_map, text};
use crate::error::FieldError;
use crate::labels::{annotations_errors, labels_errors};
use crate::names::{
    dns1123_label_problems, dns1123_subdomain_problems, iana_service_name_problems,
    qualified_name_problems,
};

/// Sorted, as `sets.List(supportedPortProtocols)` lists them in messages.
const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

fn port_number_error(field: &str, value: &Value, allow_zero: bool) -> Option<FieldError> {
    let low = if allow_zero { 0 } else { 1 };
    match value.as_i64() {
        Some(port) if (low..=65535).contains(&port) => None,
        _ => Some(FieldError::invalid_json(
            field,
            value,
            format!("must be between {low} and 65535, inclusive"),
        )),
    }
}

fn protocol_error(field: &str, port: &Value) -> Option<FieldError> {
    match text(port, "/protocol") {
        Some(protocol) if !PROTOCOLS.contains(&protocol) => {
            Some(FieldError::not_supported(field, protocol, &PROTOCOLS))
        }
        _ => None,
    }
}

pub(super) fn service_errors(service: &Value, whole: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ports = items(service, "/spec/ports");
    let kind = text(service, "/spec/type").unwrap_or("ClusterIP");
    // Sorted, as `supportedServiceType.List()` lists them.
    const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !TYPES.contains(&kind) {
        errors.push(FieldError::not_supported("spec.type", kind, &TYPES));
    }
    let headless = text(service, "/spec/clusterIP") == Some("None");
    if whole && ports.is_empty() && kind != "ExternalName" && !headless {
        errors.push(FieldError::required("spec.ports", ""));
    }
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let field = format!("spec.ports[{i}]");
        match text(port, "/name") {
            Some(name) if !name.is_empty() => {
                errors.extend(problems_error(
                    &format!("{field}.name"),
                    name,
                    dns1123_label_problems(name),
                ));
                if !names.insert(name.to_owned()) {
                    errors.push(FieldError::duplicate(&format!("{field}.name"), name));
                }
            }
            _ if ports.len() > 1 => errors.push(FieldError::required(&format!("{field}.name"), "")),
            _ => {}
        }
        match port.get("port") {
            Some(number) => {
                errors.extend(port_number_error(&format!("{field}.port"), number, false))
            }
            None => errors.push(FieldError::required(&format!("{field}.port"), "")),
        }
        errors.extend(protocol_error(&format!("{field}.protocol"), port));
        match port.get("targetPort") {
            Some(Value::String(name)) => errors.extend(problems_error(
                &format!("{field}.targetPort"),
                name,
                iana_service_name_problems(name),
            )),
            Some(number @ Value::Number(_)) => {
                errors.extend(port_number_error(
                    &format!("{field}.targetPort"),
                    number,
                    false,
                ));
            }
            _ => {}
        }
    }
    if let Some(selector) = service.pointer("/spec/selector") {
        errors.extend(labels_errors("spec.selector", &string_map(Some(selector))));
    }
    match text(service, "/spec/clusterIP") {
        None | Some("") | Some("None") => {}
        Some(ip) if ip.parse::<IpAddr>().is_ok() => {}
        Some(ip) => errors.push(FieldError::invalid(
            "spec.clusterIP",
            ip,
            "must be empty, 'None', or a valid IP address",
        )),
    }
    for (i, family) in items(service, "/spec/ipFamilies").iter().enumerate() {
        let family = family.as_str().unwrap_or("");
        if !["IPv4", "IPv6"].contains(&family) {
            errors.push(FieldError::not_supported(
                &format!("spec.ipFamilies[{i}]"),
                family,
                &["IPv4", "IPv6"],
            ));
        }
    }
    if let Some(affinity) = text(service, "/spec/sessionAffinity")
        && !["None", "ClientIP"].contains(&affinity)
    {
        errors.push(FieldError::not_supported(
            "spec.sessionAffinity",
            affinity,
            &["ClientIP", "None"],
        ));
    }
    errors
}

/// Sorted, as `supportedAddressTypes.List()` lists them.
const ADDRESS_TYPES: [&str; 3] = ["FQDN", "IPv4", "IPv6"];

/// `ValidateEndpointSlice` of Kubernetes 1.28 (`pkg/apis/discovery/validation`), without the
/// defaulting a real server does first (a port's protocol defaults to TCP, its name to "").
pub(super) fn endpoint_slice_errors(slice: &Value, whole: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let address_type = text(slice, "/addressType");
    match address_type {
        None if whole => errors.push(FieldError::required("addressType", "")),
        None => {}
        Some(kind) if !ADDRESS_TYPES.contains(&kind) => {
            errors.push(FieldError::not_supported(
                "addressType",
                kind,
                &ADDRESS_TYPES,
            ));
        }
        Some(_) => {}
    }
    errors.extend(endpoints_errors(slice, address_type));
    errors.extend(endpoint_ports_errors(slice));
    errors
}

/// `validateEndpoints`: more than 1000 endpoints is the only error then.
fn endpoints_errors(slice: &Value, address_type: Option<&str>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let endpoints = items(slice, "/endpoints");
    if endpoints.len() > 1000 {
        errors.push(FieldError::too_many("endpoints", endpoints.len(), 1000));
        return errors;
    }
    for (i, endpoint) in endpoints.iter().enumerate() {
        let field = format!("endpoints[{i}]");
        let addresses = items(endpoint, "/addresses");
        if addresses.is_empty() {
            errors.push(FieldError::required(
                &format!("{field}.addresses"),
                "must contain at least 1 address",
            ));
        } else if addresses.len() > 100 {
            errors.push(FieldError::too_many(
                &format!("{field}.addresses"),
                addresses.len(),
                100,
            ));
        }
        for (j, address) in addresses.iter().enumerate() {
            let address = address.as_str().unwrap_or("");
            let path = format!("{field}.addresses[{j}]");
            match address_type {
                Some("IPv4") => {
                    if parse_ip_sloppy(address).and_then(to4).is_none() {
                        errors.push(FieldError::invalid(
                            &path,
                            address,
                            "must be a valid IPv4 address",
                        ));
                    }
                    errors.extend(problems_error(
                        &path,
                        address,
                        non_special_ip_problems(address),
                    ));
                }
                Some("IPv6") => {
                    if parse_ip_sloppy(address).is_none_or(|ip| to4(ip).is_some()) {
                        errors.push(FieldError::invalid(
                            &path,
                            address,
                            "must be a valid IPv6 address",
                        ));
                    }
                    errors.extend(problems_error(
                        &path,
                        address,
                        non_special_ip_problems(address),
                    ));
                }
                Some("FQDN") => errors.extend(fqdn_errors(&path, address)),
                _ => {}
            }
        }
        if let Some(node) = text(endpoint, "/nodeName") {
            errors.extend(problems_error(
                &format!("{field}.nodeName"),
                node,
                dns1123_subdomain_problems(node),
            ));
        }
        if let Some(hostname) = text(endpoint, "/hostname") {
            errors.extend(problems_error(
                &format!("{field}.hostname"),
                hostname,
                dns1123_label_problems(hostname),
            ));
        }
    }
    errors
}

/// `validatePorts`: more than 20000 ports is the only error then; port numbers are not
/// checked.
fn endpoint_ports_errors(slice: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ports = items(slice, "/ports");
    if ports.len() > 20000 {
        errors.push(FieldError::too_many("ports", ports.len(), 20000));
        return errors;
    }
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let field = format!("ports[{i}]");
        let name = text(port, "/name").unwrap_or("");
        if !name.is_empty() {
            errors.extend(problems_error(
                &format!("{field}.name"),
                name,
                dns1123_label_problems(name),
            ));
        }
        if !names.insert(name.to_owned()) {
            errors.push(FieldError::duplicate(&format!("{field}.name"), name));
        }
        errors.extend(protocol_error(&format!("{field}.protocol"), port));
        if let Some(app) = text(port, "/appProtocol") {
            errors.extend(problems_error(
                &format!("{field}.appProtocol"),
                app,
                qualified_name_problems(app),
            ));
        }
    }
    errors
}

/// `validation.IsFullyQualifiedDomainName`: a subdomain (a trailing dot aside) of at least two
/// labels; the first problem only.
fn fqdn_errors(field: &str, address: &str) -> Vec<FieldError> {
    if address.is_empty() {
        return vec![FieldError::required(field, "")];
    }
    let name = address.strip_suffix('.').unwrap_or(address);
    let problems = dns1123_subdomain_problems(name);
    if !problems.is_empty() {
        return vec![FieldError::invalid(field, name, problems.join(","))];
    }
    if name.split('.').count() < 2 {
        return vec![FieldError::invalid(
            field,
            name,
            "should be a domain with at least two segments separated by dots",
        )];
    }
    name.split('.')
        .find_map(|label| {
            let problems = dns1123_label_problems(label);
            (!problems.is_empty()).then(|| FieldError::invalid(field, label, problems.join(",")))
        })
        .into_iter()
        .collect()
}

/// `netutils.ParseIPSloppy`: an IP address, IPv4 octets with leading zeros read as decimal.
pub fn parse_ip_sloppy(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    let octets: Vec<u8> = text
        .split('.')
        .map(|part| {
            (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse::<u8>().ok())
                .flatten()
        })
        .collect::<Option<_>>()?;
    <[u8; 4]>::try_from(octets)
        .ok()
        .map(|o| IpAddr::V4(Ipv4Addr::from(o)))
}

/// Go's `ip.To4()`: the IPv4 address of an IPv4 or IPv4-mapped IPv6 address.
fn to4(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    }
}

/// `ValidateNonSpecialIP` of Kubernetes 1.28 (`pkg/apis/core/validation`), which checks the
/// addresses of EndpointSlices and Endpoints: unspecified, loopback, link-local or link-local
/// multicast addresses never reach a pod. Go's `net.IP` methods read an IPv4-mapped IPv6
/// address as IPv4.
pub fn non_special_ip_problems(address: &str) -> Vec<String> {
    let Some(ip) = parse_ip_sloppy(address) else {
        return vec!["must be a valid IP address".to_owned()];
    };
    let (unspecified, loopback, link_local, link_local_multicast) = match to4(ip) {
        Some(v4) => (
            v4.is_unspecified(),
            v4.octets()[0] == 127,
            v4.octets()[..2] == [169, 254],
            v4.octets()[..3] == [224, 0, 0],
        ),
        None => match ip {
            IpAddr::V6(v6) => (
                v6.is_unspecified(),
                v6.is_loopback(),
                v6.segments()[0] & 0xffc0 == 0xfe80,
                v6.segments()[0] & 0xff0f == 0xff02,
            ),
            IpAddr::V4(_) => (false, false, false, false),
        },
    };
    let mut problems = Vec::new();
    if unspecified {
        problems.push(format!("may not be unspecified ({address})"));
    }
    if loopback {
        problems.push("may not be in the loopback range (127.0.0.0/8, ::1/128)".to_owned());
    }
    if link_local {
        problems.push("may not be in the link-local range (169.254.0.0/16, fe80::/10)".to_owned());
    }
    if link_local_multicast {
        problems.push(
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)".to_owned(),
        );
    }
    problems
}

pub(super) fn lease_errors(lease: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(duration) = lease.pointer("/spec/leaseDurationSeconds")
        && duration.as_i64().is_none_or(|d| d <= 0)
    {
        errors.push(FieldError::invalid_json(
            "spec.leaseDurationSeconds",
            duration,
            "must be greater than 0",
        ));
    }
    if let Some(transitions) = lease.pointer("/spec/leaseTransitions")
        && transitions.as_i64().is_none_or(|t| t < 0)
    {
        errors.push(FieldError::invalid_json(
            "spec.leaseTransitions",
            transitions,
            "must be greater than or equal to 0",
        ));
    }
    errors
}

/// Where an Event's fields are in each API version: `events.k8s.io/v1` calls the core Event's
/// `involvedObject` `regarding`, its `message` `note`, and its `reportingComponent`
/// `reportingController` (`pkg/apis/events/v1/conversion.go`). Errors name the core fields,
/// as `ValidateEventCreate` checks the core Event either version is converted to.
struct EventShape {
    involved: &'static str,
    message: &'static str,
    controller: &'static str,
    /// The name `reportingController` errors carry (`reportingComponent` when created through
    /// the core API).
    controller_field: &'static str,
}

const EVENTS_V1: EventShape = EventShape {
    involved: "regarding",
    message: "note",
    controller: "reportingController",
    controller_field: "reportingController",
};

const CORE_V1: EventShape = EventShape {
    involved: "involvedObject",
    message: "message",
    controller: "reportingComponent",
    controller_field: "reportingComponent",
};

/// `legacyValidateEvent` (`pkg/apis/core/validation/events.go`), which every Event passes
/// whichever API version creates it. An Event without `eventTime` is an old one: the involved
/// object's namespace must be the Event's (or empty, for Events in `default` or no namespace).
/// With `eventTime` set, an involved object in another namespace is accepted, an empty
/// namespace only in `default` and `kube-system`, and the reporting fields are required.
/// A patch (`whole` false) is checked on what it sends.
fn legacy_event_errors(event: &Value, shape: &EventShape, whole: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let namespace = text(event, "/metadata/namespace").unwrap_or("");
    let involved_pointer = format!("/{}/namespace", shape.involved);
    let involved = text(event, &involved_pointer).unwrap_or("");
    let event_time_set = text(event, "/eventTime").is_some_and(|t| !t.is_empty());
    let mismatch = |value: &str| {
        FieldError::invalid(
            "involvedObject.namespace",
            value,
            "does not match event.namespace",
        )
    };
    let namespace_checked = whole || event.pointer(&involved_pointer).is_some();
    let present = |key: &str| whole || event.get(key).is_some();
    let length = |key: &str| text(event, &format!("/{key}")).map_or(0, str::len);
    if !event_time_set {
        if namespace_checked {
            if involved.is_empty() {
                if !namespace.is_empty() && namespace != "default" {
                    errors.push(mismatch(involved));
                }
            } else if namespace != involved {
                errors.push(mismatch(involved));
            }
        }
    } else {
        if namespace_checked
            && involved.is_empty()
            && namespace != "default"
            && namespace != "kube-system"
        {
            errors.push(mismatch(involved));
        }
        let controller = text(event, &format!("/{}", shape.controller)).unwrap_or("");
        if present(shape.controller) {
            if controller.is_empty() {
                errors.push(FieldError::required(shape.controller_field, ""));
            }
            errors.extend(problems_error(
                shape.controller_field,
                controller,
                qualified_name_problems(controller),
            ));
        }
        for (key, field, limit) in [
            ("reportingInstance", "reportingInstance", 128),
            ("action", "action", 128),
            ("reason", "reason", 128),
        ] {
            if !present(key) {
                continue;
            }
            if length(key) == 0 {
                errors.push(FieldError::required(field, ""));
            }
            if length(key) > limit {
                errors.push(FieldError::invalid(
                    field,
                    "",
                    format!("can have at most {limit} characters"),
                ));
            }
        }
        if length(shape.message) > 1024 {
            errors.push(FieldError::invalid(
                "message",
                "",
                "can have at most 1024 characters",
            ));
        }
    }
    if whole || event.pointer("/metadata/namespace").is_some() {
        errors.extend(problems_error(
            "namespace",
            namespace,
            dns1123_subdomain_problems(namespace),
        ));
    }
    errors
}

/// `ValidateEventCreate` for an Event created through `events.k8s.io/v1`: the legacy rules,
/// then the strict ones (a series of at least 2 with its last time, `eventTime` required, type
/// `Normal` or `Warning`, the deprecated fields unset). The object's metadata is checked by the
/// caller. Updates are checked as creates (the immutable fields are not compared).
pub(super) fn event_errors(event: &Value, whole: bool) -> Vec<FieldError> {
    let mut errors = legacy_event_errors(event, &EVENTS_V1, whole);
    if let Some(series) = event.get("series").filter(|s| !s.is_null()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            errors.push(FieldError::invalid(
                "series.count",
                "",
                "should be at least 2",
            ));
        }
        if text(series, "/lastObservedTime").is_none_or(str::is_empty) {
            errors.push(FieldError::required("series.lastObservedTime", ""));
        }
    }
    if whole && text(event, "/eventTime").is_none_or(str::is_empty) {
        errors.push(FieldError::required("eventTime", ""));
    }
    if whole || event.get("type").is_some() {
        let kind = text(event, "/type").unwrap_or("");
        if kind != "Normal" && kind != "Warning" {
            errors.push(FieldError::invalid(
                "type",
                "",
                format!("has invalid value: {kind}"),
            ));
        }
    }
    let set = |key: &str| text(event, &format!("/{key}")).is_some_and(|t| !t.is_empty());
    if set("deprecatedFirstTimestamp") {
        errors.push(FieldError::invalid(
            "firstTimestamp",
            "",
            "needs to be unset",
        ));
    }
    if set("deprecatedLastTimestamp") {
        errors.push(FieldError::invalid(
            "lastTimestamp",
            "",
            "needs to be unset",
        ));
    }
    if event
        .get("deprecatedCount")
        .and_then(Value::as_i64)
        .is_some_and(|c| c != 0)
    {
        errors.push(FieldError::invalid("count", "", "needs to be unset"));
    }
    if set("deprecatedSource/component") || set("deprecatedSource/host") {
        errors.push(FieldError::invalid("source", "", "needs to be unset"));
    }
    errors
}

/// `ValidateEventCreate` for an Event created through the core API: the legacy rules only.
pub(super) fn core_event_errors(event: &Value, whole: bool) -> Vec<FieldError> {
    legacy_event_errors(event, &CORE_V1, whole)
}

/// `IsConfigMapKey`: at most 253 of `[-._a-zA-Z0-9]`, and not `.`, `..` or `..*`.
fn config_key_problems(key: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if key.len() > 253 {
        problems.push(crate::names::max_len_msg(253));
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        problems.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_owned());
    }
    if key == "." {
        problems.push("must not be '.'".to_owned());
    } else if key == ".." {
        problems.push("must not be '..'".to_owned());
    } else if key.starts_with("..") {
        problems.push("must not start with '..'".to_owned());
    }
    problems
}

pub(super) fn data_key_errors(object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for section in ["data", "binaryData", "stringData"] {
        for key in object
            .get(section)
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.keys())
        {
            errors.extend(problems_error(
                &format!("{section}[{key}]"),
                key,
                config_key_problems(key),
            ));
        }
    }
    errors
}

pub(super) fn deployment_errors(deployment: &Value, whole: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let selector = string_map(deployment.pointer("/spec/selector/matchLabels"));
    errors.extend(labels_errors("spec.selector.matchLabels", &selector));
    let template = string_map(deployment.pointer("/spec/template/metadata/labels"));
    errors.extend(labels_errors("spec.template.metadata.labels", &template));
    // The pod template's metadata is checked as an object's (`ValidatePodTemplateSpec`).
    errors.extend(annotations_errors(
        "spec.template.metadata.annotations",
        &string_map(deployment.pointer("/spec/template/metadata/annotations")),
    ));
    if whole {
        let expressions = items(deployment, "/spec/selector/matchExpressions");
        if deployment.pointer("/spec/selector").is_none() {
            errors.push(FieldError::required("spec.selector", ""));
        } else if selector.is_empty() && expressions.is_empty() {
            errors.push(FieldError::invalid_json(
                "spec.selector",
                deployment.pointer("/spec/selector").unwrap_or(&Value::Null),
                "empty selector is invalid for deployment",
            ));
        } else if !selector.iter().all(|(k, v)| template.get(k) == Some(v)) {
            errors.push(FieldError::invalid_json(
                "spec.template.metadata.labels",
                &serde_json::json!(template),
                "`selector` does not match template `labels`",
            ));
        }
    }
    if whole && items(deployment, "/spec/template/spec/containers").is_empty() {
        errors.push(FieldError::required("spec.template.spec.containers", ""));
    }
    for (i, container) in items(deployment, "/spec/template/spec/containers")
        .iter()
        .enumerate()
    {
        let field = format!("spec.template.spec.containers[{i}]");
        match text(container, "/name") {
            Some(name) => errors.extend(problems_error(
                &format!("{field}.name"),
                name,
                dns1123_label_problems(name),
            )),
            None if whole => errors.push(FieldError::required(&format!("{field}.name"), "")),
            None => {}
        }
    }
    errors
}

/// `ValidatePodDisruptionBudgetSpec`: `minAvailable` and `maxUnavailable` not both set, each a
/// non-negative integer or a percentage of at most 100%, and a valid label selector.
pub(super) fn pod_disruption_budget_errors(budget: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let min = budget.pointer("/spec/minAvailable");
    let max = budget.pointer("/spec/maxUnavailable");
    if min.is_some() && max.is_some() {
        errors.push(FieldError::invalid_json(
            "spec",
            budget.pointer("/spec").unwrap_or(&Value::Null),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for (field, value) in [("spec.minAvailable", min), ("spec.maxUnavailable", max)] {
        match value {
            Some(Value::String(text)) => {
                let percent = text
                    .strip_suffix('%')
                    .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                match percent {
                    None => errors.push(FieldError::invalid(
                        field,
                        text,
                        "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                    )),
                    Some(n) if n.parse::<u64>().map_or(true, |n| n > 100) => {
                        errors.push(FieldError::invalid(field, text, "must not be greater than 100%"));
                    }
                    Some(_) => {}
                }
            }
            Some(number @ Value::Number(_)) if number.as_i64().is_none_or(|n| n < 0) => {
                errors.push(FieldError::invalid_json(
                    field,
                    number,
                    "must be greater than or equal to 0",
                ));
            }
            Some(Value::Number(_)) => {}
            Some(other) => errors.push(FieldError::invalid_json(
                field,
                other,
                "must be an integer or a percentage",
            )),
            None => {}
        }
    }
    let selector = string_map(budget.pointer("/spec/selector/matchLabels"));
    errors.extend(labels_errors("spec.selector.matchLabels", &selector));
    errors
}
