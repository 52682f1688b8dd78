//! Whole objects checked as the API server checks them on create, update and patch: metadata
//! of every kind, the spec of the built-in kinds clusterset writes, and custom resources
//! against their CRD's schema.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![recursion_limit = "256"]

use kube_syntax::object::{Catalog, Completeness, metadata_errors, split_api_version};
use kube_syntax::{ErrorKind, FieldError};
use serde_json::{Value, json};

fn errors(object: &Value) -> Vec<FieldError> {
    Catalog::builtin().object_errors(object, Completeness::Whole)
}

fn shown(object: &Value) -> Vec<String> {
    errors(object).iter().map(ToString::to_string).collect()
}

fn fields(object: &Value) -> Vec<String> {
    errors(object).into_iter().map(|e| e.field).collect()
}

fn with(mut object: Value, pointer: &str, value: Value) -> Value {
    match object.pointer_mut(pointer) {
        Some(slot) => *slot = value,
        None => {
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            object.pointer_mut(parent).unwrap()[key] = value;
        }
    }
    object
}

fn service() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"}},
        "spec": {
            "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        },
    })
}

#[test]
fn split_api_versions() {
    assert_eq!(split_api_version("v1"), ("", "v1"));
    assert_eq!(split_api_version("apps/v1"), ("apps", "v1"));
    assert_eq!(
        split_api_version("discovery.k8s.io/v1"),
        ("discovery.k8s.io", "v1")
    );
}

#[test]
fn catalog_knows_the_builtin_types() {
    let catalog = Catalog::builtin();
    let service = catalog.by_plural("", "services").unwrap();
    assert_eq!(service.kind, "Service");
    assert!(service.namespaced);
    assert!(!catalog.by_kind("", "Namespace").unwrap().namespaced);
    assert_eq!(
        catalog
            .by_kind("discovery.k8s.io", "EndpointSlice")
            .unwrap()
            .plural,
        "endpointslices"
    );
    assert!(catalog.by_plural("events.k8s.io", "events").is_some());
    assert!(catalog.by_plural("", "events").is_some());
    assert!(catalog.by_plural("example.com", "widgets").is_none());
}

#[test]
fn a_good_service_passes() {
    assert_eq!(shown(&service()), Vec::<String>::new());
    // Headless and ExternalName services need no ports.
    let mut headless = service();
    headless["spec"] = json!({"clusterIP": "None", "selector": {"app": "web"}});
    assert!(errors(&headless).is_empty());
    let external = with(
        service(),
        "/spec",
        json!({"type": "ExternalName", "externalName": "example.com"}),
    );
    assert!(errors(&external).is_empty());
    // A named target port, two named ports, an IPv6 cluster IP.
    let mut two = service();
    two["spec"]["ports"] = json!([
        {"name": "http", "port": 80, "targetPort": "http-web"},
        {"name": "metrics", "port": 9090, "protocol": "UDP"},
    ]);
    two["spec"]["clusterIP"] = json!("fd00::10");
    two["spec"]["ipFamilies"] = json!(["IPv6"]);
    assert!(errors(&two).is_empty(), "{:#?}", errors(&two));
}

