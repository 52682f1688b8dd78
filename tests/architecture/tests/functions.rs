//! No function outside tests is over 100 lines unless its doc comment says why it cannot be
//! split: the sources of every library and binary (`crates/*/src`, `bins/*/src`) are parsed
//! (syn), and every function with a body — free, in an `impl`, in a trait, nested — is measured
//! from its `fn` to its closing brace. Test code (`#[cfg(test)]` items, `#[test]` functions,
//! `tests.rs` modules) is not measured.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use clusterset_architecture::workspace_root;
use syn::visit::Visit;

/// The longest a function may be without a reason.
const MAX_LINES: usize = 100;

/// What a long function's doc comment says to be allowed (case-insensitive).
const REASON: &str = "cannot be split";

/// A function over [`MAX_LINES`] without a reason: where and how long.
#[derive(Debug, PartialEq, Eq)]
struct LongFunction {
    name: String,
    line: usize,
    lines: usize,
}

#[derive(Default)]
struct Finder {
    long: Vec<LongFunction>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        if path.is_ident("test") {
            return true;
        }
        if path.is_ident("cfg") {
            let text = meta_text(&attr.meta);
            return text.contains("test") && !text.contains("not");
        }
        false
    })
}

fn doc_text(attrs: &[syn::Attribute]) -> String {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .map(|a| meta_text(&a.meta))
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The text of an attribute's meta: a path, `path(tokens)`, or a string value (a doc line).
fn meta_text(meta: &syn::Meta) -> String {
    match meta {
        syn::Meta::Path(path) => quote_path(path),
        syn::Meta::List(list) => format!("{}({})", quote_path(&list.path), list.tokens),
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => s.value(),
            _ => String::new(),
        },
    }
}

fn quote_path(path: &syn::Path) -> String {
    path.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

impl Finder {
    fn measure(
        &mut self,
        name: &syn::Ident,
        attrs: &[syn::Attribute],
        from: proc_macro2::Span,
        block: &syn::Block,
    ) {
        let first = from.start().line;
        let last = block.brace_token.span.close().end().line;
        let lines = last + 1 - first;
        if lines > MAX_LINES && !doc_text(attrs).contains(REASON) {
            self.long.push(LongFunction {
                name: name.to_string(),
                line: first,
                lines,
            });
        }
    }
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_item_mod(&mut self, node: &'ast syn::ItemMod) {
        if !is_test_only(&node.attrs) {
            syn::visit::visit_item_mod(self, node);
        }
    }

    fn visit_item_impl(&mut self, node: &'ast syn::ItemImpl) {
        if !is_test_only(&node.attrs) {
            syn::visit::visit_item_impl(self, node);
        }
    }

    fn visit_item_fn(&mut self, node: &'ast syn::ItemFn) {
        if is_test_only(&node.attrs) {
            return;
        }
        self.measure(
            &node.sig.ident,
            &node.attrs,
            node.sig.fn_token.span,
            &node.block,
        );
        syn::visit::visit_item_fn(self, node);
    }

    fn visit_impl_item_fn(&mut self, node: &'ast syn::ImplItemFn) {
        if is_test_only(&node.attrs) {
            return;
        }
        self.measure(
            &node.sig.ident,
            &node.attrs,
            node.sig.fn_token.span,
            &node.block,
        );
        syn::visit::visit_impl_item_fn(self, node);
    }

    fn visit_trait_item_fn(&mut self, node: &'ast syn::TraitItemFn) {
        if is_test_only(&node.attrs) {
            return;
        }
        if let Some(block) = &node.default {
            self.measure(&node.sig.ident, &node.attrs, node.sig.fn_token.span, block);
        }
        syn::visit::visit_trait_item_fn(self, node);
    }
}

/// The functions of `source` over [`MAX_LINES`] without a reason.
fn long_functions(source: &str) -> Result<Vec<LongFunction>, syn::Error> {
    let file = syn::parse_file(source)?;
    let mut finder = Finder::default();
    finder.visit_file(&file);
    Ok(finder.long)
}

/// Every `.rs` file under `dir`, except test modules kept in files of their own (`tests.rs`,
/// a `tests/` directory).
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

#[test]
fn no_function_outside_tests_is_over_100_lines_without_a_reason() {
    let root = workspace_root();
    let mut files = Vec::new();
    for group in ["crates", "bins"] {
        for package in std::fs::read_dir(root.join(group)).unwrap() {
            sources(&package.unwrap().path().join("src"), &mut files);
        }
    }
    files.sort();
    assert!(files.len() > 100, "the sources were found: {}", files.len());
    let mut report = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        let long = long_functions(&source)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
        for f in long {
            report.push(format!(
                "{}:{} {} ({} lines)",
                file.strip_prefix(&root).unwrap().display(),
                f.line,
                f.name,
                f.lines
            ));
        }
    }
    assert!(
        report.is_empty(),
        "functions over {MAX_LINES} lines: split each into functions that do one named thing, or say in its doc comment why it {REASON}:\n{}",
        report.join("\n")
    );
}

/// A function of `lines` lines (its `fn` line and closing brace included).
fn function(doc: &str, name: &str, lines: usize) -> String {
    let body: String = (0..lines - 2)
        .map(|i| format!("    let _x{i} = {i};\n"))
        .collect();
    format!("{doc}fn {name}() {{\n{body}}}\n")
}

#[test]
fn the_check_measures_functions_and_spares_reasons_and_tests() {
    let source = format!(
        "{}{}{}{}mod inner {{ impl S {{ {} }} }}\n#[cfg(test)]\nmod tests {{ {} }}\n",
        function("", "short", 100),
        function("", "long", 101),
        function(
            "/// Not split: one match of 120 arms cannot be split without hiding it.\n",
            "explained",
            120
        ),
        function("#[test]\n", "a_test", 150),
        function("", "method", 130),
        function("", "in_tests", 130),
    );
    let long = long_functions(&source).unwrap();
    let names: Vec<(&str, usize)> = long.iter().map(|f| (f.name.as_str(), f.lines)).collect();
    assert_eq!(names, [("long", 101), ("method", 130)]);
}
