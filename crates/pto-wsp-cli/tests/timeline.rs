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

/// The Chrome trace of a run modelled on a machine: valid trace-event JSON (read back by
/// `serde_json`), the wall clock as process 1 and each modelled run as a further process; every
/// task once on a core of the model with its kernel and regions, at the times the device
/// model's report gives; the control threads' intervals add up to their busy times.
#[test]
fn the_chrome_trace_carries_the_modelled_timeline_beside_the_wall_clock() {
    use pto_wsp_cli::cmd::run::{RunOptions, run as run_module};
    use serde_json::Value;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    // Three `for_each` iterations of two tasks: expander index 2i is `first` on row 2i,
    // 2i + 1 is `second` on row 2i + 1; a barrier task joins each iteration to the next, so
    // graph ids are 0, 1, (barrier 2), 3, 4, (barrier 5), 6, 7: index k has id k + k / 2.
    let text = "tensor A: f32[6, 4];\naxis I = dense(3);\n\
                kernel first(inout a: f32[4]);\nkernel second(inout a: f32[4]);\n\
                workload main() { for_each i in I { \
                task first(A[i * 2, 0 +: 4]); task second(A[i * 2 + 1, 0 +: 4]); } }\n\
                schedule for main { task_graph { trace cycles(700); } }\n";
    let opts = RunOptions {
        threads: 2,
        empty_kernels: true,
        trace: Some(trace.clone()),
        machine: Some("unit".to_string()),
        ..RunOptions::default()
    };
    let out = run_module("t.wsp", text, false, &opts, &mut |_| {}).unwrap();
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(json["displayTimeUnit"], "ns");
    let events = json["traceEvents"].as_array().unwrap();
    // The trace-event format: metadata (`M`) and complete (`X`) events, each with a process;
    // complete events with a track, a name and non-negative microsecond times.
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        assert!(ph == "M" || ph == "X", "{e}");
        assert!(e["pid"].is_u64() && e["name"].is_string(), "{e}");
        if ph == "X" {
            assert!(e["tid"].is_u64(), "{e}");
            assert!(e["ts"].as_f64().unwrap() >= 0.0 && e["dur"].as_f64().unwrap() >= 0.0);
            assert!(e["args"].is_object(), "{e}");
        }
    }
    let meta = |name: &str, pid: u64| -> Vec<(u64, String)> {
        events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == name && e["pid"] == pid)
            .map(|e| {
                (
                    e["tid"].as_u64().unwrap_or(0),
                    e["args"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let process = |pid: u64| meta("process_name", pid).first().map(|p| p.1.clone());
    assert!(process(1).unwrap().contains("wall clock"));
    let device = &out.stats.device;
    assert_eq!(device.len(), 2, "device generation, then host generation");
    assert!(process(2).unwrap().contains("unit (device generation)"));
    assert!(process(3).unwrap().contains("unit (host generation)"));
    assert_eq!(process(4), None);
    let complete = |pid: u64| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["pid"] == pid)
            .collect()
    };
    // The wall clock: the six tasks on the two workers' tracks.
    assert_eq!(
        meta("thread_name", 1),
        [(0, "worker 0".to_string()), (1, "worker 1".to_string())]
    );
    let wall = complete(1);
    let barriers = wall.iter().filter(|e| e["cat"] == "barrier").count();
    assert_eq!(wall.len() - barriers, 6);
    assert!(
        barriers <= 2,
        "the two barrier tasks at most (when a worker ran them)"
    );
    assert!(
        wall.iter()
            .filter(|e| e["cat"] == "barrier")
            .all(|e| e["name"] == "barrier")
    );
    let ps_us = |ps: u64| ps as f64 / 1e6;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    for (k, d) in device.iter().enumerate() {
        let pid = 2 + k as u64;
        let r = &d.report;
        let tracks: HashMap<u64, String> = meta("thread_name", pid).into_iter().collect();
        // Cores by kind, numbered within it: the unit machine's 2 AIC and 4 AIV.
        let mut cores: Vec<&str> = tracks
            .values()
            .filter(|n| n.starts_with("AI"))
            .map(String::as_str)
            .collect();
        cores.sort();
        assert_eq!(
            cores,
            ["AIC 0", "AIC 1", "AIV 0", "AIV 1", "AIV 2", "AIV 3"]
        );
        assert!(tracks.values().any(|n| n == "scheduler 0"));
        assert_eq!(
            tracks.values().any(|n| n == "orchestrator"),
            !d.host_generation
        );
        let evs = complete(pid);
        let tasks: Vec<&&Value> = evs.iter().filter(|e| e["cat"] == "task").collect();
        assert_eq!(tasks.len(), 6, "every task once in the model");
        let mut seen = BTreeSet::new();
        for e in &tasks {
            let index = e["args"]["task"].as_u64().unwrap();
            assert!(seen.insert(index), "task {index} twice");
            let (kernel, row) = if index % 2 == 0 {
                ("first", index)
            } else {
                ("second", index)
            };
            assert_eq!(e["name"], kernel, "{e}");
            assert_eq!(
                e["args"]["regions"],
                serde_json::json!([format!("inout A[{row}, 0 +: 4]")]),
                "{e}"
            );
            // Times: the report's kernel start and end of graph id k + k / 2, after the
            // host's prefix (host generation).
            let id = (index + index / 2) as usize;
            let (start, end) = (d.prefix_ps + d.stats.starts[id], d.prefix_ps + r.ends[id]);
            let ts = e["ts"].as_f64().unwrap();
            let dur = e["dur"].as_f64().unwrap();
            assert!(close(ts, ps_us(start)), "{ts} vs {start} ps");
            assert!(close(ts + dur, ps_us(end)), "{} vs {end} ps", ts + dur);
            assert!(close(dur, 0.7), "700 cycles at 1 GHz: {dur} us");
            // On the track of the core the report names, of its kind.
            let core = &tracks[&e["tid"].as_u64().unwrap()];
            assert_eq!(e["args"]["core"].as_str(), Some(core.as_str()));
            let (kind, first, _, _) = d
                .kinds
                .iter()
                .find(|(_, f, n, _)| (*f..f + n).contains(&r.executor[id]))
                .unwrap();
            assert_eq!(*core, format!("{kind} {}", r.executor[id] - first));
        }
        assert_eq!(seen, (0..6).collect());
        let last = tasks
            .iter()
            .map(|e| e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap())
            .fold(0.0, f64::max);
        assert!(last <= ps_us(d.makespan_ps) + 1e-9);
        // Control threads: 8 tasks (6 and 2 barriers) generated (device generation),
        // dispatched and completed; intervals add up to the report's busy times.
        let sum = |work: &str| -> (usize, f64) {
            let w: Vec<&&Value> = evs.iter().filter(|e| e["name"] == work).collect();
            assert!(w.iter().all(|e| e["cat"] == "control"));
            (w.len(), w.iter().map(|e| e["dur"].as_f64().unwrap()).sum())
        };
        let (generated, gen_us) = sum("generate");
        if d.host_generation {
            assert_eq!(generated, 0);
            let host: Vec<&&Value> = evs
                .iter()
                .filter(|e| e["cat"] == "control" && tracks[&e["tid"].as_u64().unwrap()] == "host")
                .collect();
            assert_eq!(host.len(), 1);
            assert!(close(host[0]["dur"].as_f64().unwrap(), ps_us(d.prefix_ps)));
        } else {
            assert_eq!(generated, 8);
            assert!(close(gen_us, ps_us(r.orchestrator_busy)));
        }
        let (dispatched, d_us) = sum("dispatch");
        let (completed, c_us) = sum("complete");
        assert_eq!((dispatched, completed), (8, 8));
        let busy: u64 = r.scheduler_busy.iter().sum();
        assert!(
            close(d_us + c_us, ps_us(busy)),
            "{} vs {busy} ps",
            d_us + c_us
        );
    }
}

/// The model replays a host-built graph: asked for where no such graph is built (device
/// generation, a pipeline), the run is refused, naming the model and the mode, not run
/// unmodelled.
#[test]
fn the_model_is_refused_where_no_host_graph_is_built() {
    for (file, extra, mode) in [
        (
            "examples/rmsnorm.wsp",
            Some("--device-gen"),
            "device generation",
        ),
        ("examples/csp_pipeline.wsp", None, "a CSP pipeline run"),
    ] {
        let mut args = vec!["run", file, "-q", "--machine", "unit"];
        args.extend(extra);
        let (ok, out, err) = run(&args);
        assert!(!ok, "{out}{err}");
        assert!(
            err.contains("the device timeline model") && err.contains(mode),
            "{err}"
        );
        assert!(out.is_empty(), "nothing ran: {out}");
    }
}

/// Every shipped machine is named where users choose one (`tune --help`, `run --help`) and runs:
/// the help text and the shipped list cannot drift apart.
#[test]
fn every_shipped_machine_is_listed_by_the_help_and_models_a_run() {
    let (ok, tune_help, err) = run(&["tune", "--help"]);
    assert!(ok, "{err}");
    let (ok, run_help, err) = run(&["run", "--help"]);
    assert!(ok, "{err}");
    for name in pto_wsp::machine::shipped_names() {
        assert!(
            tune_help.contains(&format!("`{name}`")),
            "tune --help: {name}"
        );
        assert!(
            run_help.contains(&format!("`{name}`")),
            "run --help: {name}"
        );
        let (ok, out, err) = run(&[
            "run",
            "examples/rmsnorm.wsp",
            "--model-only",
            "-q",
            "--machine",
            name,
        ]);
        assert!(ok, "{name}: {out}{err}");
        assert!(
            out.contains(&format!("device model: {name}, device generation")),
            "{name}: {out}"
        );
    }
}

/// Each task's rectangle with its tooltip and hooks, as read back from an SVG: `data-task`,
/// `data-index`, `data-kernel` and the `<title>` text.
fn task_events(path: &Path) -> Vec<(u32, Option<u32>, Option<String>, String)> {
    use svg::node::element::tag::Type;
    use svg::parser::Event;
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    let mut open: Option<(u32, Option<u32>, Option<String>)> = None;
    let mut in_title = false;
    for ev in svg::read(&text).unwrap() {
        match ev {
            Event::Tag("rect", Type::Start, a) if a.contains_key("data-task") => {
                let get = |k: &str| a.get(k).map(|v| v.to_string());
                open = Some((
                    get("data-task").unwrap().parse().unwrap(),
                    get("data-index").map(|v| v.parse().unwrap()),
                    get("data-kernel"),
                ));
            }
            Event::Tag("title", Type::Start, _) => in_title = true,
            Event::Tag("title", Type::End, _) => in_title = false,
            Event::Text(t) if in_title => {
                if let Some((task, index, kernel)) = open.take() {
                    out.push((task, index, kernel, t.to_string()));
                }
            }
            _ => {}
        }
    }
    out
}

/// The tooltips name each task as the task list does: its expander index, its kernel and its
/// regions. The module: three `for_each` iterations of two tasks, expander index `k` is `first`
/// (k even) or `second` (k odd) on row `k` of `A`, and a barrier task joins each iteration to
/// the next, so graph task ids are `k + k / 2` (they differ from the indices). The expected
/// text is computed from that, not read from the program.
#[test]
fn tooltips_name_each_task_by_index_kernel_and_regions() {
    let dir = tempfile::tempdir().unwrap();
    let wsp = dir.path().join("t.wsp");
    std::fs::write(
        &wsp,
        "tensor A: f32[6, 4];\naxis I = dense(3);\n\
         kernel first(inout a: f32[4]);\nkernel second(inout a: f32[4]);\n\
         workload main() { for_each i in I { \
         task first(A[i * 2, 0 +: 4]); task second(A[i * 2 + 1, 0 +: 4]); } }\n\
         schedule for main { task_graph { trace cycles(700); } }\n",
    )
    .unwrap();
    let expected = |k: u32| {
        let kernel = if k.is_multiple_of(2) {
            "first"
        } else {
            "second"
        };
        (kernel.to_string(), format!("inout A[{k}, 0 +: 4]"))
    };
    for machine in [true, false] {
        let svg = dir.path().join(format!("t{machine}.svg"));
        let mut args = vec![
            "run",
            wsp.to_str().unwrap(),
            "--empty-kernels",
            "--threads",
            "2",
            "-q",
            "--timeline",
            svg.to_str().unwrap(),
        ];
        if machine {
            args.extend(["--machine", "unit"]);
        }
        let (ok, out, err) = run(&args);
        assert!(ok, "{out}{err}");
        let events = task_events(&svg);
        let mut seen = BTreeSet::new();
        for (task, index, kernel, tip) in events {
            let Some(k) = index else {
                // Control work without a task (the host's prefix) or for a barrier task.
                let first = tip.split(',').next().unwrap();
                assert!(
                    first == "a barrier task"
                        || first.starts_with("host")
                        || ["generate", "dispatch", "complete"]
                            .iter()
                            .any(|w| first == format!("{w} a barrier task")),
                    "{tip}"
                );
                continue;
            };
            let (kname, region) = expected(k);
            if machine {
                assert_eq!(task, k + k / 2, "graph id of task #{k}");
            } else {
                assert_eq!(task, k, "a wall-clock span is named by its index");
            }
            assert_eq!(kernel.as_deref(), Some(kname.as_str()), "{tip}");
            let lines: Vec<&str> = tip.lines().collect();
            if lines[0].starts_with(&format!("task #{k} {kname}, ")) {
                // The task itself: its regions follow, one per line.
                assert_eq!(lines[1..], [region.as_str()], "{tip}");
                seen.insert(k);
            } else {
                // Control work for the task: generation, dispatch, completion.
                let work = lines[0].split(' ').next().unwrap();
                assert!(
                    ["generate", "dispatch", "complete"].contains(&work),
                    "{tip}"
                );
                assert!(
                    lines[0].starts_with(&format!("{work} task #{k} {kname}, ")),
                    "{tip}"
                );
            }
        }
        assert_eq!(seen, (0..6).collect(), "machine {machine}: every task once");
    }
}

/// The fenced `.wsp` blocks of a `tune` report, in order (each candidate listed).
fn wsp_blocks(report: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in report.lines() {
        match (line.trim(), &mut cur) {
            ("```wsp", None) => cur = Some(String::new()),
            ("```", Some(_)) => out.push(cur.take().unwrap()),
            (_, Some(c)) => {
                c.push_str(line.strip_prefix("    ").unwrap_or(line));
                c.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// The makespan (ns) a `tune` report line gives after `prefix`, e.g. `#1: 200.7 µs`.
fn report_ns(report: &str, prefix: &str) -> f64 {
    let rest = report
        .lines()
        .find_map(|l| l.trim().strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` in {report}"));
    let mut it = rest.split_whitespace();
    let v: f64 = it.next().unwrap().parse().unwrap();
    let scale = match it.next().unwrap().trim_end_matches(',') {
        "ns" => 1.0,
        "µs" | "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        u => panic!("unit {u}"),
    };
    v * scale
}

/// `tune` varies the dispatch key and a threshold's bound, and finds the best choice an
/// independent calculation gives. On the unit machine (4 AIV, 2 AIC; a task holds its core
/// for s_d + d + u + c + f + s_c = 10 + 150 + 100,000 + 200 + 10 = 100,370 ns; generation
/// 100 ns a task): 12 equal tasks `k(i)`, the module's key `affinity(z)` puts all of them on one
/// core (`z` is always 0) and its `dispatch_threshold(i) { below 12: vector, else: cube }`
/// sends all to the vector cores: 100 + 12 × 100,370 ns. The best any schedule can do is two
/// rounds: 8 tasks on the 4 AIV and 4 on the 2 AIC, i.e. the bound `below 8` and a key
/// spreading `i` (max(⌈N/4⌉, ⌈(12 − N)/2⌉) is 2 only at N = 8); the keyed placement
/// `affinity(i)` over 4 executors does it (as does stealing, `dispatch work_steal` or `ready
/// work_steal`, which ties). Every candidate printed parses, validates and runs.
#[test]
fn tune_finds_the_balancing_dispatch_key_and_threshold_bound() {
    let dir = tempfile::tempdir().unwrap();
    let wsp = dir.path().join("k.wsp");
    let text = "tensor A: f32[12, 64];\naxis Z = dense(1);\naxis I = dense(12);\n\
                kernel k(inout a: f32[64]);\n\
                workload main() { parallel_for z in Z { parallel_for i in I { \
                task k(A[i, 0 +: 64]); } } }\n\
                // the schedule to tune\n\
                schedule for main {\n    executors 4;\n    dispatch affinity(z);\n    \
                dispatch_threshold(i) { below 12: vector, else: cube };\n    \
                task_graph { trace cycles(100000); }\n}\n";
    std::fs::write(&wsp, text).unwrap();
    let out = dir.path().join("best.wsp");
    let (ok, report, err) = run(&[
        "tune",
        wsp.to_str().unwrap(),
        "--machine",
        "unit",
        "--budget",
        "20",
        "--top",
        "10",
        "-q",
        "--write",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{report}{err}");
    // The space names the keys and the bound it varies.
    assert!(report.contains("dispatch "), "{report}");
    assert!(
        report.contains("dispatch_threshold(i) bound 0 13"),
        "{report}"
    );
    let hold = 10.0 + 150.0 + 100_000.0 + 200.0 + 10.0;
    // Makespans are printed to 4 significant digits.
    let own = report_ns(&report, "the module's schedule:");
    let hand = 100.0 + 12.0 * hold;
    assert!((own - hand).abs() <= hand * 5e-4, "{own} ns\n{report}");
    let blocks = wsp_blocks(&report);
    assert_eq!(blocks.len(), 10, "{report}");
    let listed: Vec<f64> = (1..=10)
        .map(|k| report_ns(&report, &format!("#{k}:")))
        .collect();
    let two_rounds = |ns: f64| ns >= 2.0 * hold * (1.0 - 5e-4) && ns <= 2.0 * hold + 12.0 * 110.0;
    assert!(two_rounds(listed[0]), "{}\n{report}", listed[0]);
    // The best bound is the one the calculation gives (nothing reaches two rounds with another),
    // and the keyed placement that balances (`affinity(i)` over 4 executors) is among the best.
    for (ns, b) in listed.iter().zip(&blocks) {
        if two_rounds(*ns) {
            assert!(b.contains("below 8: vector"), "{b}");
        }
    }
    assert!(
        listed
            .iter()
            .zip(&blocks)
            .any(|(ns, b)| two_rounds(*ns) && b.contains("dispatch affinity(i);")),
        "{report}"
    );
    // Every printed candidate, put in place of the module's schedule, checks and runs.
    let at = text.find("schedule for").unwrap();
    for (n, b) in blocks.iter().enumerate() {
        let cand = dir.path().join(format!("c{n}.wsp"));
        std::fs::write(&cand, format!("{}{b}", &text[..at])).unwrap();
        let (ok, o, e) = run(&["check", cand.to_str().unwrap()]);
        assert!(ok, "candidate {n}: {o}{e}\n{b}");
        let (ok, o, e) = run(&[
            "run",
            cand.to_str().unwrap(),
            "--model-only",
            "-q",
            "--machine",
            "unit",
        ]);
        assert!(ok, "candidate {n}: {o}{e}");
    }
    // The written module keeps the comment outside the schedule and reads back.
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(written.contains("// the schedule to tune"), "{written}");
    assert!(written.contains("below 8: vector"), "{written}");
    let (ok, o, e) = run(&["check", out.to_str().unwrap()]);
    assert!(ok, "{o}{e}");
}

/// A kernel's tier bound is a dimension whose candidates are the real cuts of the parameter's
/// values: `examples/tiered.wsp` decodes requests of 512, 1800, 4096, 8192, 10000 and 12000
/// tokens, so `seq <= K` can put 0 … 6 of them below: K ∈ {511, 512, 1800, 4096, 8192, 10000,
/// 12000}: 6 values besides the module's 2048 (which splits as 1800 does, so 1800 is left
/// out); 6 besides its 8192.
#[test]
fn tune_varies_a_kernel_tier_bound_over_the_cuts_of_its_parameter() {
    let (ok, report, err) = run(&[
        "tune",
        "examples/tiered.wsp",
        "--machine",
        "unit",
        "--budget",
        "5",
        "--top",
        "2",
        "-q",
    ]);
    assert!(ok, "{report}{err}");
    assert!(
        report.contains("tier `seq <= 2048` of kernel attn 7"),
        "{report}"
    );
    assert!(
        report.contains("tier `seq <= 8192` of kernel attn 7"),
        "{report}"
    );
    for b in wsp_blocks(&report) {
        assert!(b.contains("schedule for serve"), "{b}");
    }
}

/// The truth of a tier condition as printed (`n < 8`, `8 > n`, `n >= 0 && n < 8`, `!(n >= 8)`,
/// `n * 2 < 16`, names `n` and `limit`) at `n`: a small evaluator written for the test,
/// independent of the format's.
fn holds(cond: &str, n: i64, limit: i64) -> bool {
    fn tokens(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        let cs: Vec<char> = s.chars().collect();
        let mut i = 0;
        while i < cs.len() {
            let c = cs[i];
            if c.is_whitespace() {
                i += 1;
            } else if c.is_alphanumeric() || c == '_' {
                let j = (i..cs.len())
                    .find(|&j| !(cs[j].is_alphanumeric() || cs[j] == '_'))
                    .unwrap_or(cs.len());
                out.push(cs[i..j].iter().collect());
                i = j;
            } else {
                let two: String = cs[i..(i + 2).min(cs.len())].iter().collect();
                if ["<=", ">=", "&&", "||", "==", "!="].contains(&two.as_str()) {
                    out.push(two);
                    i += 2;
                } else {
                    out.push(c.to_string());
                    i += 1;
                }
            }
        }
        out
    }
    // Precedence climbing over ints (booleans as 0 / 1).
    fn expr(t: &[String], p: &mut usize, min: u8, n: i64, l: i64) -> i64 {
        let mut a = unary(t, p, n, l);
        while let Some(op) = t.get(*p) {
            let prec = match op.as_str() {
                "||" => 1,
                "&&" => 2,
                "<" | "<=" | ">" | ">=" | "==" | "!=" => 3,
                "+" | "-" => 4,
                "*" | "/" => 5,
                _ => break,
            };
            if prec < min {
                break;
            }
            let op = op.clone();
            *p += 1;
            let b = expr(t, p, prec + 1, n, l);
            a = match op.as_str() {
                "||" => i64::from(a != 0 || b != 0),
                "&&" => i64::from(a != 0 && b != 0),
                "<" => i64::from(a < b),
                "<=" => i64::from(a <= b),
                ">" => i64::from(a > b),
                ">=" => i64::from(a >= b),
                "==" => i64::from(a == b),
                "!=" => i64::from(a != b),
                "+" => a + b,
                "-" => a - b,
                "*" => a * b,
                _ => a / b,
            };
        }
        a
    }
    fn unary(t: &[String], p: &mut usize, n: i64, l: i64) -> i64 {
        let tok = t[*p].clone();
        *p += 1;
        match tok.as_str() {
            "!" => i64::from(unary(t, p, n, l) == 0),
            "-" => -unary(t, p, n, l),
            "(" => {
                let v = expr(t, p, 0, n, l);
                assert_eq!(t[*p], ")");
                *p += 1;
                v
            }
            "n" => n,
            "limit" => l,
            lit => lit.trim_end_matches('u').parse().expect(lit),
        }
    }
    let t = tokens(cond);
    let mut p = 0;
    let v = expr(&t, &mut p, 0, n, limit);
    assert_eq!(p, t.len(), "{cond}");
    v != 0
}

/// `tune` moves a kernel's tier bound in every form the format allows, and finds the split an
/// independent calculation gives. On the unit machine (4 AIV, 2 AIC; a task holds its core for
/// 100,370 ns, as above) 12 tasks `k(.., n)`, n = 0 … 11; the tier condition sends a task to
/// `kv` (`@vector`) when it holds, else to `kc` (`@cube`). Written so that all 12 go to the
/// vector cores (3 rounds), the best any schedule can do is 2 rounds, reached only with exactly
/// 8 tasks on the vector cores (max(⌈V/4⌉, ⌈(12 − V)/2⌉) = 2 only at V = 8). Each comparison
/// is a dimension of 13 values (12 distinct values of `n`: 13 real cuts, the module's own
/// among them); the best schedules' conditions, evaluated here at n = 0 … 11, hold for 8.
#[test]
fn tune_moves_tier_bounds_of_every_form_to_the_hand_computed_split() {
    let dir = tempfile::tempdir().unwrap();
    // (condition as written, its comparisons as the space names them)
    let forms: [(&str, &[&str]); 10] = [
        ("n < 12", &["n < 12"]),
        ("n <= 11", &["n <= 11"]),
        ("12 > n", &["12 > n"]),
        ("11 >= n", &["11 >= n"]),
        ("n > -1", &["n > -1"]),
        ("n < limit", &["n < limit"]),
        ("limit - 1 >= n", &["limit - 1 >= n"]),
        ("n * 2 < 2 * limit", &["n * 2 < 2 * limit"]),
        ("!(n >= limit)", &["n >= limit"]),
        ("n >= 0 && n < limit", &["n >= 0", "n < limit"]),
    ];
    let hold = 10.0 + 150.0 + 100_000.0 + 200.0 + 10.0;
    for (cond, comparisons) in forms {
        let wsp = dir.path().join("t.wsp");
        let text = format!(
            "symbol limit: i64;\ntensor A: f32[12, 64];\naxis I = dense(12);\n\
             kernel kv(inout a: f32[64], n: i64) @vector;\n\
             kernel kc(inout a: f32[64], n: i64) @cube;\n\
             kernel k(inout a: f32[64], n: i64) tiers {{ {cond} => kv, else => kc }};\n\
             workload main() {{ parallel_for i in I {{ task k(A[i, 0 +: 64], i); }} }}\n\
             schedule for main {{\n    executors 4;\n    \
             task_graph {{ trace cycles(100000); }}\n}}\n"
        );
        std::fs::write(&wsp, &text).unwrap();
        let (ok, report, err) = run(&[
            "tune",
            wsp.to_str().unwrap(),
            "--machine",
            "unit",
            "--bind",
            "limit=12",
            "--budget",
            "4",
            "--top",
            "5",
            "-q",
        ]);
        assert!(ok, "{cond}: {report}{err}");
        for c in comparisons {
            assert!(
                report.contains(&format!("tier `{c}`")) && report.contains("of kernel k 13"),
                "{cond}: the dimension of `{c}`\n{report}"
            );
        }
        let own = report_ns(&report, "the module's schedule:");
        assert!(
            own >= 3.0 * hold * (1.0 - 5e-4) && own <= 3.0 * hold + 12.0 * 110.0,
            "{cond}: {own} ns\n{report}"
        );
        let two_rounds = |ns: f64| ns >= 2.0 * hold * (1.0 - 5e-4) && ns <= 2.0 * hold + 1320.0;
        let best = report_ns(&report, "#1:");
        assert!(two_rounds(best), "{cond}: {best} ns\n{report}");
        for (k, b) in wsp_blocks(&report).iter().enumerate() {
            if !two_rounds(report_ns(&report, &format!("#{}:", k + 1))) {
                continue;
            }
            let printed = b
                .lines()
                .find_map(|l| l.trim().strip_suffix("=> kv,"))
                .unwrap_or_else(|| panic!("{cond}: no tier case in\n{b}"));
            let vector = (0..12).filter(|&n| holds(printed, n, 12)).count();
            assert_eq!(vector, 8, "{cond}: `{printed}`\n{report}");
        }
    }
}

/// The candidates' runs print nothing: a module whose output keeps a row no task writes warns
/// once per run (`pto-wsp run`), but `tune` counts the warning over its candidates and reports
/// it once, with the number of candidates that gave it (all of them here: every schedule runs
/// the same tasks).
#[test]
fn tune_reports_candidate_warnings_once_counted() {
    let dir = tempfile::tempdir().unwrap();
    let wsp = dir.path().join("w.wsp");
    std::fs::write(
        &wsp,
        "tensor O: f32[13, 64];\naxis I = dense(12);\nkernel k(out o: f32[64]);\n\
         workload main() { parallel_for i in I { task k(O[i, 0 +: 64]); } }\n\
         schedule for main {\n    executors 4;\n    task_graph { trace cycles(1000); }\n}\n",
    )
    .unwrap();
    let w = wsp.to_str().unwrap();
    let (ok, _, err) = run(&["run", w, "--model-only", "-q", "--machine", "unit"]);
    assert!(ok, "{err}");
    let warning = "output tensor `O` was not fully written";
    assert_eq!(err.matches(warning).count(), 1, "{err}");
    let (ok, report, err) = run(&["tune", w, "--machine", "unit", "--budget", "2", "-q"]);
    assert!(ok, "{report}{err}");
    assert!(
        !err.contains(warning),
        "a candidate printed its warning:\n{err}"
    );
    let head = report.lines().next().unwrap();
    let modelled: usize = head
        .split(" distinct schedule(s) modelled")
        .next()
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{head}"));
    assert!(modelled > 1, "{report}");
    assert!(
        report.contains(&format!(
            "{modelled} of {modelled} modelled candidate(s) warned:"
        )),
        "{report}"
    );
    let line = report
        .lines()
        .find(|l| l.contains(warning))
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(
        line.trim(),
        format!(
            "{modelled} × warning: {warning}: no task wrote its elements [12:13, 0:64] \
             (64 of 832); they keep what the tensor held before the run"
        ),
        "{report}"
    );
    assert_eq!(report.matches(warning).count(), 1, "{report}");
}