#[test]
fn bad_services_are_refused() {
    // A name with a dot: Services are DNS-1123 labels (Kubernetes 1.37; a name starting with a
    // digit is one, which 1.35 still refuses).
    assert!(shown(&with(service(), "/metadata/name", json!("0web"))).is_empty());
    let bad_name = with(service(), "/metadata/name", json!("web.v2"));
    assert_eq!(
        shown(&bad_name),
        ["metadata.name: Invalid value: \"web.v2\": must not contain dots"]
    );
    // Two ports without names.
    let unnamed = with(
        service(),
        "/spec/ports",
        json!([{"port": 80}, {"port": 443}]),
    );
    assert_eq!(
        shown(&unnamed),
        [
            "spec.ports[0].name: Required value",
            "spec.ports[1].name: Required value"
        ]
    );
    // One port may go without a name.
    assert!(errors(&with(service(), "/spec/ports", json!([{"port": 80}]))).is_empty());
    // Port 0 and 65536.
    for port in [0, 65536, -1] {
        let object = with(service(), "/spec/ports/0/port", json!(port));
        assert_eq!(
            shown(&object),
            [format!(
                "spec.ports[0].port: Invalid value: {port}: must be between 1 and 65535, inclusive"
            )]
        );
    }
    assert!(errors(&with(service(), "/spec/ports/0/port", json!(65535))).is_empty());
    assert!(errors(&with(service(), "/spec/ports/0/port", json!(1))).is_empty());
    // A bad protocol.
    assert_eq!(
        shown(&with(service(), "/spec/ports/0/protocol", json!("HTTP"))),
        [
            "spec.ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
        ]
    );
    // A bad selector label value.
    let bad_selector = with(
        service(),
        "/spec/selector",
        json!({"endpointslice.kubernetes.io/managed-by": "clusterset.io/mcs-controller"}),
    );
    let found = errors(&bad_selector);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].field, "spec.selector");
    assert_eq!(
        found[0].kind,
        ErrorKind::Invalid("\"clusterset.io/mcs-controller\"".to_owned())
    );
    // Missing ports, duplicate port names, bad port names and target ports, bad type.
    let mut no_ports = service();
    no_ports["spec"].as_object_mut().unwrap().remove("ports");
    assert_eq!(shown(&no_ports), ["spec.ports: Required value"]);
    let duplicate = with(
        service(),
        "/spec/ports",
        json!([{"name": "http", "port": 80}, {"name": "http", "port": 81}]),
    );
    assert_eq!(
        shown(&duplicate),
        ["spec.ports[1].name: Duplicate value: \"http\""]
    );
    assert_eq!(
        fields(&with(service(), "/spec/ports/0/name", json!("HTTP"))),
        ["spec.ports[0].name"]
    );
    assert_eq!(
        shown(&with(
            service(),
            "/spec/ports/0/targetPort",
            json!("web--port")
        )),
        [
            "spec.ports[0].targetPort: Invalid value: \"web--port\": must not contain consecutive hyphens"
        ]
    );
    assert_eq!(
        fields(&with(service(), "/spec/ports/0/targetPort", json!(0))),
        ["spec.ports[0].targetPort"]
    );
    assert_eq!(
        shown(&with(service(), "/spec/type", json!("Internal"))),
        [
            "spec.type: Unsupported value: \"Internal\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
        ]
    );
    assert_eq!(
        fields(&with(service(), "/spec/clusterIP", json!("10.0.0.300"))),
        ["spec.clusterIP"]
    );
    assert_eq!(
        fields(&with(service(), "/spec/sessionAffinity", json!("Sticky"))),
        ["spec.sessionAffinity"]
    );
}

fn slice() -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-east", "namespace": "demo", "labels": {
            "kubernetes.io/service-name": "web",
            "endpointslice.kubernetes.io/managed-by": "mcs-controller.clusterset.io"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.1.2.3"], "hostname": "web-0", "nodeName": "node-1.east"}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "kubernetes.io/h2c"}],
    })
}

