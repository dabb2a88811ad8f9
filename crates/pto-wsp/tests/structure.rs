//! The workspace's structural invariants, as `ARCHITECTURE.md` ("Invariants") states them:
//! which crate may depend on which, which crates touch files or print, and where the task
//! runtime's atomics and locks may come from.
//!
//! These read the workspace's manifests and sources as text, so a change that breaks an
//! invariant fails here with the file and line that breaks it, not in review.

use std::fs;
use std::path::{Path, PathBuf};

/// The workspace's `crates/` directory.
fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the facade lives in crates/")
        .to_path_buf()
}

/// The layer of each workspace crate, from the bottom up: a crate may depend only on crates of
/// a lower layer (the order of `ARCHITECTURE.md`'s code map).
const LAYERS: &[(&str, u32)] = &[
    ("pto-wsp-ir", 0),
    ("pto-wsp-graph", 1),
    ("pto-wsp-kernels", 1),
    ("pto-wsp-bytecode", 1),
    ("pto-wsp-pde", 2),
    ("pto-wsp-cpu", 2),
    ("pto-wsp-ptog", 3),
    ("pto-wsp-backends", 4),
    ("pto-wsp", 5),
    ("pto-wsp-cli", 6),
    ("pto-wsp-py", 6),
];

/// Dependencies a crate must not have even though the layers would allow them.
const ABSENT: &[(&str, &str)] = &[
    ("pto-wsp-kernels", "pto-wsp-graph"),
    ("pto-wsp-pde", "pto-wsp-graph"),
    ("pto-wsp-py", "pto-wsp-cli"),
];

fn layer(name: &str) -> u32 {
    LAYERS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, l)| *l)
        .unwrap_or_else(|| {
            panic!(
                "crate `{name}` is not in LAYERS: add it there and to ARCHITECTURE.md's code map"
            )
        })
}

/// Every workspace crate: (package name, manifest text).
fn manifests() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(crates_dir()).expect("crates/ is readable") {
        let path = entry.expect("a directory entry").path().join("Cargo.toml");
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{}: no package name", path.display()))
            .to_string();
        out.push((name, text));
    }
    assert!(
        out.len() >= 8,
        "found only {} crates under crates/",
        out.len()
    );
    out
}

/// The workspace crates named in the `[dependencies]` (and target-specific dependencies)
/// sections of a manifest; development dependencies are not counted.
fn runtime_deps(manifest: &str) -> Vec<String> {
    let mut section = String::new();
    let mut deps = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        let normal = section == "[dependencies]"
            || (section.starts_with("[target.") && section.ends_with(".dependencies]"));
        if !normal || !line.starts_with("pto-wsp") {
            continue;
        }
        let name: String = line
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        deps.push(name);
    }
    deps
}

