//! `pto-wsp bench --processes N`: every figure as the median over N processes, with its spread.
//!
//! Why: best-of-N within one process hides how much a figure moves from one process to the
//! next (allocator state, thread placement, the machine's load). [`over_processes`] runs the
//! same `pto-wsp bench` N times as separate processes ([`std::env::current_exe`]) and merges
//! their outputs with [`merge`]: each number that differs between processes becomes
//! `median[min-max]`; numbers equal in every process (task counts, thread counts) are printed
//! as they are. Lines whose words differ between processes (a verdict that flipped) are printed
//! from every process, marked `[process K]`.
//!
//! Promise: the median of an even count is the mean of the two middle values; a figure keeps
//! the number of decimals and the unit suffix (`x`, `%`, `)`, `/ms`) it was printed with; a
//! failed child process is an error naming it, and nothing is printed for a partial set.

use crate::CliError;
use std::process::{Command, Stdio};

/// Set in a child's environment: the child runs one process's bench and prints it.
pub const CHILD_ENV: &str = "PTO_WSP_BENCH_CHILD";

/// The median of `xs` (the mean of the two middle values for an even count); `None` if empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(xs[n / 2]),
        _ => Some((xs[n / 2 - 1] + xs[n / 2]) / 2.0),
    }
}

/// A printed number: its value, its decimals and its unit suffix.
fn number(tok: &str) -> Option<(f64, usize, &str)> {
    let suffix = ["/ms", "x", "%", ")"]
        .into_iter()
        .find(|s| tok.ends_with(s))
        .unwrap_or("");
    let body = &tok[..tok.len() - suffix.len()];
    let digits = body.strip_prefix('-').unwrap_or(body);
    if !digits.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let (int, frac) = match digits.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (digits, None),
    };
    let int_ok = int.chars().all(|c| c.is_ascii_digit() || c == ',');
    let frac_ok = frac.is_none_or(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_digit()));
    if !int_ok || !frac_ok {
        return None;
    }
    let value = body.replace(',', "").parse().ok()?;
    Some((value, frac.map_or(0, str::len), suffix))
}

/// One line from each process merged, or `None` if their words do not line up.
fn merge_line(lines: &[&str]) -> Option<String> {
    let toks: Vec<Vec<&str>> = lines
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    if toks.iter().any(|t| t.len() != toks[0].len()) {
        return None;
    }
    let mut out = Vec::new();
    for col in 0..toks[0].len() {
        let words: Vec<&str> = toks.iter().map(|t| t[col]).collect();
        if words.iter().all(|w| *w == words[0]) {
            out.push(words[0].to_string());
            continue;
        }
        let nums: Vec<_> = words.iter().map(|w| number(w)).collect::<Option<_>>()?;
        let (_, decimals, suffix) = nums[0];
        if nums.iter().any(|n| n.2 != suffix) {
            return None;
        }
        let vals: Vec<f64> = nums.iter().map(|n| n.0).collect();
        let min = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let max = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let med = median(&vals)?;
        out.push(format!(
            "{med:.decimals$}{suffix}[{min:.decimals$}-{max:.decimals$}]"
        ));
    }
    Some(out.join(" "))
}

/// The outputs of several processes of the same bench merged into one text (see the module
/// docs).
pub fn merge(outputs: &[String]) -> String {
    let runs: Vec<Vec<&str>> = outputs.iter().map(|o| o.lines().collect()).collect();
    let n = runs.iter().map(Vec::len).max().unwrap_or(0);
    let mut text = String::new();
    for k in 0..n {
        let lines: Vec<&str> = runs
            .iter()
            .map(|r| r.get(k).copied().unwrap_or(""))
            .collect();
        match merge_line(&lines) {
            Some(m) => {
                let indent = lines[0].len() - lines[0].trim_start().len();
                text.push_str(&" ".repeat(indent));
                text.push_str(&m);
                text.push('\n');
            }
            None => {
                for (i, l) in lines.iter().enumerate() {
                    text.push_str(&format!("[process {}] {l}\n", i + 1));
                }
            }
        }
    }
    text
}

/// Runs this executable with `args` (its own bench arguments) `processes` times, one after the
/// other, and returns the merged output headed by how it was made. Each child's stderr is the
/// caller's; a line per process on stderr gives the load average at its start.
///
/// # Errors
/// A [`CliError`] if this executable cannot be found or started, or a process fails (its
/// output so far is included).
pub fn over_processes(args: &[String], processes: u32) -> Result<String, CliError> {
    let exe = std::env::current_exe().map_err(|e| {
        CliError::plain(format!("bench --processes: cannot find this program: {e}"))
    })?;
    let mut outputs = Vec::new();
    for i in 1..=processes {
        eprintln!(
            "bench: process {i}/{processes} (load average {})",
            load_average().unwrap_or_else(|| "unknown".to_string())
        );
        let o = Command::new(&exe)
            .args(args)
            .env(CHILD_ENV, "1")
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| {
                CliError::plain(format!("bench --processes: cannot start process {i}: {e}"))
            })?;
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        if !o.status.success() {
            return Err(CliError::plain(format!(
                "bench --processes: process {i} of {processes} failed ({}); its output:\n{text}",
                o.status
            )));
        }
        outputs.push(text);
    }
    Ok(format!(
        "# median[min-max] over {processes} processes of: pto-wsp {}\n{}",
        args.join(" "),
        merge(&outputs)
    ))
}

/// The one-minute load average, from `/proc/loadavg` (Linux).
fn load_average() -> Option<String> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    s.split_whitespace().next().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::{median, merge};

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[9.0, 1.0, 5.0]), Some(5.0));
        // Sorted 1, 2, 10, 40: the middle two are 2 and 10.
        assert_eq!(median(&[40.0, 2.0, 10.0, 1.0]), Some(6.0));
    }

    #[test]
    fn numbers_that_move_become_median_and_spread() {
        let outputs = [
            "chain:10: 10 tasks\n      1     12.5    2.00x  ok\n  idle 3.0% done\n",
            "chain:10: 10 tasks\n      1     10.1    1.50x  ok\n  idle 9.0% done\n",
            "chain:10: 10 tasks\n      1     11.0    1.75x  ok\n  idle 6.5% done\n",
        ]
        .map(String::from);
        let text = merge(&outputs);
        // Hand-computed: 12.5, 10.1, 11.0 -> median 11.0, min 10.1, max 12.5; the ratios
        // 2.00, 1.50, 1.75 -> 1.75 [1.50-2.00]; percentages 3.0, 9.0, 6.5 -> 6.5 [3.0-9.0].
        assert_eq!(
            text,
            "chain:10: 10 tasks\n      1 11.0[10.1-12.5] 1.75x[1.50-2.00] ok\n  idle \
             6.5%[3.0-9.0] done\n"
        );
    }

    #[test]
    fn even_counts_thousands_and_lines_that_differ() {
        let outputs = ["a 1,000 ok\nb 4\n", "a 3,000 MISS\nb 8\n"].map(String::from);
        let text = merge(&outputs);
        // `ok` against `MISS`: printed from each process. 4 and 8: median 6.
        assert_eq!(
            text,
            "[process 1] a 1,000 ok\n[process 2] a 3,000 MISS\nb 6[4-8]\n"
        );
        let outputs = ["a 1,000 ok\n", "a 3,000 ok\n"].map(String::from);
        assert_eq!(merge(&outputs), "a 2000[1000-3000] ok\n");
    }
}
