//! The persistent worker threads.

/// A pool of worker threads (stub).
#[derive(Debug)]
pub struct WorkerPool {
    threads: usize,
}

impl WorkerPool {
    /// A pool of `threads` workers (0 = every core).
    pub fn new(threads: usize) -> WorkerPool {
        WorkerPool { threads }
    }

    /// Number of workers.
    pub fn threads(&self) -> usize {
        self.threads
    }
}
