//! The crate's modules are layers: each uses only the modules below it, so that no two of them
//! use each other (issue #20). This test reads the crate's own sources and fails on a path
//! `crate::<module>` to a module that is not below the module it is written in.
//!
//! Not checked: comments, and unit tests (`#[cfg(test)] mod tests`), which may build their
//! fixtures through the layers above the module they test.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::path::{Path, PathBuf};

/// The layers, bottom first: a module may use the modules before it in this list, never one
/// after it. A new module goes into its place here.
const LAYERS: &[&str] = &[
    "name",         // DNS names in wire form, reverse names, the maps' hash
    "cow_map",      // the copy-on-write sharded map
    "objects",      // Kubernetes objects validated into facts
    "objects_file", // a YAML file of those objects
    "records",      // the pure record model: what names hold, answers as records
    "prepared",     // a name's answers, encoded once
    "index",        // the zone's indexes (services, namespaces, reverse names)
    "zone",         // ClustersetZone: updates and the model's lookups
    "zonefile",     // the zone as a master file
    "wire",         // the query hot path and the snapshot it answers from
    "stats",        // query counts
    "store",        // the live store
    "server",       // the UDP and TCP server
];

/// Modules on their own: they use no other module of the crate and none uses them (the
/// resolver works without the server, the store or the zone).
const STANDALONE: &[&str] = &["resolver"];

/// A path `crate::<module>` in a source file.
#[derive(Debug, PartialEq, Eq)]
struct Reference {
    module: String,
    line: usize,
}

/// The code of a source file that the layering covers: the text before its unit tests, without
/// comment lines. (rustfmt puts a unit-test module's closing brace alone on a line.)
fn checked_code(source: &str) -> String {
    let mut code = String::new();
    let mut in_tests = false;
    let mut after_cfg_test = false;
    for line in source.lines() {
        let trimmed = line.trim();
        if in_tests {
            in_tests = line != "}";
            code.push('\n');
            continue;
        }
        if after_cfg_test && trimmed.starts_with("mod tests") {
            in_tests = true;
        }
        after_cfg_test = trimmed == "#[cfg(test)]";
        if !in_tests && !trimmed.starts_with("//") {
            code.push_str(line);
        }
        code.push('\n');
    }
    code
}

/// Every `crate::<module>` in `code`, with `use crate::{a::X, b::{Y, Z}}` giving `a` and `b`.
fn references(code: &str) -> Vec<Reference> {
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let ident = |text: &str| -> String {
        text.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        // `$crate::` and `some_crate::` are not this crate.
        if code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')
        {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            found.push(Reference {
                module: ident(rest),
                line: line_of(at),
            });
            continue;
        };
        // The group's items at its top level, each up to its comma.
        let (mut depth, mut item_start) = (0usize, 0usize);
        for (i, c) in group.char_indices() {
            let item_end = match c {
                '{' => {
                    depth += 1;
                    None
                }
                '}' if depth == 0 => Some(true),
                '}' => {
                    depth -= 1;
                    None
                }
                ',' if depth == 0 => Some(false),
                _ => None,
            };
            if let Some(last) = item_end {
                let item = &group[item_start..i];
                let blank = item.len() - item.trim_start().len();
                if !item.trim().is_empty() {
                    found.push(Reference {
                        module: ident(item.trim_start()),
                        line: line_of(at + "crate::{".len() + item_start + blank),
                    });
                }
                if last {
                    break;
                }
                item_start = i + 1;
            }
        }
    }
    found
}

/// The source files of the crate but `lib.rs`, each with the module it belongs to (the first
/// component of its path under `src`).
fn module_files() -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, files);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|path| path != &src.join("lib.rs"))
        .map(|path| {
            let first = path
                .strip_prefix(&src)
                .unwrap()
                .components()
                .next()
                .unwrap();
            let first = first.as_os_str().to_str().unwrap();
            (first.trim_end_matches(".rs").to_owned(), path)
        })
        .collect()
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let rank = |module: &str| LAYERS.iter().position(|m| *m == module);
    let is_standalone = |module: &str| STANDALONE.contains(&module);
    let mut problems = Vec::new();
    let files = module_files();
    for (module, path) in &files {
        let shown = path
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap()
            .display();
        if rank(module).is_none() && !is_standalone(module) {
            problems.push(format!(
                "{shown}: module `{module}` is in no layer: add it to LAYERS (or STANDALONE)"
            ));
            continue;
        }
        let source = std::fs::read_to_string(path).unwrap();
        for Reference { module: used, line } in references(&checked_code(&source)) {
            if used == *module || used == "self" {
                continue;
            }
            let problem = if rank(&used).is_none() && !is_standalone(&used) {
                format!(
                    "`crate::{used}` is not a module: name the module the item is defined in, not \
                     a re-export of the crate root"
                )
            } else if is_standalone(module) {
                format!("`{module}` stands alone and must not use `crate::{used}`")
            } else if is_standalone(&used) {
                format!("`crate::{used}` stands alone: no other module may use it")
            } else if rank(&used) > rank(module) {
                format!(
                    "`{module}` is below `{used}` (see LAYERS) and must not use it: move what \
                     both need down, or the user up"
                )
            } else {
                continue;
            };
            problems.push(format!("{shown}:{line}: {problem}"));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    // And the lists name no module that is gone.
    for module in LAYERS.iter().chain(STANDALONE) {
        assert!(
            files.iter().any(|(m, _)| m == module),
            "LAYERS or STANDALONE names `{module}`, which has no file under src/"
        );
    }
}

#[test]
fn references_are_found_in_paths_and_use_groups_but_not_in_comments_or_unit_tests() {
    let source = r#"//! About `crate::server`.
use crate::name::wire_name;
use crate::{
    objects::{ServiceKey, SliceKey},
    records::ZoneConfig,
};
// crate::store is only mentioned.
fn f() -> usize {
    crate::index::count() + other_crate::store::x() + $crate::zone::y()
}

#[cfg(test)]
mod tests {
    use crate::server::DnsServer;
}
"#;
    let found = references(&checked_code(source));
    let modules: Vec<(&str, usize)> = found.iter().map(|r| (r.module.as_str(), r.line)).collect();
    assert_eq!(
        modules,
        [("name", 2), ("objects", 4), ("records", 5), ("index", 9)]
    );
}
