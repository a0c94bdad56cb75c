//! A first-come, first-served async semaphore: the client's concurrency limit.
//!
//! A plain semaphore lets a task that has just given a permit back take it again at once
//! (its next call is ready before the woken waiter runs), so with more thinkers than permits
//! the same thinkers keep the permits and one persona can wait for the whole burst: in a
//! Lockstep step that persona's chain of calls then runs alone at the end. Here a released
//! permit goes straight to the oldest waiter, and a newcomer queues behind waiters even when a
//! permit is free, so every call waits its turn.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

#[derive(Debug, Default)]
struct State {
    /// Permits nobody holds or has been handed.
    available: usize,
    /// Waiters in arrival order: ticket and the waker of its latest poll.
    queue: VecDeque<(u64, Waker)>,
    /// Tickets handed a permit that their future has not picked up yet.
    granted: HashSet<u64>,
    next_ticket: u64,
}

/// A FIFO semaphore (see the module docs).
#[derive(Debug)]
pub(crate) struct FairSemaphore {
    state: Mutex<State>,
}

impl FairSemaphore {
    /// A semaphore with `permits` permits.
    pub(crate) fn new(permits: usize) -> Self {
        Self {
            state: Mutex::new(State {
                available: permits,
                ..State::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain counters: a panic elsewhere leaves nothing half-done here.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for a permit, behind every earlier waiter.
    pub(crate) fn acquire(&self) -> Acquire<'_> {
        Acquire {
            semaphore: self,
            ticket: None,
        }
    }

    /// Gives one permit back: to the oldest waiter, else to the pool.
    fn release(&self) {
        let waker = {
            let mut state = self.lock();
            match state.queue.pop_front() {
                Some((ticket, waker)) => {
                    state.granted.insert(ticket);
                    Some(waker)
                }
                None => {
                    state.available += 1;
                    None
                }
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The future of [`FairSemaphore::acquire`]; dropping it gives up its place (or passes on a
/// permit it was handed and had not picked up).
pub(crate) struct Acquire<'a> {
    semaphore: &'a FairSemaphore,
    ticket: Option<u64>,
}

impl<'a> Future for Acquire<'a> {
    type Output = FairPermit<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let semaphore = self.semaphore;
        let mut state = semaphore.lock();
        match self.ticket {
            None => {
                if state.queue.is_empty() && state.available > 0 {
                    state.available -= 1;
                    return Poll::Ready(FairPermit { semaphore });
                }
                let ticket = state.next_ticket;
                state.next_ticket = state.next_ticket.wrapping_add(1);
                state.queue.push_back((ticket, cx.waker().clone()));
                drop(state);
                self.ticket = Some(ticket);
                Poll::Pending
            }
            Some(ticket) => {
                if state.granted.remove(&ticket) {
                    drop(state);
                    self.ticket = None;
                    return Poll::Ready(FairPermit { semaphore });
                }
                if let Some(entry) = state.queue.iter_mut().find(|(t, _)| *t == ticket)
                    && !entry.1.will_wake(cx.waker())
                {
                    entry.1 = cx.waker().clone();
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket else { return };
        let handed = {
            let mut state = self.semaphore.lock();
            state.queue.retain(|(t, _)| *t != ticket);
            state.granted.remove(&ticket)
        };
        if handed {
            self.semaphore.release();
        }
    }
}

/// One permit of a [`FairSemaphore`], given back on drop.
#[derive(Debug)]
pub(crate) struct FairPermit<'a> {
    semaphore: &'a FairSemaphore,
}

impl Drop for FairPermit<'_> {
    fn drop(&mut self) {
        self.semaphore.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy::tasks::futures_lite::future::{block_on, poll_once};

    #[test]
    fn permits_go_to_waiters_in_arrival_order_and_never_to_a_newcomer_first() {
        let semaphore = FairSemaphore::new(1);
        let held = block_on(semaphore.acquire());
        let mut first = Box::pin(semaphore.acquire());
        let mut second = Box::pin(semaphore.acquire());
        assert!(block_on(poll_once(first.as_mut())).is_none());
        assert!(block_on(poll_once(second.as_mut())).is_none());
        drop(held);
        // The releaser asking again at once queues behind both waiters.
        let mut again = Box::pin(semaphore.acquire());
        assert!(block_on(poll_once(again.as_mut())).is_none());
        assert!(
            block_on(poll_once(second.as_mut())).is_none(),
            "not its turn"
        );
        let permit = block_on(poll_once(first.as_mut())).expect("first in line");
        drop(permit);
        assert!(block_on(poll_once(again.as_mut())).is_none());
        let permit = block_on(poll_once(second.as_mut())).expect("second in line");
        drop(permit);
        let permit = block_on(poll_once(again.as_mut())).expect("then the newcomer");
        drop(permit);
        assert_eq!(semaphore.lock().available, 1);
    }

    #[test]
    fn a_dropped_waiter_leaves_the_line_and_passes_on_a_handed_permit() {
        let semaphore = FairSemaphore::new(1);
        let held = block_on(semaphore.acquire());
        let mut gone = Box::pin(semaphore.acquire());
        let mut handed = Box::pin(semaphore.acquire());
        let mut next = Box::pin(semaphore.acquire());
        for waiter in [gone.as_mut(), handed.as_mut(), next.as_mut()] {
            assert!(block_on(poll_once(waiter)).is_none());
        }
        drop(gone);
        drop(held);
        // `handed` was given the permit; dropped before it looked, it passes it on.
        drop(handed);
        let permit = block_on(poll_once(next.as_mut())).expect("passed on");
        drop(permit);
        drop(next);
        let state = semaphore.lock();
        assert_eq!(
            (state.available, state.queue.len(), state.granted.len()),
            (1, 0, 0)
        );
    }

    #[test]
    fn many_permits_many_threads_never_exceed_the_limit() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let semaphore = Arc::new(FairSemaphore::new(3));
        let inside = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (semaphore, inside, peak) = (
                    Arc::clone(&semaphore),
                    Arc::clone(&inside),
                    Arc::clone(&peak),
                );
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let _permit = block_on(semaphore.acquire());
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("no panic");
        }
        assert!(peak.load(Ordering::SeqCst) <= 3);
        assert_eq!(semaphore.lock().available, 3);
    }
}
