//! Kubernetes' own syntax rules, as a kube-apiserver applies them, in one place.
//!
//! Every rule here follows `k8s.io/apimachinery/pkg/util/validation` and the API server's
//! validation of objects, with its limits and its wording, so that for the rules modelled here
//! a value accepted is accepted by a real API server and a value refused is refused there with
//! the same message (docs/kube-syntax.md lists what is not modelled). The target is one version:
//! the rules and messages of Kubernetes 1.37, the newest release the end-to-end tests run (they
//! also run 1.35, which differs in one rule: Service names, see [`names::object_name_rule`]),
//! which compare the answers of the strict fake API servers built on this crate with a real
//! server's. The modules:
//!
//! - [`names`]: DNS-1123 labels and subdomains, DNS-1035 labels, qualified names, and which rule
//!   names an object of each kind (a Service's name is a DNS-1123 label, a ConfigMap's a DNS-1123
//!   subdomain);
//! - [`labels`]: label keys and values, annotation keys and the annotations' total size;
//! - [`selector`]: label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!` does not exist,
//!   `<`, `>`) parsed and matched as `labels.Parse` does, and field selectors;
//! - [`meta`]: field-manager names, and condition types, reasons and statuses;
//! - [`crd`]: CustomResourceDefinitions (names = `<plural>.<group>`, protected groups and their
//!   approval annotation, structural schemas) and custom objects checked against a schema;
//! - [`object`]: a whole object (its metadata and, for the kinds clusterset writes, its spec)
//!   checked as the API server checks it on create, update and apply;
//! - [`status`]: the `Status` bodies a real server answers with (422 Invalid with every cause
//!   and its field path, 400 BadRequest).
//!
//! The crate is pure (no IO, no client). Code uses it to check what it is about to emit
//! (`mcs-types` marks the CRDs of protected groups with it); tests use it to make fake API
//! servers refuse exactly what a real one refuses.
//!
//! ```
//! use kube_syntax::labels::label_value;
//! assert!(label_value("mcs-controller.clusterset.io").is_ok());
//! let refused = label_value("clusterset.io/mcs-controller").unwrap_err();
//! assert!(refused.to_string().contains("a valid label must be an empty string"));
//! ```
#![forbid(unsafe_code)]

pub mod crd;
pub mod error;
pub mod labels;
pub mod meta;
pub mod names;
pub mod object;
pub mod selector;
pub mod status;

pub use error::{ErrorKind, FieldError, Invalid, Rule};