#[test]
fn endpoint_slices() {
    assert_eq!(shown(&slice()), Vec::<String>::new());
    // An empty slice is fine.
    assert!(errors(&with(slice(), "/endpoints", json!([]))).is_empty());

    // A bad address for IPv4, an IPv6 one for IPv4, a good IPv6 slice.
    assert_eq!(
        shown(&with(slice(), "/endpoints/0/addresses", json!(["10.1.2"]))),
        // IsValidIPv4Address, then ValidateNonSpecialIP, each with its message.
        [
            "endpoints[0].addresses[0]: Invalid value: \"10.1.2\": must be a valid IPv4 address",
            "endpoints[0].addresses[0]: Invalid value: \"10.1.2\": must be a valid IP address",
        ]
    );
    // ParseIPSloppy reads leading zeros; To4 reads an IPv4-mapped IPv6 address as IPv4.
    assert!(
        errors(&with(
            slice(),
            "/endpoints/0/addresses",
            json!(["010.1.2.3"])
        ))
        .is_empty()
    );
    assert!(
        errors(&with(
            slice(),
            "/endpoints/0/addresses",
            json!(["::ffff:10.1.2.3"])
        ))
        .is_empty()
    );
    // Addresses that never reach a pod, the unspecified one named.
    assert_eq!(
        shown(&with(
            slice(),
            "/endpoints/0/addresses",
            json!(["0.0.0.0", "127.0.0.1", "169.254.1.1", "224.0.0.1"])
        )),
        [
            "endpoints[0].addresses[0]: Invalid value: \"0.0.0.0\": may not be unspecified (0.0.0.0)",
            "endpoints[0].addresses[1]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
            "endpoints[0].addresses[2]: Invalid value: \"169.254.1.1\": may not be in the link-local range (169.254.0.0/16, fe80::/10)",
            "endpoints[0].addresses[3]: Invalid value: \"224.0.0.1\": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ]
    );
    let v6_special = with(
        with(slice(), "/addressType", json!("IPv6")),
        "/endpoints/0/addresses",
        json!(["::", "::1", "fe80::1", "ff02::1", "10.1.2.3"]),
    );
    assert_eq!(
        shown(&v6_special),
        [
            "endpoints[0].addresses[0]: Invalid value: \"::\": may not be unspecified (::)",
            "endpoints[0].addresses[1]: Invalid value: \"::1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
            "endpoints[0].addresses[2]: Invalid value: \"fe80::1\": may not be in the link-local range (169.254.0.0/16, fe80::/10)",
            "endpoints[0].addresses[3]: Invalid value: \"ff02::1\": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
            "endpoints[0].addresses[4]: Invalid value: \"10.1.2.3\": must be a valid IPv6 address",
        ]
    );
    // FQDN addresses (IsFullyQualifiedDomainName): a trailing dot is fine, one label is not.
    let fqdn = |address: &str| {
        shown(&with(
            with(slice(), "/addressType", json!("FQDN")),
            "/endpoints/0/addresses",
            json!([address]),
        ))
    };
    assert_eq!(fqdn("web.example.com."), Vec::<String>::new());
    assert_eq!(
        fqdn("web"),
        [
            "endpoints[0].addresses[0]: Invalid value: \"web\": should be a domain with at least two segments separated by dots"
        ]
    );
    assert_eq!(fqdn(""), ["endpoints[0].addresses[0]: Required value"]);
    assert_eq!(
        fields(&with(slice(), "/endpoints/0/addresses", json!(["fd00::1"]))),
        ["endpoints[0].addresses[0]"]
    );
    let v6 = with(
        with(slice(), "/addressType", json!("IPv6")),
        "/endpoints/0/addresses",
        json!(["fd00::1"]),
    );
    assert!(errors(&v6).is_empty());
    assert_eq!(
        shown(&with(slice(), "/addressType", json!("IP"))),
        ["addressType: Unsupported value: \"IP\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""]
    );

    // More than 1000 endpoints.
    let endpoint = json!({"addresses": ["10.0.0.1"]});
    let many = with(
        slice(),
        "/endpoints",
        Value::Array(vec![endpoint.clone(); 1001]),
    );
    assert_eq!(
        shown(&many),
        ["endpoints: Too many: 1001: must have at most 1000 items"]
    );
    assert!(
        errors(&with(
            slice(),
            "/endpoints",
            Value::Array(vec![endpoint; 1000])
        ))
        .is_empty()
    );

    // The managed-by value a real server refused.
    let managed = with(
        slice(),
        "/metadata/labels/endpointslice.kubernetes.io~1managed-by",
        json!("clusterset.io/mcs-controller"),
    );
    let found = errors(&managed);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].field, "metadata.labels");
    assert!(
        found[0]
            .to_string()
            .starts_with("metadata.labels: Invalid value: \"clusterset.io/mcs-controller\": a valid label must be an empty string")
    );

    // No addresses, a bad hostname, repeated port names.
    assert_eq!(
        shown(&with(slice(), "/endpoints/0/addresses", json!([]))),
        ["endpoints[0].addresses: Required value: must contain at least 1 address"]
    );
    assert_eq!(
        fields(&with(slice(), "/endpoints/0/hostname", json!("web.0"))),
        ["endpoints[0].hostname"]
    );
    let ports = with(
        slice(),
        "/ports",
        json!([{"name": "http", "port": 80}, {"name": "http", "port": 81}]),
    );
    assert_eq!(shown(&ports), ["ports[1].name: Duplicate value: \"http\""]);
    // validatePorts of 1.28 checks no port number.
    assert!(errors(&with(slice(), "/ports/0/port", json!(70000))).is_empty());
    // A patch need not send the address type.
    let mut patch = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"labels": {"a": "b"}}});
    assert!(
        Catalog::builtin()
            .object_errors(&patch, Completeness::Patch)
            .is_empty()
    );
    patch["metadata"]["name"] = json!("web-east");
    assert_eq!(
        Catalog::builtin().object_errors(&patch, Completeness::Whole)[0].to_string(),
        "addressType: Required value"
    );
}

#[test]
fn leases() {
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "clusterset-agent", "namespace": "demo"},
        "spec": {"holderIdentity": "agent-0", "leaseDurationSeconds": 15, "leaseTransitions": 0},
    });
    assert!(errors(&lease).is_empty());
    assert_eq!(
        shown(&with(lease.clone(), "/spec/leaseDurationSeconds", json!(0))),
        ["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]
    );
    assert_eq!(
        fields(&with(
            lease.clone(),
            "/spec/leaseDurationSeconds",
            json!(-5)
        )),
        ["spec.leaseDurationSeconds"]
    );
    assert_eq!(
        shown(&with(lease, "/spec/leaseTransitions", json!(-1))),
        ["spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"]
    );
}

fn event() -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "web.17a", "namespace": "demo"},
        "eventTime": "2024-05-01T10:00:00.000000Z",
        "reportingController": "clusterset.io/agent",
        "reportingInstance": "agent-0",
        "action": "Export",
        "reason": "Exported",
        "type": "Normal",
        "note": "exported",
        "regarding": {"kind": "Service", "namespace": "demo", "name": "web"},
    })
}

