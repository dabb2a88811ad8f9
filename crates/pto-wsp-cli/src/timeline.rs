//! A picture of a run (`pto-wsp run --timeline OUT.svg`): one lane per worker for a wall-clock
//! run; one per orchestrator, scheduler thread and core for a run modelled on a machine.
//!
//! Why: a makespan says how long; a timeline says why (idle cores, a busy orchestrator, a tail).
//! Promises: events are coloured by kernel (a legend names each kernel with its task count and
//! busy time), a time axis runs along the top and bottom, every event wide enough to see is one
//! rectangle with a tooltip naming its task as `pto-wsp expand` and the Chrome trace do (its
//! index in the expander's order, its kernel, its times, then its regions with their accesses;
//! control work says what it does for which task), and narrower events of one lane are merged
//! into runs of one kernel (a tooltip counts them), so the file stays a few megabytes however
//! many tasks ran. Machine-readable hooks for tests and tools: `class="lane"` with `data-lane`,
//! `class="event"` with `data-task` (the run's task id) or `data-tasks` (a merged run's count)
//! and, for one task, `data-index` (its expander index) and `data-kernel`; `class="legend-item"`
//! with `data-kernel`; `class="tick"`. Written with the `svg` crate.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use pto_wsp::cpu::{DeviceRun, RunStats};
use pto_wsp::driver::trace::TaskText;
use svg::Document;
use svg::node::element::{Group, Line, Rectangle, Text, Title};

use crate::{CliError, fmt_ps};

/// One bar of a lane.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Start (picoseconds from the run's start).
    pub start: u64,
    /// End.
    pub end: u64,
    /// The kernel (index into [`Timeline::kernels`]), `None` for control work (grey).
    pub kernel: Option<u32>,
    /// The task (the run's task id).
    pub task: u32,
    /// Its index in the expander's order (`u32::MAX`: a barrier, or not known).
    pub index: u32,
    /// Control work done for the task (`generate`, `dispatch`, `complete`), `None` for the
    /// task itself.
    pub work: Option<&'static str>,
    /// Drawn faint (generation of the task, not the task itself).
    pub faint: bool,
}

/// A lane: a label and its events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lane {
    /// What the lane is (`worker 0`, `AIC 3`, `scheduler 1`).
    pub label: String,
    /// Its events.
    pub events: Vec<Event>,
}

/// What a picture shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// The title line.
    pub title: String,
    /// The lanes, top to bottom.
    pub lanes: Vec<Lane>,
    /// Kernel names.
    pub kernels: Vec<String>,
    /// The end of the axis (picoseconds).
    pub end: u64,
    /// What the tooltips say of each task, by expander index (kernel and regions); a task
    /// without one is named by its kernel alone.
    pub texts: HashMap<u32, TaskText>,
}

const LANE_H: f64 = 12.0;
const GAP: f64 = 2.0;
const LABEL_W: f64 = 110.0;
const TOP: f64 = 48.0;

/// Colours: Okabe–Ito, then Tableau 10, then golden-angle hues.
fn colour(k: usize) -> String {
    const PALETTE: [&str; 18] = [
        "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000",
        "#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F", "#EDC948", "#B07AA1", "#FF9DA7",
        "#9C755F", "#BAB0AC",
    ];
    match PALETTE.get(k) {
        Some(c) => (*c).to_string(),
        None => format!("hsl({:.0}, 60%, 55%)", (k as f64 * 137.508) % 360.0),
    }
}

