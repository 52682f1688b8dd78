//! A file of the objects a zone is built from (what `mcsctl dns serve --from-file` serves): YAML
//! documents, separated by `---`, of ServiceImports (`multicluster.x-k8s.io/v1beta1` or
//! `v1alpha1`) and MCS EndpointSlices (`discovery.k8s.io/v1`), or `kind: List` documents of
//! them, as `kubectl get serviceimports,endpointslices -A -o yaml` prints. A file is taken
//! whole or not at all: [`read`] returns every problem, each naming the file and, for an
//! object, its kind, name, field and fix.
//!
//! ```
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("zone.yaml");
//! std::fs::write(&path, "
//! apiVersion: v1
//! kind: List
//! items:
//! - apiVersion: multicluster.x-k8s.io/v1beta1
//!   kind: ServiceImport
//!   metadata: {name: web, namespace: shop}
//!   spec: {type: ClusterSetIP, ips: [242.1.0.7], ports: [{port: 80}]}
//! ")?;
//! let objects = clusterset_dns::objects_file::read(&path).map_err(|p| format!("{p:?}"))?;
//! assert_eq!(objects.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::{Path, PathBuf};

use crate::objects::{ObjectError, ZoneObject};

/// A problem of a file of zone objects. Each names the file; the cause, where there is one, is
/// the error's source (print the chain: `FILE: cannot read: No such file or directory`).
#[derive(Debug, thiserror::Error)]
pub enum FileProblem {
    /// The file cannot be read.
    #[error("{}: cannot read", .file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not YAML.
    #[error("{}: not valid YAML", .file.display())]
    Yaml {
        /// The file.
        file: PathBuf,
        /// Where and why.
        #[source]
        source: serde_saphyr::Error,
    },
    /// A `kind: ...List` document without an `items` array.
    #[error("{}: a List document needs an `items` array", .file.display())]
    ListWithoutItems {
        /// The file.
        file: PathBuf,
    },
    /// An object the zone cannot use; the source names its kind, name, field and the fix.
    #[error("{}", .file.display())]
    Object {
        /// The file.
        file: PathBuf,
        /// What is wrong with the object.
        #[source]
        source: ObjectError,
    },
}

impl FileProblem {
    /// The problem of `object` in `file`.
    pub fn object(file: &Path, source: ObjectError) -> Self {
        Self::Object {
            file: file.to_path_buf(),
            source,
        }
    }
}

/// The objects of the file at `path`, or every problem found in it.
pub fn read(path: &Path) -> Result<Vec<ZoneObject>, Vec<FileProblem>> {
    let file = || path.to_path_buf();
    let text = std::fs::read_to_string(path).map_err(|source| {
        vec![FileProblem::Read {
            file: file(),
            source,
        }]
    })?;
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|source| {
            vec![FileProblem::Yaml {
                file: file(),
                source,
            }]
        })?;
    let mut objects = Vec::new();
    let mut problems = Vec::new();
    for document in documents {
        let is_list = document
            .get("kind")
            .and_then(|k| k.as_str())
            .is_some_and(|k| k.ends_with("List"));
        let items = match (is_list, document) {
            (true, serde_json::Value::Object(mut list)) => match list.remove("items") {
                Some(serde_json::Value::Array(items)) => items,
                _ => {
                    problems.push(FileProblem::ListWithoutItems { file: file() });
                    continue;
                }
            },
            (_, document) => vec![document],
        };
        for item in items {
            match ZoneObject::from_document(item) {
                Ok(object) => objects.push(object),
                Err(e) => problems.push(FileProblem::object(path, e)),
            }
        }
    }
    if problems.is_empty() {
        Ok(objects)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A problem as a person reads it: the message and its causes.
    fn chain(problem: &FileProblem) -> String {
        let mut text = problem.to_string();
        let mut source = std::error::Error::source(problem);
        while let Some(cause) = source {
            text = format!("{text}: {cause}");
            source = cause.source();
        }
        text
    }

    fn read_text(text: &str) -> (PathBuf, Result<Vec<ZoneObject>, Vec<String>>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zone.yaml");
        std::fs::write(&path, text).unwrap();
        let read = read(&path).map_err(|problems| problems.iter().map(chain).collect());
        (path, read)
    }

    const IMPORT: &str = "
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ServiceImport
metadata: {name: web, namespace: shop}
spec: {type: ClusterSetIP, ips: [242.1.0.7], ports: [{port: 80}]}
";

    const SLICE: &str = "
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-east
  namespace: shop
  labels: {multicluster.kubernetes.io/service-name: web, multicluster.kubernetes.io/source-cluster: east}
addressType: IPv4
endpoints: [{addresses: [242.1.0.7]}]
";

    #[test]
    fn documents_and_lists_of_them_are_read() {
        let (_, read) = read_text(&format!("{IMPORT}---{SLICE}"));
        let objects = read.unwrap();
        assert!(matches!(
            objects.as_slice(),
            [ZoneObject::ServiceImport(_), ZoneObject::EndpointSlice(_)]
        ));
        let list = "
apiVersion: v1
kind: List
items:
- apiVersion: multicluster.x-k8s.io/v1beta1
  kind: ServiceImport
  metadata: {name: web, namespace: shop}
  spec: {type: ClusterSetIP, ips: [242.1.0.7], ports: [{port: 80}]}
- apiVersion: multicluster.x-k8s.io/v1beta1
  kind: ServiceImport
  metadata: {name: db, namespace: shop}
  spec: {type: Headless, ports: [{port: 5432}]}
";
        let (_, read) = read_text(list);
        assert_eq!(read.unwrap().len(), 2);
    }

    #[test]
    fn every_problem_names_the_file_and_the_object() {
        let bad_slice = SLICE.replace("addresses: [242.1.0.7]", "addresses: 242.1.0.7");
        let (path, read) = read_text(&format!(
            "{IMPORT}---{bad_slice}---\napiVersion: v1\nkind: ServiceList\n"
        ));
        let file = path.display();
        assert_eq!(
            read.unwrap_err(),
            [
                format!(
                    "{file}: EndpointSlice shop/web-east: endpoints[0].addresses: {}",
                    ZoneObject::from_document(serde_saphyr::from_str(&bad_slice).unwrap())
                        .unwrap_err()
                        .problem
                ),
                format!("{file}: a List document needs an `items` array"),
            ]
        );
        let (path, read) = read_text("kind: [oops");
        let problems = read.unwrap_err();
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].starts_with(&format!("{}: not valid YAML: ", path.display())),
            "{problems:?}"
        );
        let missing = Path::new("/nonexistent/zone.yaml");
        let problems = super::read(missing).unwrap_err();
        assert!(
            chain(&problems[0]).starts_with("/nonexistent/zone.yaml: cannot read: "),
            "{problems:?}"
        );
    }
}