#[test]
fn events_of_events_k8s_io() {
    // `ValidateEventCreate` for events.k8s.io/v1 (pkg/apis/core/validation/events.go, 1.28):
    // the legacy rules of an Event with `eventTime`, then the strict ones; errors name the
    // core Event's fields (`involvedObject`, `message`).
    assert_eq!(shown(&event()), Vec::<String>::new());
    let mut bare = event();
    for key in [
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
    ] {
        bare.as_object_mut().unwrap().remove(key);
    }
    assert_eq!(
        shown(&bare),
        [
            "reportingController: Required value",
            "reportingController: Invalid value: \"\": name part must be non-empty",
            "reportingController: Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "reportingInstance: Required value",
            "action: Required value",
            "reason: Required value",
        ]
    );
    // With `eventTime` set, the regarding object may be in another namespace.
    assert!(errors(&with(event(), "/regarding/namespace", json!("other"))).is_empty());
    // A cluster-scoped regarding object (no namespace) is fine in default and kube-system.
    for namespace in ["default", "kube-system"] {
        assert!(
            errors(&with(
                with(event(), "/regarding/namespace", json!("")),
                "/metadata/namespace",
                json!(namespace)
            ))
            .is_empty()
        );
    }
    assert_eq!(
        shown(&with(event(), "/regarding/namespace", json!(""))),
        ["involvedObject.namespace: Invalid value: \"\": does not match event.namespace"]
    );
    // Without `eventTime`, the legacy branch: the namespaces must agree (empty only in
    // default), and eventTime is required.
    let mut old = event();
    old.as_object_mut().unwrap().remove("eventTime");
    assert_eq!(shown(&old), ["eventTime: Required value"]);
    assert_eq!(
        shown(&with(old.clone(), "/regarding/namespace", json!("other"))),
        [
            "involvedObject.namespace: Invalid value: \"other\": does not match event.namespace",
            "eventTime: Required value",
        ]
    );
    // Type, lengths, the controller's name.
    assert_eq!(
        shown(&with(event(), "/type", json!("Info"))),
        ["type: Invalid value: \"\": has invalid value: Info"]
    );
    assert_eq!(
        shown(&with(event(), "/action", json!("a".repeat(129)))),
        ["action: Invalid value: \"\": can have at most 128 characters"]
    );
    assert!(errors(&with(event(), "/action", json!("a".repeat(128)))).is_empty());
    assert_eq!(
        shown(&with(event(), "/note", json!("n".repeat(1025)))),
        ["message: Invalid value: \"\": can have at most 1024 characters"]
    );
    assert_eq!(
        fields(&with(event(), "/reportingController", json!("a/b/c"))),
        ["reportingController"]
    );
    // The series and the deprecated fields.
    assert_eq!(
        shown(&with(event(), "/series", json!({"count": 1}))),
        [
            "series.count: Invalid value: \"\": should be at least 2",
            "series.lastObservedTime: Required value",
        ]
    );
    assert!(
        errors(&with(
            event(),
            "/series",
            json!({"count": 2, "lastObservedTime": "2024-05-01T10:00:01.000000Z"})
        ))
        .is_empty()
    );
    assert_eq!(
        shown(&with(
            with(event(), "/deprecatedCount", json!(3)),
            "/deprecatedSource",
            json!({"component": "agent"})
        )),
        [
            "count: Invalid value: \"\": needs to be unset",
            "source: Invalid value: \"\": needs to be unset",
        ]
    );
    // A patch is checked on what it sends.
    let patch = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "web.17a", "namespace": "demo"},
        "series": {"count": 2, "lastObservedTime": "2024-05-01T10:00:01.000000Z"},
    });
    assert!(
        Catalog::builtin()
            .object_errors(&patch, Completeness::Patch)
            .is_empty()
    );
}