/// Lanes of a wall-clock run: one per worker; `kernel_of` gives a task's kernel (by the span's
/// task index).
pub fn of_wall(
    name: &str,
    stats: &RunStats,
    threads: usize,
    kernels: &[String],
    kernel_of: impl Fn(u32) -> Option<u32>,
) -> Timeline {
    let workers = threads.max(stats.per_worker.len()).max(1);
    let mut lanes: Vec<Lane> = (0..workers)
        .map(|w| Lane {
            label: format!("worker {w}"),
            events: Vec::new(),
        })
        .collect();
    let t0 = stats.spans.iter().map(|s| s.start_ns).min().unwrap_or(0);
    let mut end = 0;
    for s in &stats.spans {
        let w = s.worker as usize;
        if w >= lanes.len() {
            lanes.resize_with(w + 1, Lane::default);
            lanes[w].label = format!("worker {w}");
        }
        let (a, b) = (
            (s.start_ns - t0) * 1000,
            (s.end_ns.max(s.start_ns) - t0) * 1000,
        );
        end = end.max(b);
        lanes[w].events.push(Event {
            start: a,
            end: b,
            kernel: kernel_of(s.task),
            task: s.task,
            index: s.task,
            work: None,
            faint: false,
        });
    }
    Timeline {
        title: format!(
            "{name}: wall clock on {workers} worker thread(s), {}",
            fmt_ps(end)
        ),
        lanes,
        kernels: kernels.to_vec(),
        end,
        texts: HashMap::new(),
    }
}

/// Task `t`'s kernel in a modelled run (`None` for a barrier).
fn kernel_of(d: &DeviceRun, t: u32) -> Option<u32> {
    d.task_kernel
        .get(t as usize)
        .copied()
        .filter(|&k| k != u32::MAX)
}

/// Task `t`'s index in the expander's order (its id when not known).
fn index_of(d: &DeviceRun, t: u32) -> u32 {
    d.task_index.get(t as usize).copied().unwrap_or(t)
}

/// Lanes of a modelled run: orchestrators, scheduler threads, then each cluster's cores.
pub fn of_device(name: &str, d: &DeviceRun) -> Timeline {
    let mut lanes = control_lanes(d);
    lanes.extend(core_lanes(d));
    let generation = if d.host_generation {
        "host generation"
    } else {
        "device generation"
    };
    Timeline {
        title: format!(
            "{name}: modelled on {} ({generation}), makespan {}",
            d.machine,
            fmt_ps(d.makespan_ps)
        ),
        lanes,
        kernels: d.kernel_names.clone(),
        end: d.makespan_ps,
        texts: HashMap::new(),
    }
}

/// The control lanes of a modelled run: the orchestrator (device generation), the host's
/// prefix (host generation), each scheduler thread.
fn control_lanes(d: &DeviceRun) -> Vec<Lane> {
    let r = &d.report;
    let shift = d.prefix_ps;
    let control = |i: &pto_wsp::cpu::sim::Interval, kernel: Option<u32>, faint: bool| Event {
        start: i.start + shift,
        end: i.end + shift,
        kernel,
        task: i.task,
        index: index_of(d, i.task),
        work: Some(i.work.name()),
        faint,
    };
    let mut lanes = Vec::new();
    if d.orchestrators > 0 {
        lanes.push(Lane {
            label: "orchestrator".to_string(),
            events: r
                .generation
                .iter()
                .map(|i| control(i, kernel_of(d, i.task), true))
                .collect(),
        });
    }
    if d.prefix_ps > 0 {
        lanes.push(Lane {
            label: "host".to_string(),
            events: vec![Event {
                start: 0,
                end: d.prefix_ps,
                kernel: None,
                task: 0,
                index: u32::MAX,
                work: Some("host generation, upload and launch"),
                faint: false,
            }],
        });
    }
    for (s, iv) in r.scheduling.iter().enumerate() {
        lanes.push(Lane {
            label: format!("scheduler {s}"),
            events: iv.iter().map(|i| control(i, None, false)).collect(),
        });
    }
    lanes
}

