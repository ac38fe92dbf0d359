//! The floor plan (`../shared/DESIGN.md` §1): an import only points down,
//! ground floor (ids, time, rng, stats, nn, error, io) → job → cluster → trace →
//! profile → workload (with the options' bounds) → policy → engine → metrics → the top floors
//! (experiment, sweeps, then the command line, `cli`). Read from the library's own source: every
//! `crate::<module>` path outside a comment, in each module of the lower
//! floors, must name a module on its own floor or below.

use std::path::{Path, PathBuf};

/// The library's modules by floor, ground first. Modules not named here are
/// the top floors (experiment and above), which this test does not check.
const FLOORS: &[&[&str]] = &[
    &["ids", "time", "rng", "stats", "nn", "error", "io"],
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
