//! A progress bar on stderr for the long phases of `pto-wsp run` (the run itself, the reference
//! check of the main job).
//!
//! Why: a run of a few seconds with no output looks hung; a bar says what is happening and how
//! far along it is. Promise: nothing is drawn unless stderr is a terminal and the phase has
//! lasted half a second, so short runs, pipes, logs and tests see no bar; the bar's line is
//! cleared when the phase ends, so the report that follows is unchanged.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How long a phase runs before its bar appears.
const DELAY: Duration = Duration::from_millis(500);
/// Time between redraws.
const TICK: Duration = Duration::from_millis(100);
/// Time between looks at whether the phase is over, before the bar appears (a short phase must
/// not be stretched to a tick).
const POLL: Duration = Duration::from_millis(1);

/// One phase's bar.
#[derive(Debug)]
pub struct Bar {
    label: String,
    total: u64,
    start: Instant,
    enabled: bool,
    drawn: bool,
}

impl Bar {
    /// A bar for `label` counting to `total`; drawn only if `enabled` and stderr is a terminal.
    pub fn new(label: &str, total: u64, enabled: bool) -> Bar {
        Bar {
            label: label.to_string(),
            total,
            start: Instant::now(),
            enabled: enabled && std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    /// Redraws the bar at `done` of its total (after the initial delay).
    pub fn update(&mut self, done: u64) {
        if !self.enabled || self.start.elapsed() < DELAY {
            return;
        }
        let line = render(&self.label, done, self.total, self.start.elapsed());
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}");
        let _ = err.flush();
        self.drawn = true;
    }

    /// Clears the bar's line if it was drawn.
    pub fn finish(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{}\r", " ".repeat(78));
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

/// Draws `bar` at `done()` until `finished()` holds, then clears it. Looks often while the bar
/// is not shown yet (so a short phase ends on time), once a tick after.
pub fn watch(bar: &mut Bar, done: impl Fn() -> u64, finished: impl Fn() -> bool) {
    let mut last = Instant::now();
    while !finished() {
        if last.elapsed() >= TICK {
            bar.update(done());
            last = Instant::now();
        }
        std::thread::sleep(if bar.drawn { TICK / 10 } else { POLL });
    }
    bar.finish();
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.finish();
    }
}

/// `run      [##########..........]  50%  1234/2468  1.2 s` (at most 78 columns).
pub fn render(label: &str, done: u64, total: u64, elapsed: Duration) -> String {
    const WIDTH: usize = 30;
    let frac = if total == 0 {
        0.0
    } else {
        (done as f64 / total as f64).clamp(0.0, 1.0)
    };
    let fill = (frac * WIDTH as f64).round() as usize;
    let label: String = label.chars().take(16).collect();
    format!(
        "{label:<16} [{}{}] {:>3.0}%  {done}/{total}  {:.1} s",
        "#".repeat(fill),
        ".".repeat(WIDTH - fill),
        frac * 100.0,
        elapsed.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_fills_in_proportion_and_clamps() {
        let s = render("run", 5, 10, Duration::from_millis(1500));
        assert!(
            s.contains(&format!("[{}{}]", "#".repeat(15), ".".repeat(15))),
            "{s}"
        );
        assert!(
            s.contains(" 50%") && s.contains("5/10") && s.contains("1.5 s"),
            "{s}"
        );
        assert!(render("x", 20, 10, Duration::ZERO).contains("100%"));
        assert!(render("x", 0, 0, Duration::ZERO).contains("  0%"));
    }
}
