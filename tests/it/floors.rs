//! The floor plan (`../shared/DESIGN.md` §1): an import only points down,
//! ground floor (ids, time, rng, stats, nn, error, io, names) → job → cluster → trace →
//! profile → workload (with the options' bounds) → policy → engine → metrics → the top floors
//! (experiment, sweeps, then the command line, `cli`). Read from the library's own source: every
//! `crate::<module>` path outside a comment, in each module of the lower
//! floors, must name a module on its own floor or below.

use std::path::{Path, PathBuf};

/// The library's modules by floor, ground first. Modules not named here are
/// the top floors (experiment and above), which this test does not check.
const FLOORS: &[&[&str]] = &[
    &["ids", "time", "rng", "stats", "nn", "error", "io", "names"],
    &["job"],
    &["cluster"],
    &["trace"],
    &["profile"],
    // `bounds`: the options' ranges, which cite the workload's and the
    // cluster's limits; the policies' options check against them.
    &["workload", "bounds"],
    &["policy"],
    &["engine"],
    &["metrics"],
];

fn floor_of(module: &str) -> usize {
    FLOORS.iter().position(|f| f.contains(&module)).unwrap_or(FLOORS.len())
}

/// Every `.rs` file of a module: `src/<m>.rs` or everything under `src/<m>/`.
fn files_of(src: &Path, module: &str) -> Vec<PathBuf> {
    let file = src.join(format!("{module}.rs"));
    if file.exists() {
        return vec![file];
    }
    let mut out = Vec::new();
    let mut dirs = vec![src.join(module)];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The modules a source text names as `crate::<module>`, with their lines,
/// outside comments.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let tail = &rest[at + "crate::".len()..];
            let name: String = tail.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push((i + 1, name));
            }
            rest = tail;
        }
    }
    out
}

#[test]
fn crate_paths_are_read_outside_comments() {
    let text = "use crate::job::JobSpec;\n/// [`crate::engine`]\nlet x = crate::ids::JobId(0); // crate::policy\n";
    assert_eq!(crate_paths(text), vec![(1, "job".to_string()), (3, "ids".to_string())]);
}

#[test]
fn no_import_of_the_lower_floors_points_up() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut upward = Vec::new();
    for (floor, modules) in FLOORS.iter().enumerate() {
        for module in *modules {
            for file in files_of(&src, module) {
                let text = std::fs::read_to_string(&file).unwrap();
                for (line, target) in crate_paths(&text) {
                    if floor_of(&target) > floor {
                        upward.push(format!("{}:{line}: {module} (floor {floor}) -> {target}", file.display()));
                    }
                }
            }
        }
    }
    assert!(upward.is_empty(), "imports pointing up the floor plan:\n{}", upward.join("\n"));
}

/// The `super::<name>` paths a child module's source names outside comments
/// and before its `#[cfg(test)]` unit tests (whose `super` is the child
/// itself), with their lines; `super::{` is reported as `{`.
fn super_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("super::") {
            let tail = &rest[at + "super::".len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '{' || *c == '*')
                .take(1)
                .collect();
            let name = if name == "{" || name == "*" {
                name
            } else {
                tail.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
            };
            out.push((i + 1, name));
            rest = tail;
        }
    }
    out
}

#[test]
fn super_paths_are_read_before_the_unit_tests() {
    let text = "use super::spec::RunSpec;\nuse super::{A, B};\n// super::x\n#[cfg(test)]\nuse super::*;\n";
    assert_eq!(super_paths(text), vec![(1, "spec".to_string()), (2, "{".to_string())]);
}

/// Inside `src/experiment/`, `mod.rs` holds only `pub mod` lines,
/// re-exports and docs, and a child reaches a sibling by its module
/// (`super::run::RunReport`), never an item through `mod.rs` (`super::RunReport`):
/// an import from a child up to its parent would point up the floor plan.
#[test]
fn experiment_children_do_not_import_their_parent() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/experiment");
    let mod_rs = std::fs::read_to_string(dir.join("mod.rs")).unwrap();
    let mut siblings = Vec::new();
    for line in mod_rs.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with("//") {
            continue;
        }
        if let Some(m) = l.strip_prefix("pub mod ") {
            siblings.push(m.trim_end_matches(';').to_string());
            continue;
        }
        // A re-export (possibly spanning lines); nothing else belongs here.
        let reexport = l.starts_with("pub use ") || !l.contains(['(', '=', '#']);
        assert!(reexport && !l.starts_with("fn ") && !l.starts_with("pub fn "), "src/experiment/mod.rs holds `{l}`");
    }
    assert!(siblings.iter().any(|s| s == "spec") && siblings.iter().any(|s| s == "run"), "{siblings:?}");
    let mut up = Vec::new();
    for file in files_of(dir.parent().unwrap(), "experiment") {
        if file.ends_with("mod.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, name) in super_paths(&text) {
            if !siblings.contains(&name) {
                up.push(format!("{}:{line}: super::{name}", file.display()));
            }
        }
    }
    assert!(up.is_empty(), "experiment children importing mod.rs:\n{}", up.join("\n"));
}