/// One lane per core of a modelled run, grouped by cluster (each kind's cores of a cluster in
/// the order of [`DeviceRun::kinds`]), each with the tasks it ran.
fn core_lanes(d: &DeviceRun) -> Vec<Lane> {
    let mut cores: BTreeMap<u32, Lane> = BTreeMap::new();
    let mut order = Vec::new();
    let clusters = d.kinds.iter().map(|k| k.2).min().unwrap_or(0).max(1);
    for c in 0..clusters {
        for (name, first, count, _) in d.kinds.iter() {
            let per = count / clusters;
            for j in 0..per {
                let e = first + c * per + j;
                order.push(e);
                let label = format!("{name} {}", c * per + j);
                cores.insert(
                    e,
                    Lane {
                        label,
                        events: Vec::new(),
                    },
                );
            }
        }
    }
    for (t, &e) in d.report.executor.iter().enumerate() {
        let Some(k) = kernel_of(d, t as u32) else {
            continue;
        };
        if let Some(l) = cores.get_mut(&e) {
            l.events.push(Event {
                start: d.stats.starts[t] + d.prefix_ps,
                end: d.report.ends[t] + d.prefix_ps,
                kernel: Some(k),
                task: t as u32,
                index: index_of(d, t as u32),
                work: None,
                faint: false,
            });
        }
    }
    let mut lanes = Vec::new();
    for e in order {
        if let Some(mut l) = cores.remove(&e) {
            l.events.sort_by_key(|x| x.start);
            lanes.push(l);
        }
    }
    lanes
}

/// Tick spacing of 1, 2 or 5 × 10^k giving 8–12 ticks over `end`.
fn tick_step(end: u64) -> u64 {
    let mut step = 1u64;
    loop {
        for m in [1, 2, 5] {
            let s = step * m;
            if end / s <= 12 {
                return s;
            }
        }
        step *= 10;
    }
}

/// Each kernel's colour and name.
struct Palette<'t> {
    kernels: &'t [String],
    colours: Vec<String>,
}

impl Palette<'_> {
    /// Colours by kernel name order, stable across runs of one module.
    fn new(kernels: &[String]) -> Palette<'_> {
        let mut by_name: Vec<usize> = (0..kernels.len()).collect();
        by_name.sort_by(|a, b| kernels[*a].cmp(&kernels[*b]));
        let mut colours = vec![String::new(); kernels.len()];
        for (i, k) in by_name.iter().enumerate() {
            colours[*k] = colour(i);
        }
        Palette { kernels, colours }
    }

    fn name(&self, k: u32) -> String {
        self.kernels
            .get(k as usize)
            .cloned()
            .unwrap_or_else(|| format!("kernel #{k}"))
    }

    /// A kernel's colour; control work is grey.
    fn colour(&self, k: Option<u32>) -> String {
        match k {
            Some(k) => self
                .colours
                .get(k as usize)
                .cloned()
                .unwrap_or_else(|| "#888".into()),
            None => "#999999".to_string(),
        }
    }
}

/// The legend's entries: each kernel with its task count and busy time, busiest first.
fn legend_entries(t: &Timeline) -> Vec<(u32, u64, u64)> {
    let mut per_kernel: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for l in &t.lanes {
        for e in l.events.iter().filter(|e| !e.faint) {
            if let Some(k) = e.kernel {
                let s = per_kernel.entry(k).or_default();
                s.0 += 1;
                s.1 += e.end - e.start;
            }
        }
    }
    let mut legend: Vec<(u32, u64, u64)> =
        per_kernel.iter().map(|(&k, &(n, b))| (k, n, b)).collect();
    legend.sort_by_key(|&(k, _, b)| (std::cmp::Reverse(b), k));
    legend
}

/// The SVG text of `t`, `width` pixels for the plot.
pub fn render(t: &Timeline, width: f64) -> String {
    let end = t.end.max(1);
    let x = |ps: u64| LABEL_W + ps as f64 / end as f64 * width;
    let plot_h = t.lanes.len() as f64 * (LANE_H + GAP);
    let legend = legend_entries(t);
    let palette = Palette::new(&t.kernels);
    let legend_rows = legend.len().div_ceil(4);
    let height = TOP + plot_h + 30.0 + legend_rows as f64 * 16.0 + 10.0;
    let total_w = LABEL_W + width + 20.0;
    let mut doc = Document::new()
        .set("viewBox", (0, 0, total_w, height))
        .set("width", total_w)
        .set("height", height)
        .set("font-family", "sans-serif")
        .set("font-size", 10)
        .add(
            Rectangle::new()
                .set("width", total_w)
                .set("height", height)
                .set("fill", "white"),
        )
        .add(
            Text::new(t.title.clone())
                .set("x", 4)
                .set("y", 14)
                .set("font-size", 13)
                .set("class", "title"),
        )
        .add(axis(end, plot_h, &x));
    for (i, lane) in t.lanes.iter().enumerate() {
        doc = doc.add(lane_group(t, i, lane, &x, &palette));
    }
    doc.add(legend_group(&legend, TOP + plot_h + 30.0, width, &palette))
        .to_string()
}

