//! The Chrome trace-event format (Perfetto, `chrome://tracing`) as a run's trace uses it:
//! processes and tracks with names and a fixed order, and complete events with their `args`.
//!
//! Why apart from what goes into the trace ([`super::trace`]): the format's rules (metadata
//! events, microsecond times, JSON escaping) are one concern, written once. Promises: the text
//! is one JSON object `{"traceEvents": [...], "displayTimeUnit": "ns"}`; every string is escaped
//! by `serde_json`; times are microseconds (`ts`, `dur`), as the format defines them; tracks
//! appear in Perfetto in the order they were declared.

use serde::Serialize;
use serde_json::{Map, Value, json};

/// One complete (`"ph": "X"`) event.
#[derive(Serialize)]
struct Complete<'a> {
    name: &'a str,
    cat: &'a str,
    ph: &'static str,
    pid: u32,
    tid: u32,
    ts: f64,
    dur: f64,
    args: &'a Map<String, Value>,
}

/// A trace being written: declare processes and tracks, add events, then [`Trace::finish`].
pub(crate) struct Trace {
    out: String,
    events: usize,
}

impl Trace {
    /// An empty trace.
    pub(crate) fn new() -> Trace {
        Trace {
            out: String::from("{\"traceEvents\":["),
            events: 0,
        }
    }

    fn push(&mut self, event: &impl Serialize) {
        if self.events > 0 {
            self.out.push(',');
        }
        self.events += 1;
        // Serialising plain strings, numbers and maps cannot fail.
        self.out
            .push_str(&serde_json::to_string(event).unwrap_or_default());
    }

    /// Process `pid`, named `name`, shown at place `pid` among the processes.
    pub(crate) fn process(&mut self, pid: u32, name: &str) {
        self.push(&json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}));
        self.push(&json!({"name": "process_sort_index", "ph": "M", "pid": pid,
            "args": {"sort_index": pid}}));
    }

    /// Track `tid` of process `pid`, named `name`, shown at place `tid` in its process.
    pub(crate) fn track(&mut self, pid: u32, tid: u32, name: &str) {
        self.push(
            &json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                "args": {"name": name}}),
        );
        self.push(
            &json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
            "args": {"sort_index": tid}}),
        );
    }

    /// A complete event on track `tid` of process `pid` from `start_us` for `dur_us`
    /// (microseconds), in category `cat`, with `args`.
    pub(crate) fn complete(
        &mut self,
        (pid, tid): (u32, u32),
        name: &str,
        cat: &str,
        start_us: f64,
        dur_us: f64,
        args: &Map<String, Value>,
    ) {
        self.push(&Complete {
            name,
            cat,
            ph: "X",
            pid,
            tid,
            ts: start_us,
            dur: dur_us,
            args,
        });
    }

    /// The trace's text.
    pub(crate) fn finish(mut self) -> String {
        self.out.push_str("],\"displayTimeUnit\":\"ns\"}");
        self.out
    }
}

/// Nanoseconds as the format's microseconds.
pub(crate) fn us_of_ns(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// Picoseconds as the format's microseconds.
pub(crate) fn us_of_ps(ps: u64) -> f64 {
    ps as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_the_text_is_one_json_object() {
        let mut t = Trace::new();
        t.process(1, "a \"quoted\"\nname");
        t.track(1, 0, "worker\\0");
        let mut args = Map::new();
        args.insert("regions".into(), json!(["in Q[0, 0 +: 4]"]));
        t.complete((1, 0), "k\t", "task", 1.5, 0.25, &args);
        let v: Value = serde_json::from_str(&t.finish()).unwrap();
        let events = v["traceEvents"].as_array().unwrap();
        assert_eq!(events.len(), 5);
        assert_eq!(events[0]["args"]["name"], "a \"quoted\"\nname");
        assert_eq!(events[2]["args"]["name"], "worker\\0");
        assert_eq!(events[4]["name"], "k\t");
        assert_eq!(events[4]["ts"], 1.5);
        assert_eq!(events[4]["dur"], 0.25);
        assert_eq!(events[4]["args"]["regions"][0], "in Q[0, 0 +: 4]");
        assert_eq!(v["displayTimeUnit"], "ns");
    }
}