/// Inside `policy/`: the registry names every policy, so no policy file may
/// import it back (that closed a circle when SRTF implemented the registry's
/// build trait); policies take `BuildContext`/`BuildPolicy` from
/// `policy/build.rs`, below the registry.
#[test]
fn no_policy_file_imports_the_registry() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/policy");
    let mut offenders = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name == "registry.rs" || name == "mod.rs" || !name.ends_with(".rs") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("super::registry") || code.contains("policy::registry") {
                offenders.push(format!("src/policy/{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(offenders.is_empty(), "policy files importing the registry:\n{}", offenders.join("\n"));
}

/// The module path of a source file: `src/a/b.rs` → `[a, b]`,
/// `src/a/mod.rs` → `[a]`, `src/lib.rs` → `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// The paths of a `use` tree (or a plain path) starting at `s`, each as its
/// segments: `a::{b::C, d}` → `[a, b, C]`, `[a, d]`.
fn use_tree(s: &str) -> Vec<Vec<String>> {
    fn ident(s: &[u8], i: &mut usize) -> Option<String> {
        let start = *i;
        while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_') {
            *i += 1;
        }
        (*i > start).then(|| String::from_utf8_lossy(&s[start..*i]).into_owned())
    }
    fn skip_ws(s: &[u8], i: &mut usize) {
        while *i < s.len() && s[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }
    fn tree(s: &[u8], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = prefix;
        loop {
            skip_ws(s, i);
            if *i < s.len() && s[*i] == b'{' {
                *i += 1;
                loop {
                    tree(s, i, path.clone(), out);
                    skip_ws(s, i);
                    match s.get(*i) {
                        Some(b',') => *i += 1,
                        Some(b'}') => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                    skip_ws(s, i);
                    if s.get(*i) == Some(&b'}') {
                        *i += 1;
                        return;
                    }
                }
            }
            match ident(s, i) {
                Some(name) => path.push(name),
                None => break,
            }
            if s.get(*i..*i + 2) == Some(b"::") {
                *i += 2;
            } else {
                break;
            }
        }
        out.push(path);
    }
    let mut out = Vec::new();
    tree(s.as_bytes(), &mut 0, Vec::new(), &mut out);
    out
}

#[test]
fn use_trees_are_read_by_hand() {
    let v = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        use_tree("profile::{db::{A, B}, ncf::C};"),
        vec![v(&["profile", "db", "A"]), v(&["profile", "db", "B"]), v(&["profile", "ncf", "C"])]
    );
    assert_eq!(use_tree("job::JobSpec;"), vec![v(&["job", "JobSpec"])]);
}

/// Every module-to-module import of the library's source (outside comments
/// and before a file's unit tests), as edges between files: `crate::`,
/// `super::` and `self::` paths resolved to the deepest module they name.
/// A module and its own ancestors are not an import (a parent declares and
/// re-exports its children; a child names items of its parent).
/// A module's path, segment by segment.
type ModulePath = Vec<String>;
/// An import: from file index, to file index, and `file:line` where it is named.
type Import = (usize, usize, String);

fn import_edges(src: &Path) -> (Vec<ModulePath>, Vec<Import>) {
    let mut files = files_of(src.parent().unwrap(), "src");
    files.retain(|f| !f.starts_with(src.join("bin")));
    let modules: Vec<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let index = |m: &[String]| modules.iter().position(|x| x.as_slice() == m);
    let mut edges = Vec::new();
    for (from, file) in files.iter().enumerate() {
        let here = &modules[from];
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]") {
                break;
            }
            let code = line.split("//").next().unwrap_or("");
            for (prefix, base) in [
                ("crate::", Vec::new()),
                ("super::", here[..here.len().saturating_sub(1)].to_vec()),
                ("self::", here.clone()),
            ] {
                let mut rest = code;
                while let Some(at) = rest.find(prefix) {
                    let before = rest[..at].chars().last();
                    let tail = &rest[at + prefix.len()..];
                    rest = tail;
                    if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                        continue; // `super::super::x` is read from its first `super::`
                    }
                    for path in use_tree(tail) {
                        let mut full = base.clone();
                        for seg in path {
                            if seg == "super" {
                                full.pop();
                            } else {
                                full.push(seg);
                            }
                        }
                        let to = (0..=full.len()).rev().find_map(|k| index(&full[..k]));
                        if let Some(to) = to {
                            let (a, b) = (here.as_slice(), modules[to].as_slice());
                            if !a.starts_with(b) && !b.starts_with(a) {
                                edges.push((from, to, format!("{}:{}", file.display(), n + 1)));
                            }
                        }
                    }
                }
            }
        }
    }
    (modules, edges)
}