/// The time axis: grid lines and labels, top and bottom, over a plot `plot_h` high.
fn axis(end: u64, plot_h: f64, x: &dyn Fn(u64) -> f64) -> Group {
    let step = tick_step(end);
    let mut axis = Group::new().set("class", "axis");
    let mut at = 0;
    while at <= end {
        let px = x(at);
        axis = axis
            .add(
                Line::new()
                    .set("x1", px)
                    .set("x2", px)
                    .set("y1", TOP - 4.0)
                    .set("y2", TOP + plot_h)
                    .set("stroke", "#ddd"),
            )
            .add(
                Text::new(fmt_ps(at))
                    .set("x", px)
                    .set("y", TOP - 8.0)
                    .set("text-anchor", "middle")
                    .set("class", "tick")
                    .set("data-ps", at),
            )
            .add(
                Text::new(fmt_ps(at))
                    .set("x", px)
                    .set("y", TOP + plot_h + 12.0)
                    .set("text-anchor", "middle"),
            );
        at += step;
    }
    axis
}

/// Lane `i`: its label and its events (narrow ones merged), each with a tooltip.
fn lane_group(
    t: &Timeline,
    i: usize,
    lane: &Lane,
    x: &dyn Fn(u64) -> f64,
    palette: &Palette<'_>,
) -> Group {
    let y = TOP + i as f64 * (LANE_H + GAP);
    let mut g = Group::new()
        .set("class", "lane")
        .set("data-lane", i)
        .set("data-label", lane.label.clone())
        .add(
            Text::new(lane.label.clone())
                .set("x", 4)
                .set("y", y + LANE_H - 2.0)
                .set("class", "lane-label"),
        );
    for r in merged(&lane.events, x) {
        g = g.add(event_rect(t, &r, y, palette));
    }
    g
}

/// One drawn run at height `y`: a rectangle in its kernel's colour with its tooltip and the
/// machine-readable hooks (see the module docs).
fn event_rect(t: &Timeline, r: &Run, y: f64, palette: &Palette<'_>) -> Rectangle {
    let mut rect = Rectangle::new()
        .set("x", r.x0)
        .set("y", y)
        .set("width", (r.x1 - r.x0).max(0.5))
        .set("height", LANE_H)
        .set("fill", palette.colour(r.kernel))
        .set("class", "event");
    if r.faint {
        rect = rect.set("fill-opacity", 0.4);
    }
    let kname = |k: u32| palette.name(k);
    let tip = if r.count == 1 {
        rect = rect.set("data-task", r.task);
        let (tip, kernel) = tooltip(t, r, &kname);
        if r.index != u32::MAX {
            rect = rect.set("data-index", r.index);
        }
        if let Some(k) = kernel {
            rect = rect.set("data-kernel", k);
        }
        tip
    } else {
        rect = rect.set("data-tasks", r.count);
        let what = r.kernel.map_or_else(|| "control".to_string(), kname);
        format!(
            "{} tasks of {what}, {}–{}",
            r.count,
            fmt_ps(r.start),
            fmt_ps(r.end)
        )
    };
    rect.add(Title::new(tip))
}

