//! The device timeline model and its pictures through the CLI: `run --machine`, `--timeline`,
//! machine-file errors. The SVG is read back with the `svg` crate's parser (an independent
//! reader of what we wrote) and its structure checked: lanes, events, legend, axis.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pto-wsp"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One lane as read back: its label and its events' (x, width, y, task or `None` for a merged
/// run).
type LaneRead = (String, Vec<(f64, f64, f64, Option<u32>)>);

/// What the structure check reads from a timeline.
#[derive(Default, Debug)]
struct Picture {
    /// Per lane (in order): label and the events' (x, width, y, task or None for a merged run).
    lanes: Vec<LaneRead>,
    legend: Vec<String>,
    ticks: Vec<u64>,
    plot: (f64, f64),
}

fn num(a: &HashMap<String, svg::node::Value>, k: &str) -> f64 {
    a.get(k).map(|v| v.to_string().parse().unwrap()).unwrap()
}

fn read(path: &Path) -> Picture {
    use svg::node::element::tag::Type;
    use svg::parser::Event;
    let text = std::fs::read_to_string(path).unwrap();
    let mut p = Picture::default();
    let mut in_lane = false;
    let mut width = 0.0;
    for ev in svg::read(&text).unwrap() {
        match ev {
            Event::Tag("svg", Type::Start, a) => width = num(&a, "width"),
            Event::Tag("g", Type::Start, a) => {
                let class = a.get("class").map(|v| v.to_string()).unwrap_or_default();
                if class == "lane" {
                    in_lane = true;
                    let label = a["data-label"].to_string();
                    p.lanes.push((label, Vec::new()));
                } else if class == "legend-item" {
                    p.legend.push(a["data-kernel"].to_string());
                }
            }
            Event::Tag("g", Type::End, _) => in_lane = false,
            Event::Tag("rect", _, a)
                if a.get("class")
                    .is_some_and(|c| c.to_string().as_str() == "event") =>
            {
                assert!(in_lane, "an event outside a lane");
                let task = a.get("data-task").map(|v| v.to_string().parse().unwrap());
                let lane = p.lanes.last_mut().unwrap();
                lane.1
                    .push((num(&a, "x"), num(&a, "width"), num(&a, "y"), task));
            }
            Event::Tag("text", _, a)
                if a.get("class")
                    .is_some_and(|c| c.to_string().as_str() == "tick") =>
            {
                p.ticks.push(a["data-ps"].to_string().parse().unwrap())
            }
            _ => {}
        }
    }
    p.plot = (110.0, width - 20.0);
    p
}

fn check_geometry(p: &Picture) {
    assert!(
        p.ticks.len() >= 2 && p.ticks.windows(2).all(|w| w[0] < w[1]),
        "{:?}",
        p.ticks
    );
    let mut ys = Vec::new();
    for (label, events) in &p.lanes {
        assert!(!label.is_empty());
        let y = events.first().map(|e| e.2);
        for &(x, w, ey, _) in events {
            assert!(
                x >= p.plot.0 - 1e-6 && x + w <= p.plot.1 + 1.0,
                "{label}: x {x} w {w}"
            );
            assert_eq!(Some(ey), y, "{label}: one lane, one band");
        }
        ys.extend(y);
    }
    assert!(
        ys.windows(2).all(|w| w[0] < w[1]),
        "lanes are stacked in order"
    );
}