/// No import circle anywhere in the library: the module graph of
/// [`import_edges`] has no cycle (a circle of files that name each other,
/// directly or through others, can only be understood, built and tested
/// together). A found circle is printed with the lines that close it.
#[test]
fn no_import_circle_anywhere_in_the_library() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (modules, edges) = import_edges(&src);
    assert!(modules.len() > 50 && edges.len() > 200, "{} modules, {} imports read", modules.len(), edges.len());
    let n = modules.len();
    let mut adj = vec![Vec::new(); n];
    for (a, b, at) in &edges {
        adj[*a].push((*b, at.clone()));
    }
    // Depth-first search; a grey node met again closes a circle.
    let mut colour = vec![0u8; n];
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut circles = Vec::new();
    fn dfs(
        v: usize,
        adj: &[Vec<(usize, String)>],
        colour: &mut [u8],
        stack: &mut Vec<(usize, String)>,
        circles: &mut Vec<String>,
        modules: &[Vec<String>],
    ) {
        colour[v] = 1;
        for (w, at) in &adj[v] {
            stack.push((v, at.clone()));
            if colour[*w] == 1 {
                let start = stack.iter().position(|(x, _)| x == w).unwrap_or(0);
                let path: Vec<String> =
                    stack[start..].iter().map(|(x, at)| format!("{} ({at})", modules[*x].join("::"))).collect();
                circles.push(format!("{} -> {}", path.join(" -> "), modules[*w].join("::")));
            } else if colour[*w] == 0 {
                dfs(*w, adj, colour, stack, circles, modules);
            }
            stack.pop();
        }
        colour[v] = 2;
    }
    for v in 0..n {
        if colour[v] == 0 {
            dfs(v, &adj, &mut colour, &mut stack, &mut circles, &modules);
        }
    }
    assert!(circles.is_empty(), "import circles:\n{}", circles.join("\n"));
}

/// The circle check finds a circle where there is one: two sibling files
/// naming each other, built here as a tiny source tree.
#[test]
fn the_circle_check_sees_a_planted_circle() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    std::fs::create_dir_all(src.join("p")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod p;\n").unwrap();
    std::fs::write(src.join("p/mod.rs"), "pub mod a;\npub mod b;\npub use a::A;\n").unwrap();
    std::fs::write(src.join("p/a.rs"), "use super::b::B;\npub struct A;\n").unwrap();
    std::fs::write(src.join("p/b.rs"), "use crate::p::{a::A, self};\n// crate::x\npub struct B;\n").unwrap();
    let (modules, edges) = import_edges(&src);
    let named: Vec<(String, String)> =
        edges.iter().map(|(a, b, _)| (modules[*a].join("::"), modules[*b].join("::"))).collect();
    // p::a -> p::b (super::b) and p::b -> p::a (crate::p::a); p::b -> p is its ancestor, not an edge.
    assert_eq!(named, vec![("p::a".to_string(), "p::b".to_string()), ("p::b".to_string(), "p::a".to_string())]);
}

/// The command line (`src/cli/`) is the top floor: the library's other
/// modules, the experiment layer included, never name it.
#[test]
fn only_the_command_line_names_the_command_line() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().trim_end_matches(".rs").to_string();
        if name == "cli" || name == "bin" || name == "lib" {
            continue;
        }
        for file in files_of(&src, &name) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (line, target) in crate_paths(&text) {
                if target == "cli" {
                    offenders.push(format!("{}:{line}", file.display()));
                }
            }
        }
    }
    assert!(offenders.is_empty(), "library modules naming the command line:\n{}", offenders.join("\n"));
}

/// The generic part of building a run names no policy family: what the
/// GENIE, RIFLING or LDWP policies need comes through `Extensions`,
/// `Artefact` and `FamilyKey`, declared in each family's own module, never
/// as a field or branch of `policy/build.rs`.
#[test]
fn the_generic_build_context_names_no_policy_family() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let text = std::fs::read_to_string(src.join("policy/build.rs")).unwrap();
    // The policy modules: every file of src/policy/ but the generic ones
    // (placement rules and the predictor are parts any policy uses).
    let generic = ["build", "mod", "registry", "placement", "placements", "predictor", "config", "queue"];
    let mut families = Vec::new();
    for e in std::fs::read_dir(src.join("policy")).unwrap() {
        let name = e.unwrap().path().file_stem().unwrap().to_string_lossy().to_string();
        if !generic.contains(&name.as_str()) {
            families.push(name);
        }
    }
    assert!(families.iter().any(|f| f == "genie") && families.iter().any(|f| f == "rifling"));
    let mut offenders = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for f in &families {
            if code.contains(&format!("super::{f}::")) || code.contains(&format!("policy::{f}::")) {
                offenders.push(format!("src/policy/build.rs:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(offenders.is_empty(), "the generic build context names a policy family:\n{}", offenders.join("\n"));
}