/// The legend, four entries a row from height `ly`.
fn legend_group(legend: &[(u32, u64, u64)], ly: f64, width: f64, palette: &Palette<'_>) -> Group {
    let mut lg = Group::new().set("class", "legend");
    for (i, (k, n, busy)) in legend.iter().enumerate() {
        let (cx, cy) = (
            LABEL_W + (i % 4) as f64 * (width / 4.0),
            ly + (i / 4) as f64 * 16.0,
        );
        lg = lg.add(
            Group::new()
                .set("class", "legend-item")
                .set("data-kernel", palette.name(*k))
                .add(
                    Rectangle::new()
                        .set("x", cx)
                        .set("y", cy - 9.0)
                        .set("width", 10)
                        .set("height", 10)
                        .set("fill", palette.colour(Some(*k))),
                )
                .add(
                    Text::new(format!(
                        "{} — {n} task(s), {} busy",
                        palette.name(*k),
                        fmt_ps(*busy)
                    ))
                    .set("x", cx + 14.0)
                    .set("y", cy),
                ),
        );
    }
    lg
}

/// The tooltip of one event (its first line: what, which task, when; then one line per region)
/// and the kernel it names.
fn tooltip(t: &Timeline, r: &Run, kname: &dyn Fn(u32) -> String) -> (String, Option<String>) {
    let text = t.texts.get(&r.index);
    let kernel = text
        .map(|x| x.kernel.clone())
        .or_else(|| r.kernel.map(kname));
    let task = (r.index != u32::MAX).then(|| match &kernel {
        Some(k) => format!("task #{} {k}", r.index),
        None => format!("task #{}", r.index),
    });
    let head = match (r.work, task) {
        (Some(w), Some(task)) => format!("{w} {task}"),
        (Some(w), None) if w.starts_with("host") => w.to_string(),
        (Some(w), None) => format!("{w} a barrier task"),
        (None, Some(task)) => task,
        (None, None) => "a barrier task".to_string(),
    };
    let mut tip = format!("{head}, {}–{}", fmt_ps(r.start), fmt_ps(r.end));
    if r.work.is_none()
        && let Some(x) = text
    {
        for region in &x.regions {
            tip.push('\n');
            tip.push_str(region);
        }
    }
    (tip, kernel)
}

/// A drawn rectangle: one event, or a run of narrow events of one kernel.
struct Run {
    x0: f64,
    x1: f64,
    start: u64,
    end: u64,
    kernel: Option<u32>,
    faint: bool,
    task: u32,
    index: u32,
    work: Option<&'static str>,
    count: u64,
}

/// Events of one lane as rectangles, merging those narrower than a pixel with a neighbour of
/// the same kernel.
fn merged(events: &[Event], x: &dyn Fn(u64) -> f64) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for e in events {
        let (x0, x1) = (x(e.start), x(e.end));
        let narrow = x1 - x0 < 1.0;
        if narrow
            && let Some(last) = out.last_mut()
            && (last.kernel == e.kernel || (e.faint && last.faint))
            && last.faint == e.faint
            && x0 - last.x1 < 1.0
        {
            last.x1 = last.x1.max(x1);
            last.end = last.end.max(e.end);
            last.count += 1;
            continue;
        }
        out.push(Run {
            x0,
            x1,
            start: e.start,
            end: e.end,
            kernel: e.kernel,
            faint: e.faint,
            task: e.task,
            index: e.index,
            work: e.work,
            count: 1,
        });
    }
    out
}

/// Writes `svg` to `path` whole (a temporary file beside it, renamed), or not at all.
pub fn write(path: &Path, svg: &str) -> Result<(), CliError> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let fail =
        |e: &dyn std::fmt::Display| CliError::plain(format!("--timeline {}: {e}", path.display()));
    let mut f = tempfile::NamedTempFile::new_in(dir).map_err(|e| fail(&e))?;
    f.write_all(svg.as_bytes()).map_err(|e| fail(&e))?;
    let file = f.persist(path).map_err(|e| fail(&e.error))?;
    // A picture is for sharing: readable by others, as a plainly written file would be.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(|e| fail(&e))?;
    }
    #[cfg(not(unix))]
    drop(file);
    Ok(())
}