#[test]
fn a_modelled_run_draws_one_lane_per_core_and_control_thread() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("t.svg");
    let (ok, out, err) = run(&[
        "run",
        "examples/rmsnorm.wsp",
        "--machine",
        "unit",
        "--threads",
        "2",
        "-q",
        "--timeline",
        svg.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("device model: unit, device generation"),
        "{out}"
    );
    assert!(out.contains("device model: unit, host generation"), "{out}");
    let p = read(&svg);
    // The unit machine: 1 orchestrator, 1 scheduler, 2 clusters of 1 AIC + 2 AIV.
    let labels: Vec<&str> = p.lanes.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(
        labels,
        [
            "orchestrator",
            "scheduler 0",
            "AIC 0",
            "AIV 0",
            "AIV 1",
            "AIC 1",
            "AIV 2",
            "AIV 3"
        ]
    );
    check_geometry(&p);
    // Every task ran on exactly one core, drawn once (a small run: nothing merged).
    let tasks: Vec<u32> = p.lanes[2..]
        .iter()
        .flat_map(|l| l.1.iter().map(|e| e.3.expect("one rect per task")))
        .collect();
    let set: BTreeSet<u32> = tasks.iter().copied().collect();
    assert_eq!(tasks.len(), set.len());
    let ran: u32 = out
        .split("ran ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(set, (0..ran).collect());
    // rmsnorm is a vector kernel: the AIC lanes are empty, the AIV lanes busy.
    assert!(p.lanes[2].1.is_empty() && p.lanes[5].1.is_empty());
    assert!(p.lanes[3].1.len() + p.lanes[4].1.len() > 0);
    assert!(!p.lanes[0].1.is_empty() && !p.lanes[1].1.is_empty());
    assert_eq!(p.legend, ["rmsnorm"]);
}

#[test]
fn a_wall_clock_run_draws_one_lane_per_worker() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("w.svg");
    let (ok, out, err) = run(&[
        "run",
        "examples/decode_ragged.wsp",
        "--threads",
        "2",
        "-q",
        "--timeline",
        svg.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    let p = read(&svg);
    let labels: Vec<&str> = p.lanes.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(labels, ["worker 0", "worker 1"]);
    check_geometry(&p);
    assert!(p.lanes.iter().any(|l| !l.1.is_empty()));
    let mut legend = p.legend.clone();
    legend.sort();
    assert_eq!(legend, ["decode_chunk", "merge"], "{legend:?}");
}

#[test]
fn bad_machines_are_named_with_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.toml");
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pto-wsp/machines/unit.toml"
    ))
    .unwrap();
    std::fs::write(&file, unit.replace("schedulers = 1\n", "schedulers = 5\n")).unwrap();
    let line = unit.lines().position(|l| l == "schedulers = 1").unwrap() + 1;
    let (ok, _, err) = run(&[
        "run",
        "examples/rmsnorm.wsp",
        "-q",
        "--machine",
        file.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains(&format!("m.toml:{line}:1: `aicpu.schedulers`")),
        "{err}"
    );
    // A schedule naming no shipped machine: the error points at the name.
    let wsp = dir.path().join("x.wsp");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/rmsnorm.wsp"
    ))
    .unwrap();
    let text = text.replacen(
        "task_graph {",
        "task_graph {\n        trace cycles device(nosuch);",
        1,
    );
    assert!(
        text.contains("device(nosuch)"),
        "the example has a task_graph block"
    );
    std::fs::write(&wsp, &text).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("device(nosuch)"))
        .unwrap()
        + 1;
    let col = text.lines().nth(line - 1).unwrap().find("nosuch").unwrap() + 1;
    let (ok, _, err) = run(&["run", wsp.to_str().unwrap(), "-q"]);
    assert!(!ok);
    assert!(err.contains(&format!("x.wsp:{line}:{col}:")), "{err}");
    assert!(err.contains("ascend910b"), "{err}");
}

#[test]
fn tune_never_reports_worse_than_the_module_and_writes_text_that_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tuned.wsp");
    let (ok, report, err) = run(&[
        "tune",
        "examples/rmsnorm.wsp",
        "--machine",
        "unit",
        "--budget",
        "3",
        "-q",
        "--write",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{report}{err}");
    assert!(report.contains("the module's schedule:"), "{report}");
    // The best first; never worse than the module's (the search starts from it).
    let ratio: f64 = report
        .split("#1: ")
        .nth(1)
        .and_then(|s| s.split('(').nth(1))
        .and_then(|s| s.split('×').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(ratio <= 1.0, "{report}");
    let written = std::fs::read_to_string(&out).unwrap();
    let original = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/rmsnorm.wsp"
    ))
    .unwrap();
    assert!(
        written.contains("// tuned by pto-wsp tune on unit"),
        "{written}"
    );
    // Text outside the schedule is kept as written (its leading comment block, for one).
    let first = original.lines().next().unwrap();
    assert!(first.starts_with("//") && written.starts_with(first));
    let (ok, o, e) = run(&["check", out.to_str().unwrap()]);
    assert!(ok, "{o}{e}");
}
