//! A first-in first-out queue kept as one vector and a read position, for the per-task queues of
//! a device-generation executor (its ready tasks, its unsealed tasks, the edges handed to it).
//!
//! Why: those queues take one push and one pop per task. `VecDeque` pays for its ring on every
//! access (the physical index wraps, `front` and `pop_front` test and wrap the head); these
//! queues empty often (a run's ready queue between two tasks, the handed edges at every seal),
//! so a vector read from a moving position, rewound whenever it empties, does the same work
//! with a plain indexed load. Memory is bounded like the ring's: when at least half of a full
//! vector that does not empty has been read, a push moves the unread part to the front instead
//! of growing it.
//!
//! Promise: the values come out in the order they went in, each once, exactly as from a
//! `VecDeque` driven by the same calls (the unit tests check it against one).

/// A FIFO of `T` in one vector: `items[head..]` are queued, oldest first.
#[derive(Debug)]
pub(crate) struct Fifo<T> {
    items: Vec<T>,
    head: usize,
}

impl<T> Default for Fifo<T> {
    fn default() -> Self {
        Fifo {
            items: Vec::new(),
            head: 0,
        }
    }
}

impl<T: Copy> Fifo<T> {
    /// The oldest value, if any.
    #[inline(always)]
    pub(crate) fn front(&self) -> Option<&T> {
        self.items.get(self.head)
    }

    /// Takes the oldest value, if any.
    #[inline(always)]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let v = *self.items.get(self.head)?;
        self.head += 1;
        if self.head == self.items.len() {
            self.items.clear();
            self.head = 0;
        }
        Some(v)
    }

    /// Queues `v` last.
    #[inline(always)]
    pub(crate) fn push_back(&mut self, v: T) {
        if self.items.len() == self.items.capacity() && self.head * 2 >= self.items.len() {
            self.compact();
        }
        self.items.push(v);
    }

    /// Queues every value of `from` last, in order, leaving `from` empty (its memory is
    /// swapped in whole when this queue is empty: no copy).
    pub(crate) fn append(&mut self, from: &mut Vec<T>) {
        if from.is_empty() {
            return;
        }
        if self.items.is_empty() {
            std::mem::swap(&mut self.items, from);
            return;
        }
        if self.head * 2 >= self.items.len() {
            self.compact();
        }
        self.items.append(from);
    }

    /// How many values are queued.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.items.len() - self.head
    }

    /// Whether nothing is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head == self.items.len()
    }

    /// Drops every value, keeping the memory.
    pub(crate) fn clear(&mut self) {
        self.items.clear();
        self.head = 0;
    }

    /// Moves the queued values to the front of the vector. Called only when at least half of
    /// the vector has been read, so the moves cost at most one per value pushed.
    #[cold]
    #[inline(never)]
    fn compact(&mut self) {
        self.items.drain(..self.head);
        self.head = 0;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Fifo;
    use std::collections::VecDeque;

    /// A fixed pseudo-random stream (xorshift), so the test is repeatable.
    fn stream(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn any_mix_of_calls_gives_what_a_vecdeque_gives() {
        for seed in 1..40u64 {
            let mut next = stream(seed);
            let (mut f, mut d) = (Fifo::<u32>::default(), VecDeque::<u32>::new());
            let mut n = 0u32;
            for _ in 0..4_000 {
                match next() % 7 {
                    0..=2 => {
                        f.push_back(n);
                        d.push_back(n);
                        n += 1;
                    }
                    3 | 4 => assert_eq!(f.pop_front(), d.pop_front()),
                    5 => {
                        let k = (next() % 9) as u32;
                        let mut v: Vec<u32> = (n..n + k).collect();
                        n += k;
                        d.extend(v.iter().copied());
                        f.append(&mut v);
                        assert!(v.is_empty());
                    }
                    _ => {
                        if next().is_multiple_of(50) {
                            f.clear();
                            d.clear();
                        }
                    }
                }
                assert_eq!(f.front(), d.front());
                assert_eq!(f.len(), d.len());
                assert_eq!(f.is_empty(), d.is_empty());
            }
            while let Some(v) = d.pop_front() {
                assert_eq!(f.pop_front(), Some(v));
            }
            assert_eq!(f.pop_front(), None);
        }
    }

    #[test]
    fn a_queue_that_never_empties_stays_bounded() {
        let mut f = Fifo::<u32>::default();
        f.push_back(0);
        for i in 1..100_000u32 {
            f.push_back(i);
            assert_eq!(f.pop_front(), Some(i - 1));
        }
        assert_eq!(f.len(), 1);
        assert!(f.items.capacity() <= 16, "{}", f.items.capacity());
    }
}