#[test]
fn core_events_and_config_maps() {
    let core = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "web.17a", "namespace": "demo"},
        "involvedObject": {"kind": "Service", "namespace": "demo", "name": "web"},
        "reason": "Exported",
    });
    assert!(errors(&core).is_empty());
    assert_eq!(
        fields(&with(
            core.clone(),
            "/involvedObject/namespace",
            json!("other")
        )),
        ["involvedObject.namespace"]
    );
    // A core Event with eventTime gets the same rules, its controller named
    // `reportingComponent`; nothing strict (the deprecated fields are fine there).
    let new = with(
        with(core, "/eventTime", json!("2024-05-01T10:00:00.000000Z")),
        "/count",
        json!(3),
    );
    assert_eq!(
        shown(&new),
        [
            "reportingComponent: Required value",
            "reportingComponent: Invalid value: \"\": name part must be non-empty",
            "reportingComponent: Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "reportingInstance: Required value",
            "action: Required value",
        ]
    );

    let config = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "demo"},
        "data": {"key.name": "v", "KEY_NAME": "v", "key-name": "v", ".hidden": "v"},
        "binaryData": {"blob": "AAAA"},
    });
    assert!(errors(&config).is_empty());
    let bad = with(config.clone(), "/data", json!({"bad key": "v"}));
    assert_eq!(
        shown(&bad),
        [
            "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
        ]
    );
    assert_eq!(
        shown(&with(config.clone(), "/data", json!({"..": "v"}))),
        ["data[..]: Invalid value: \"..\": must not be '..'"]
    );
    assert_eq!(
        shown(&with(config.clone(), "/data", json!({"..x": "v"}))),
        ["data[..x]: Invalid value: \"..x\": must not start with '..'"]
    );
    assert_eq!(
        shown(&with(config.clone(), "/binaryData", json!({".": "AA=="}))),
        ["binaryData[.]: Invalid value: \".\": must not be '.'"]
    );
    let long_key = "k".repeat(254);
    assert_eq!(
        shown(&with(
            config.clone(),
            "/data",
            json!({long_key.clone(): "v"})
        )),
        [format!(
            "data[{long_key}]: Invalid value: \"{long_key}\": must be no more than 253 characters"
        )]
    );
    // Secrets follow the same rule, stringData too.
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": "demo"}, "stringData": {"a/b": "v"}});
    assert_eq!(
        errors(&secret)
            .into_iter()
            .map(|e| e.field)
            .collect::<Vec<_>>(),
        ["stringData[a/b]"]
    );
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "agent", "namespace": "demo"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent", "tier": "control"}},
                "spec": {"containers": [{"name": "agent", "image": "agent:1"}]},
            },
        },
    })
}

#[test]
fn deployments() {
    assert!(errors(&deployment()).is_empty());
    let mismatch = with(
        deployment(),
        "/spec/template/metadata/labels",
        json!({"app": "other"}),
    );
    assert_eq!(
        shown(&mismatch),
        [
            "spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`"
        ]
    );
    let mut no_selector = deployment();
    no_selector["spec"]
        .as_object_mut()
        .unwrap()
        .remove("selector");
    assert_eq!(shown(&no_selector), ["spec.selector: Required value"]);
    assert_eq!(
        fields(&with(
            deployment(),
            "/spec/template/spec/containers/0/name",
            json!("Agent")
        )),
        ["spec.template.spec.containers[0].name"]
    );
    assert_eq!(
        fields(&with(
            deployment(),
            "/spec/selector/matchLabels",
            json!({"app": "-agent"})
        )),
        ["spec.selector.matchLabels", "spec.template.metadata.labels"]
    );
}

fn config_map(metadata: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})
}

