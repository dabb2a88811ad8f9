//! Notifications between simulated devices of one process (`SY_NOTIFY`, `SY_WAIT_NOTIFY`).
//!
//! Why: multi-chip programs exchange notifications; several devices run in one process here,
//! each with its control thread, and a notification is a count per (sender, receiver, id): a
//! notify adds one, a wait takes one (waiting while there is none), so a notification sent
//! before its wait is not lost and one sent every pass of a loop is waited for every pass.
//!
//! Promise: a wait never hangs. When every device is waiting for a notification nobody has
//! sent, or has finished, no notification can come: every waiter fails with an error naming
//! who waits for what.

use super::RunError;
use pto_wsp_graph::sync::{Condvar, Mutex, lock, wait};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Running,
    /// Waiting for notification `id` from device `from`.
    Waiting {
        from: u32,
        id: u32,
    },
    Finished,
    Failed,
}

struct Inner {
    counts: HashMap<(u32, u32, u32), u64>,
    states: Vec<State>,
}

/// The devices of one run and their notifications.
pub struct Fabric {
    inner: Mutex<Inner>,
    cv: Condvar,
}

impl Fabric {
    /// `devices` devices, all running.
    pub fn new(devices: usize) -> Fabric {
        Fabric {
            inner: Mutex::new(Inner {
                counts: HashMap::new(),
                states: vec![State::Running; devices],
            }),
            cv: Condvar::new(),
        }
    }

    fn device(&self, inner: &Inner, d: u32, role: &str) -> Result<(), RunError> {
        if d as usize >= inner.states.len() {
            return Err(RunError::Notify(format!(
                "{role} device {d}, but the run has {} device(s)",
                inner.states.len()
            )));
        }
        Ok(())
    }

    /// Device `from` notifies device `to` with `id`.
    pub fn notify(&self, from: u32, to: u32, id: u32) -> Result<(), RunError> {
        let mut g = lock(&self.inner);
        self.device(&g, to, "SY_NOTIFY names")?;
        *g.counts.entry((from, to, id)).or_default() += 1;
        drop(g);
        self.cv.notify_all();
        Ok(())
    }

    /// Device `me` waits for notification `id` from device `from`.
    pub fn wait(&self, me: u32, from: u32, id: u32) -> Result<(), RunError> {
        let mut g = lock(&self.inner);
        self.device(&g, from, "SY_WAIT_NOTIFY names")?;
        loop {
            if let Some(n) = g.counts.get_mut(&(from, me, id))
                && *n > 0
            {
                *n -= 1;
                g.states[me as usize] = State::Running;
                return Ok(());
            }
            g.states[me as usize] = State::Waiting { from, id };
            if let Some(why) = Self::stuck(&g) {
                g.states[me as usize] = State::Failed;
                drop(g);
                self.cv.notify_all();
                return Err(RunError::Deadlock(why));
            }
            g = wait(&self.cv, g);
        }
    }

    /// Why no device can make progress, if so.
    fn stuck(g: &Inner) -> Option<String> {
        let mut waits = Vec::new();
        for (d, s) in g.states.iter().enumerate() {
            match *s {
                State::Running => return None,
                State::Waiting { from, id } => {
                    if g.counts.get(&(from, d as u32, id)).copied().unwrap_or(0) > 0 {
                        return None;
                    }
                    let theirs = match g.states.get(from as usize) {
                        Some(State::Finished) => " (which has finished)",
                        Some(State::Failed) => " (which has stopped)",
                        _ => "",
                    };
                    waits.push(format!(
                        "device {d} waits for notification {id} from device {from}{theirs}"
                    ));
                }
                State::Finished | State::Failed => {}
            }
        }
        Some(format!(
            "devices wait for notifications nobody will send: {}",
            waits.join("; ")
        ))
    }

    /// Device `me` has finished (or failed): waiters re-check whether anything can come.
    pub fn finish(&self, me: u32, ok: bool) {
        let mut g = lock(&self.inner);
        g.states[me as usize] = if ok { State::Finished } else { State::Failed };
        drop(g);
        self.cv.notify_all();
    }
}