#[test]
fn no_dependency_runs_up_or_sideways() {
    let mut wrong = Vec::new();
    for (name, text) in manifests() {
        for dep in runtime_deps(&text) {
            if layer(&dep) >= layer(&name) {
                wrong.push(format!("{name} depends on {dep}, which is not below it"));
            }
            if ABSENT.contains(&(name.as_str(), dep.as_str())) {
                wrong.push(format!("{name} depends on {dep}, which it must not"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Lines of the `.rs` files under `crates/<krate>/src` (files named in `skip` left out) that
/// contain one of `needles`, outside comments, as `path:line: text`.
fn uses(krate: &str, skip: &[&str], needles: &[&str]) -> Vec<String> {
    let src = crates_dir().join(krate).join("src");
    let mut hits = Vec::new();
    for path in rust_files(&src) {
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        if skip.contains(&file) {
            continue;
        }
        let text = fs::read_to_string(&path).expect("a readable source file");
        for (i, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if needles.iter().any(|n| code.contains(n)) {
                hits.push(format!("{}:{}: {}", path.display(), i + 1, code));
            }
        }
    }
    hits
}

#[test]
fn no_library_crate_touches_files_or_prints() {
    let needles = [
        "std::fs",
        "use std::fs",
        "File::open",
        "File::create",
        "println!",
        "eprintln!",
        "print!(",
        "eprint!(",
    ];
    let front_ends = ["pto-wsp-cli", "pto-wsp-py"];
    let mut hits = Vec::new();
    for (name, _) in manifests() {
        if front_ends.contains(&name.as_str()) {
            continue;
        }
        // The loom models (test code, built only under `--cfg loom`) print their execution counts.
        hits.extend(uses(&name, &["loom_models.rs"], &needles));
    }
    assert!(
        hits.is_empty(),
        "library code touching files or printing:\n{}",
        hits.join("\n")
    );
}

#[test]
fn no_atomic_or_lock_of_the_runtime_outside_the_sync_doors() {
    let needles = [
        "std::sync::atomic",
        "std::sync::Mutex",
        "std::sync::Condvar",
        "std::sync::RwLock",
        "std::sync::{",
        "std::sync::mpsc",
        "std::thread::spawn",
        "parking_lot",
    ];
    // `sync.rs` is each crate's door; `loom_models.rs` (built only under `--cfg loom`) counts
    // executions of a model from outside it with a `std` atomic, on purpose.
    let mut hits = uses("pto-wsp-graph", &["sync.rs"], &needles);
    hits.extend(uses(
        "pto-wsp-cpu",
        &["sync.rs", "loom_models.rs"],
        &needles,
    ));
    assert!(
        hits.is_empty(),
        "synchronisation that loom cannot see (use the crate's `sync` module):\n{}",
        hits.join("\n")
    );
}

#[test]
fn kernel_bodies_and_plan_generators_are_resolved_only_in_resolve() {
    // `Compiled::resolve` is the one way from the names of an expression to slots; the names
    // `rows(x)` / `cols(x)` of region extents are made and read by `extent_name` /
    // `parse_extent`. Only these files may call them: where `Compiled` and the extent names are
    // defined, the resolver of bodies and the parser (which makes extent names).
    let allowed = [
        "pto-wsp-ir/src/eval.rs",
        "pto-wsp-ir/src/kernel_body.rs",
        "pto-wsp-ir/src/resolve/body.rs",
        "pto-wsp-ir/src/parse/mod.rs",
    ];
    let mut hits = Vec::new();
    for (name, _) in manifests() {
        hits.extend(uses(
            &name,
            &[],
            &["Compiled::resolve(", "parse_extent(", "extent_name("],
        ));
    }
    hits.retain(|h| !allowed.iter().any(|a| h.contains(a)));
    // A reader of the resolved forms reads no operand, statement or generator statement by
    // name, and keeps no table from names.
    // (`kernel_body.rs`, home of the cycle walk, also defines and prints the surface form.)
    let body = ["InstArg::", "GenKind::", "HashMap<String", "HashSet<String"];
    // The validator checks the resolved statements, not the written ones (the emitter walks
    // the written ones beside them, as the keys of the device plans).
    let validator = [
        "InstArg::",
        "KStmtKind::",
        "HashMap<String",
        "HashSet<String",
    ];
    // The plan runner evaluates nothing by name: no evaluator over names (`ir::eval`), no
    // environment of names (`Env`), no search of the plan's items by tier.
    let plan = [
        "ir::eval::",
        "Env for",
        "kernels.iter().find(",
        "GenKind::",
        "HashMap<String",
    ];
    // The device passes that key their plans by the written statements (`check`, `alloc`,
    // `sync`) read every operand through its slot: no tile scope of their own, no operand read
    // by name, no name compared.
    let device = [
        "InstArg",
        "tile_name(",
        "name.name ==",
        "scope",
        "HashMap<String",
        "HashSet<String",
    ];
    let readers: [(&str, &str, &[&str]); 9] = [
        ("pto-wsp-kernels", "lang.rs", &body),
        ("pto-wsp-backends", "kernel.rs", &body),
        ("pto-wsp", "device.rs", &body),
        ("pto-wsp", "src/plan.rs", &plan),
        // Plans as task batches: the same generator, and the workspace size from the slot form.
        ("pto-wsp", "plan/tasks.rs", &plan),
        // The validator of bodies checks the resolved body: resolution reports its names.
        ("pto-wsp-ir", "validate/kernel_body.rs", &validator),
        ("pto-wsp-ir", "device/check.rs", &device),
        ("pto-wsp-ir", "device/alloc.rs", &device),
        ("pto-wsp-ir", "device/sync.rs", &device),
    ];
    for (krate, file, needles) in readers {
        let found = uses(krate, &[], needles);
        hits.extend(found.into_iter().filter(|h| {
            h.split(':')
                .next()
                .is_some_and(|p| p.ends_with(&format!("/{file}")))
        }));
    }
    assert!(
        hits.is_empty(),
        "names resolved outside `pto-wsp-ir/src/resolve/` (read the resolved body or \
         generator instead):\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_checks_above_can_fail() {
    // The scanners find what they look for: the sync doors themselves use `std` atomics, and
    // the CLI prints.
    assert!(!uses("pto-wsp-graph", &[], &["std::sync::atomic"]).is_empty());
    assert!(!uses("pto-wsp-cli", &[], &["println!"]).is_empty());
    // The resolver of bodies is where names become slots.
    assert!(!uses("pto-wsp-ir", &[], &["Compiled::resolve("]).is_empty());
    // The written form's operands name their tiles (what the device passes no longer read).
    assert!(!uses("pto-wsp-ir", &[], &["tile_name("]).is_empty());
    assert_eq!(
        runtime_deps(
            "[dependencies]\npto-wsp-ir.workspace = true\n[dev-dependencies]\npto-wsp = 1\n"
        ),
        vec!["pto-wsp-ir".to_string()]
    );
}