#[test]
fn metadata_rules() {
    let catalog = Catalog::builtin();
    // A missing name is an error of whole objects, not of patches.
    let nameless = config_map(json!({"namespace": "demo"}));
    assert_eq!(
        catalog
            .object_errors(&nameless, Completeness::Whole)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["metadata.name: Required value: name or generateName is required"]
    );
    assert!(
        catalog
            .object_errors(&nameless, Completeness::Patch)
            .is_empty()
    );
    // generateName stands for the name.
    assert!(
        errors(&config_map(
            json!({"generateName": "settings-", "namespace": "demo"})
        ))
        .is_empty()
    );
    assert_eq!(
        fields(&config_map(json!({"generateName": "Settings-"}))),
        ["metadata.generateName"]
    );

    // A bad namespace: a DNS-1123 label.
    assert_eq!(
        shown(&config_map(json!({"name": "c", "namespace": "demo.east"}))),
        ["metadata.namespace: Invalid value: \"demo.east\": must not contain dots"]
    );
    assert_eq!(
        fields(&config_map(json!({"name": "c", "namespace": "Demo"}))),
        ["metadata.namespace"]
    );
    // A cluster-scoped kind with a namespace.
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "demo", "namespace": "demo"}});
    assert_eq!(
        shown(&namespace),
        ["metadata.namespace: Forbidden: not allowed on this type"]
    );
    let good_namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}});
    assert!(errors(&good_namespace).is_empty());
    assert_eq!(
        shown(&with(good_namespace, "/metadata/name", json!("demo.east"))),
        ["metadata.name: Invalid value: \"demo.east\": must not contain dots"]
    );

    // Finalizers are qualified names, reported at metadata.finalizers.
    let finalizers = config_map(json!({"name": "c", "finalizers": [
        "clusterset.io/cleanup", "kubernetes", "bad/final/izer"]}));
    let found = errors(&finalizers);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].field, "metadata.finalizers");
    assert_eq!(
        found[0].kind,
        ErrorKind::Invalid("\"bad/final/izer\"".to_owned())
    );

    // Owner references need apiVersion, kind, name and uid.
    let owned = config_map(json!({"name": "c", "ownerReferences": [
        {"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "1234"},
        {"apiVersion": "v1", "kind": "Service", "name": "web"},
    ]}));
    // validateOwnerReference reports at the list, without the index.
    assert_eq!(
        shown(&owned),
        ["metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty"]
    );
    let empty_owner = config_map(json!({"name": "c", "ownerReferences": [{}]}));
    assert_eq!(
        shown(&empty_owner),
        [
            "metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty",
            "metadata.ownerReferences.kind: Invalid value: \"\": kind must not be empty",
            "metadata.ownerReferences.name: Invalid value: \"\": name must not be empty",
            "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty",
        ]
    );
    let no_version = config_map(json!({"name": "c", "ownerReferences": [
        {"apiVersion": "apps/", "kind": "Deployment", "name": "web", "uid": "1234"},
    ]}));
    assert_eq!(fields(&no_version), ["metadata.ownerReferences.apiVersion"]);

    // Labels and annotations.
    assert_eq!(
        fields(&config_map(
            json!({"name": "c", "labels": {"a": "b/c"}, "annotations": {"bad key": "v"}})
        )),
        ["metadata.labels", "metadata.annotations"]
    );
    assert_eq!(
        shown(&config_map(json!({"name": "c", "labels": {"a": 1}}))),
        ["metadata.labels: Invalid value: {\"a\":1}: must be a map of strings"]
    );
    assert!(errors(&config_map(json!({"name": "c", "labels": null}))).is_empty());
    let big = "x".repeat(262_144);
    assert_eq!(
        shown(&config_map(json!({"name": "c", "annotations": {"a": big}}))),
        ["metadata.annotations: Too long: may not be more than 262144 bytes"]
    );

    // Two problems of one name are two errors.
    let long_upper = "A".repeat(254);
    assert_eq!(errors(&config_map(json!({"name": long_upper}))).len(), 2);

    // An unknown type gets its metadata checked, as a namespaced one.
    let unknown = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "Widget", "namespace": "demo"}, "spec": {"anything": true}});
    assert_eq!(fields(&unknown), ["metadata.name"]);
    assert!(
        metadata_errors(
            "example.com",
            "Widget",
            &unknown,
            false,
            Completeness::Whole
        )
        .iter()
        .any(|e| e.kind == ErrorKind::Forbidden)
    );
}

/// A small CRD written by hand: namespaced `widgets.example.com`, conditions as metav1.Condition
/// in a list-type map keyed by type.
fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1alpha1", "served": false, "storage": false,
                    "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "required": ["size"], "properties": {
                            "size": {"type": "integer", "minimum": 1},
                            "color": {"type": "string", "enum": ["red", "blue"]},
                        }},
                        "status": {"type": "object", "properties": {
                            "conditions": {
                                "type": "array",
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["type"],
                                "items": {"type": "object",
                                    "required": ["type", "status", "lastTransitionTime", "reason", "message"],
                                    "properties": {
                                        "type": {"type": "string", "maxLength": 316},
                                        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                                        "observedGeneration": {"type": "integer", "minimum": 0},
                                        "lastTransitionTime": {"type": "string", "format": "date-time"},
                                        "reason": {"type": "string", "maxLength": 1024, "minLength": 1,
                                            "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
                                        "message": {"type": "string", "maxLength": 32768},
                                    }},
                            },
                        }},
                    },
                }}},
            ],
        },
    })
}

fn widget() -> Value {
    json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "demo"},
        "spec": {"size": 3, "color": "red"},
        "status": {"conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2024-05-01T10:00:00Z",
                "reason": "AllGood", "message": ""},
            {"type": "Synced", "status": "False", "lastTransitionTime": "2024-05-01T10:00:00Z",
                "reason": "Waiting", "message": "not yet"},
        ]},
    })
}

