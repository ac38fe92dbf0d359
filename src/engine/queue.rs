//! The event queue: events ordered by (time, insertion sequence), in a radix
//! heap (Ahuja, Mehlhorn, Orlin & Tarjan, "Faster algorithms for the
//! shortest path problem", J. ACM 1990).
//!
//! Ties pop first-in first-out, so two runs of one input pop events in the same
//! order (after nexosim's priority queue, asynchronics/nexosim).
//!
//! The engine never schedules an event before the last one popped (its
//! clock only moves forward), which is what a radix heap needs: an event at
//! time `t` waits in bucket `b` = the position of the highest bit in which
//! `t` differs from the last popped time, plus one; every time in bucket `b`
//! is below every time in bucket `b + 1`, and a bucket is split into the
//! lower ones only when it holds the earliest event, so an event moves at
//! most 64 times and each push and pop costs O(1) amortised, on vectors read
//! in order. A binary heap costs O(log n) pops with a cache miss per level,
//! which dominated runs whose heap fills with stale completions (a job
//! preempted millions of times leaves one behind each time). An event
//! pushed before the last popped time (not something the engine does) is
//! still ordered correctly: the queue is rebuilt around it.

use std::collections::VecDeque;

use crate::time::SimTime;

/// Buckets: 0 unused (events at the last popped time wait in `near`), 1..=64.
const BUCKETS: usize = 65;

/// A min-queue of events by (time, insertion order).
pub struct EventQueue<E> {
    /// Every queued time is at least this (the time of the last pop), ms.
    last: u64,
    /// The events at time `last`, by insertion sequence.
    near: VecDeque<(u64, E)>,
    /// (time ms, sequence, event) by the highest bit in which the time
    /// differs from `last`.
    buckets: Vec<Vec<(u64, u64, E)>>,
    /// Each bucket's earliest time (`u64::MAX` when empty).
    bucket_min: [u64; BUCKETS],
    /// The earliest queued time.
    min: Option<u64>,
    len: usize,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

/// The bucket of time `t` relative to `last` (`t > last`).
fn bucket(t: u64, last: u64) -> usize {
    64 - (t ^ last).leading_zeros() as usize
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            last: 0,
            near: VecDeque::new(),
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            bucket_min: [u64::MAX; BUCKETS],
            min: None,
            len: 0,
            next_seq: 0,
        }
    }

    /// An empty queue with room for `n` events.
    pub fn with_capacity(n: usize) -> Self {
        let mut q = Self::new();
        q.near.reserve(n.min(1024));
        q
    }

    /// Schedules `event` at `time`; among events at one time, earlier pushes pop first.
    pub fn push(&mut self, time: SimTime, event: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let t = time.as_ms();
        if t < self.last {
            self.rebase(t);
        }
        self.place(t, seq, event);
        self.len += 1;
        self.min = Some(self.min.map_or(t, |m| m.min(t)));
    }

    /// Files an event (its time at least `last`).
    fn place(&mut self, t: u64, seq: u64, event: E) {
        if t == self.last {
            // Pushes come in sequence order, and every event at `last` is here.
            self.near.push_back((seq, event));
        } else {
            let b = bucket(t, self.last);
            self.buckets[b].push((t, seq, event));
            self.bucket_min[b] = self.bucket_min[b].min(t);
        }
    }

    /// Refiles every event relative to an earlier `last` (a push before the
    /// last pop; never from the engine).
    fn rebase(&mut self, last: u64) {
        let old = self.last;
        let mut all: Vec<(u64, u64, E)> = self.near.drain(..).map(|(s, e)| (old, s, e)).collect();
        for b in &mut self.buckets {
            all.append(b);
        }
        self.bucket_min = [u64::MAX; BUCKETS];
        all.sort_by_key(|&(t, s, _)| (t, s));
        self.last = last;
        for (t, s, e) in all {
            self.place(t, s, e);
        }
    }

    /// The earliest event's time.
    pub fn peek_time(&self) -> Option<SimTime> {
        self.min.map(SimTime::from_ms)
    }

    /// Removes and returns the earliest event.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        if self.len == 0 {
            return None;
        }
        if self.near.is_empty() {
            // Split the first non-empty bucket around its earliest time.
            let i = self.buckets.iter().position(|b| !b.is_empty())?;
            let list = std::mem::take(&mut self.buckets[i]);
            let m = std::mem::replace(&mut self.bucket_min[i], u64::MAX);
            self.last = m;
            let mut here: Vec<(u64, E)> = Vec::new();
            for (t, s, e) in list {
                if t == m {
                    here.push((s, e));
                } else {
                    // Buckets below `i` were empty: refilled here.
                    let b = bucket(t, m);
                    self.buckets[b].push((t, s, e));
                    self.bucket_min[b] = self.bucket_min[b].min(t);
                }
            }
            here.sort_by_key(|&(s, _)| s);
            self.near.extend(here);
        }
        let (_, event) = self.near.pop_front()?;
        self.len -= 1;
        self.min = if !self.near.is_empty() {
            Some(self.last)
        } else {
            self.bucket_min.iter().copied().find(|&m| m != u64::MAX)
        };
        Some((SimTime::from_ms(self.last), event))
    }

    /// Removes and returns the earliest event if it is at `time`.
    pub fn pop_at(&mut self, time: SimTime) -> Option<E> {
        if self.peek_time() == Some(time) { self.pop().map(|(_, e)| e) } else { None }
    }

    /// Number of queued events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no event is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_time_events_pop_in_insertion_order() {
        let mut q = EventQueue::new();
        q.push(SimTime(5), 'c');
        q.push(SimTime(1), 'a');
        q.push(SimTime(5), 'd');
        q.push(SimTime(1), 'b');
        q.push(SimTime(5), 'e');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['a', 'b', 'c', 'd', 'e']);
    }

    #[test]
    fn pops_in_time_then_insertion_order_against_a_sorted_reference() {
        // Random pushes at or after the last popped time (as the engine
        // does), interleaved with pops, and a few before it (the rebuild
        // path); the reference sorts every queued (time, seq).
        let mut q = EventQueue::new();
        let mut reference: Vec<(u64, u64)> = Vec::new();
        let (mut x, mut seq, mut now) = (12345u64, 0u64, 0u64);
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x % 3 != 0 || reference.is_empty() {
                let t = if step % 997 == 0 {
                    now.saturating_sub(x % 50)
                } else {
                    now + [0, 1, 7, 1 << 20, 1 << 40][(x >> 8) as usize % 5] + (x >> 20) % 3
                };
                q.push(SimTime::from_ms(t), seq);
                reference.push((t, seq));
                seq += 1;
            } else {
                reference.sort_unstable();
                let want = reference.remove(0);
                assert_eq!(q.peek_time(), Some(SimTime::from_ms(want.0)));
                let (t, s) = q.pop().unwrap();
                assert_eq!((t.as_ms(), s), want, "step {step}");
                now = t.as_ms();
            }
            assert_eq!(q.len(), reference.len());
        }
        reference.sort_unstable();
        for want in reference {
            let (t, s) = q.pop().unwrap();
            assert_eq!((t.as_ms(), s), want);
        }
        assert!(q.pop().is_none() && q.peek_time().is_none());
    }
}