#[test]
fn custom_resources_follow_their_schema() {
    let crd = widget_crd();
    assert!(kube_syntax::crd::crd_errors(&crd).is_empty());
    let catalog = Catalog::builtin().with_crd(&crd);
    let resource = catalog.by_plural("example.com", "widgets").unwrap();
    assert_eq!(resource.kind, "Widget");
    assert_eq!(resource.versions, ["v1"]);
    assert!(resource.namespaced);
    let check = |object: &Value, completeness| -> Vec<String> {
        catalog
            .object_errors(object, completeness)
            .iter()
            .map(ToString::to_string)
            .collect()
    };

    assert_eq!(check(&widget(), Completeness::Whole), Vec::<String>::new());
    assert_eq!(
        check(&with(widget(), "/spec/size", json!(0)), Completeness::Whole),
        ["spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"]
    );
    assert_eq!(
        check(
            &with(widget(), "/spec/color", json!("green")),
            Completeness::Whole
        ),
        ["spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\""]
    );
    assert_eq!(
        check(
            &with(widget(), "/spec/shape", json!("round")),
            Completeness::Whole
        ),
        ["spec.shape: field not declared in schema"]
    );
    // Required fields are missing only from whole objects.
    let patch =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"color": "blue"}});
    assert!(check(&patch, Completeness::Patch).is_empty());
    assert_eq!(
        check(
            &with(patch, "/metadata", json!({"name": "w1"})),
            Completeness::Whole
        ),
        ["spec.size: Required value"]
    );
    // Metadata is checked as for any object.
    assert_eq!(
        catalog
            .object_errors(
                &with(widget(), "/metadata/name", json!("W1")),
                Completeness::Whole
            )
            .iter()
            .map(|e| e.field.as_str())
            .collect::<Vec<_>>(),
        ["metadata.name"]
    );
    // A version the CRD does not serve.
    let old = with(widget(), "/apiVersion", json!("example.com/v1alpha1"));
    assert_eq!(
        check(&old, Completeness::Whole),
        ["apiVersion: Unsupported value: \"example.com/v1alpha1\": supported values: "]
    );
}

#[test]
fn custom_resource_conditions() {
    let catalog = Catalog::builtin().with_crd(&widget_crd());
    let check = |object: &Value| -> Vec<String> {
        catalog
            .object_errors(object, Completeness::Whole)
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    // A repeated condition type: reported once, as the schema's list-type map reports it.
    let mut repeated = widget();
    repeated["status"]["conditions"][1]["type"] = json!("Ready");
    assert_eq!(
        check(&repeated),
        ["status.conditions[1]: Duplicate value: {\"type\":\"Ready\"}"]
    );
    // A bad status, a missing lastTransitionTime, a bad time and reason: the schema's words.
    let mut maybe = widget();
    maybe["status"]["conditions"][0]["status"] = json!("Maybe");
    assert_eq!(
        check(&maybe),
        [
            "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\""
        ]
    );
    let mut timeless = widget();
    timeless["status"]["conditions"][0]
        .as_object_mut()
        .unwrap()
        .remove("lastTransitionTime");
    assert_eq!(
        check(&timeless),
        ["status.conditions[0].lastTransitionTime: Required value"]
    );
    let mut bad_time = widget();
    bad_time["status"]["conditions"][0]["lastTransitionTime"] = json!("today");
    assert_eq!(
        check(&bad_time),
        [
            "status.conditions[0].lastTransitionTime: Invalid value: \"today\": status.conditions[0].lastTransitionTime in body must be of type date-time: \"today\""
        ]
    );
    let mut bad_reason = widget();
    bad_reason["status"]["conditions"][0]["reason"] = json!("All good");
    assert_eq!(
        check(&bad_reason),
        [
            "status.conditions[0].reason: Invalid value: \"All good\": status.conditions[0].reason in body should match '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'"
        ]
    );
}

#[test]
fn conditions_the_schema_leaves_free_are_not_checked() {
    // Only the schema applies to a custom resource: a real server runs no ValidateConditions
    // on conditions the schema leaves free.
    let mut crd = widget_crd();
    crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["status"] =
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let catalog = Catalog::builtin().with_crd(&crd);
    let mut free = widget();
    free["status"]["conditions"][1]["type"] = json!("Ready");
    free["status"]["conditions"][0]["status"] = json!("Maybe");
    assert!(catalog.object_errors(&free, Completeness::Whole).is_empty());
}

#[test]
fn cluster_scoped_custom_resources() {
    let mut crd = widget_crd();
    crd["spec"]["scope"] = json!("Cluster");
    let catalog = Catalog::builtin().with_crd(&crd);
    assert!(!catalog.by_kind("example.com", "Widget").unwrap().namespaced);
    let found = catalog.object_errors(&widget(), Completeness::Whole);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].field, "metadata.namespace");
    assert_eq!(found[0].kind, ErrorKind::Forbidden);
}

#[test]
fn endpoint_slice_addresses_that_never_reach_a_pod_are_refused() {
    for (family, address, fragment) in [
        ("IPv4", "0.0.0.0", "unspecified"),
        ("IPv4", "127.0.0.1", "loopback"),
        ("IPv4", "169.254.1.1", "link-local range"),
        ("IPv4", "224.0.0.251", "link-local multicast"),
        ("IPv6", "::", "unspecified"),
        ("IPv6", "::1", "loopback"),
        ("IPv6", "fe80::1", "link-local range"),
        ("IPv6", "ff02::1", "link-local multicast"),
    ] {
        let slice = serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-east", "namespace": "demo"},
            "addressType": family, "endpoints": [{"addresses": [address]}],
        });
        let errors = kube_syntax::object::Catalog::builtin()
            .object_errors(&slice, kube_syntax::object::Completeness::Whole);
        assert_eq!(errors.len(), 1, "{address}: {errors:?}");
        assert_eq!(errors[0].field, "endpoints[0].addresses[0]");
        assert!(errors[0].detail.contains(fragment), "{address}: {errors:?}");
    }
    for (family, address) in [
        ("IPv4", "242.1.0.1"),
        ("IPv4", "10.0.0.1"),
        ("IPv6", "fd00::1"),
    ] {
        let slice = serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-east", "namespace": "demo"},
            "addressType": family, "endpoints": [{"addresses": [address]}],
        });
        let errors = kube_syntax::object::Catalog::builtin()
            .object_errors(&slice, kube_syntax::object::Completeness::Whole);
        assert!(errors.is_empty(), "{address}: {errors:?}");
    }
}

#[test]
fn a_deployment_needs_a_non_empty_selector_and_containers() {
    let deployment = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "rook-ceph-osd-0", "namespace": "rook-ceph"},
        "spec": {"selector": {}, "template": {"metadata": {"labels": {"app": "osd"}},
            "spec": {"containers": []}}},
    });
    let errors = kube_syntax::object::Catalog::builtin()
        .object_errors(&deployment, kube_syntax::object::Completeness::Whole);
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        ["spec.selector", "spec.template.spec.containers"],
        "{errors:?}"
    );
    assert!(
        errors[0]
            .detail
            .contains("empty selector is invalid for deployment")
    );
    // A patch sends what it changes: neither is required there.
    let patch = kube_syntax::object::Catalog::builtin()
        .object_errors(&deployment, kube_syntax::object::Completeness::Patch);
    assert!(patch.is_empty(), "{patch:?}");
}

#[test]
fn a_pod_template_s_annotations_are_checked_as_an_object_s() {
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "agent", "namespace": "clusterset-system"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
            "metadata": {"labels": {"app": "agent"}, "annotations": {"bad key": "x"}},
            "spec": {"containers": [{"name": "agent"}]}}},
    });
    assert_eq!(fields(&deployment), ["spec.template.metadata.annotations"]);
}

#[test]
fn rbac_objects_and_disruption_budgets_have_their_scope() {
    let catalog = Catalog::builtin();
    for (group, kind, namespaced) in [
        ("rbac.authorization.k8s.io", "Role", true),
        ("rbac.authorization.k8s.io", "RoleBinding", true),
        ("rbac.authorization.k8s.io", "ClusterRole", false),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding", false),
        ("policy", "PodDisruptionBudget", true),
    ] {
        assert_eq!(
            catalog.by_kind(group, kind).unwrap().namespaced,
            namespaced,
            "{kind}"
        );
    }
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "agent", "namespace": "x"}});
    assert_eq!(
        shown(&role),
        ["metadata.namespace: Forbidden: not allowed on this type"]
    );
}

#[test]
fn a_disruption_budget_takes_one_bound_as_a_count_or_a_percentage() {
    let budget = |spec: Value| {
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "agent", "namespace": "clusterset-system"}, "spec": spec})
    };
    for spec in [
        json!({"maxUnavailable": 1, "selector": {"matchLabels": {"app": "agent"}}}),
        json!({"minAvailable": "50%", "selector": {"matchLabels": {"app": "agent"}}}),
        json!({"maxUnavailable": 0}),
    ] {
        assert_eq!(shown(&budget(spec.clone())), Vec::<String>::new(), "{spec}");
    }
    assert_eq!(
        fields(&budget(json!({"maxUnavailable": 1, "minAvailable": 1}))),
        ["spec"]
    );
    assert_eq!(
        fields(&budget(json!({"maxUnavailable": -1}))),
        ["spec.maxUnavailable"]
    );
    assert_eq!(
        fields(&budget(json!({"minAvailable": "101%"}))),
        ["spec.minAvailable"]
    );
    assert!(
        shown(&budget(json!({"minAvailable": "half"})))[0]
            .contains("a valid percent string must be a numeric string followed by an ending '%'")
    );
    assert_eq!(
        fields(&budget(
            json!({"selector": {"matchLabels": {"app": "a/b"}}})
        )),
        ["spec.selector.matchLabels"]
    );
}
