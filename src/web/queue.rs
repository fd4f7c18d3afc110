//! Diagnoses that the answer cache does not hold run on threads of their own, one per
//! core, which take them strictly in the order they came.
//!
//! A new diagnosis of a large knowledge base costs milliseconds of CPU. Run on the
//! async workers, it held up every other connection of its worker, and the pastes
//! that came meanwhile were taken in whatever order the runtime woke their
//! connections: under load, a paste that just missed a turn waited a whole round of
//! the queue again, so the slowest waited twice as long as the typical one. Here the
//! async workers only read requests and write answers, and a paste waits exactly for
//! those that came before it.
//!
//! A paste whose request is gone before its turn (the request timeout passed, the
//! client hung up) is not diagnosed at all.
//!
//! The hand-over costs some tens of microseconds (waking a thread, and the async
//! worker again for the answer): a tenth of a new diagnosis of a knowledge base of a
//! hundred entries, which takes a few hundred microseconds. So a diagnosis goes to the
//! queue only when the recent ones took a millisecond or more ([`RecentCost`]), or the
//! paste is long; cheaper ones run at once on the async worker.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use super::AppError;

/// A new diagnosis is queued when recent ones took this long on average...
pub const QUEUED_COST: Duration = Duration::from_millis(1);
/// ...or when its paste is this long (parsing alone takes about a millisecond).
pub const QUEUED_BYTES: usize = 128 << 10;

/// The CPU time this thread has used so far: unlike the clock, it does not count the
/// time other threads and processes took the core (under load, most of it).
pub fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to; the clock exists on every Linux
    // and BSD (on failure `t` stays zero, and the cost reads as nothing).
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// How much CPU time recent new diagnoses took: a moving average (each new one weighs an
/// eighth), in microseconds. Updated without locks; a lost update among racing ones
/// does not matter to an average.
#[derive(Debug, Default)]
pub struct RecentCost(AtomicU32);

impl RecentCost {
    pub fn record(&self, took: Duration) {
        let took = took.as_micros().min(u32::MAX as u128) as i64;
        let mean = self.0.load(Ordering::Relaxed) as i64;
        let next = mean + (took - mean) / 8;
        self.0
            .store(next.clamp(0, u32::MAX as i64) as u32, Ordering::Relaxed);
    }

    pub fn mean(&self) -> Duration {
        Duration::from_micros(self.0.load(Ordering::Relaxed) as u64)
    }

    /// Whether a new diagnosis of `bytes` of text is worth a turn on the queue.
    pub fn queues(&self, bytes: usize) -> bool {
        bytes >= QUEUED_BYTES || self.mean() >= QUEUED_COST
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The diagnosis threads and the queue they take work from, first come first served.
/// Threads are started with the first piece of work and end when the last clone of
/// the queue is dropped.
#[derive(Clone)]
pub struct WorkQueue {
    inner: Arc<Inner>,
}

struct Inner {
    threads: usize,
    sender: std::sync::OnceLock<crossbeam_channel::Sender<Job>>,
    /// Work run to its end so far (its own `Arc`: queued work holds it, and must not
    /// hold the sender).
    finished: Arc<AtomicU64>,
}

impl std::fmt::Debug for WorkQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("threads", &self.inner.threads)
            .field("waiting", &self.waiting())
            .finish()
    }
}

impl WorkQueue {
    /// A queue served by `threads` threads (at least one).
    pub fn new(threads: usize) -> WorkQueue {
        WorkQueue {
            inner: Arc::new(Inner {
                threads: threads.max(1),
                sender: std::sync::OnceLock::new(),
                finished: Arc::default(),
            }),
        }
    }

    /// Work waiting for a thread (not counting the work the threads are doing).
    pub fn waiting(&self) -> usize {
        self.inner.sender.get().map_or(0, |s| s.len())
    }

    /// Work the threads have run to its end so far (skipped work not counted).
    pub fn finished(&self) -> u64 {
        self.inner.finished.load(Ordering::Relaxed)
    }

    /// Runs `work` on the queue's threads once the work queued before it has started,
    /// and waits for its result. If the caller stops waiting (its request timed out or
    /// its client went away) before `work` starts, `work` never runs.
    pub async fn run<R: Send + 'static>(
        &self,
        work: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, AppError> {
        let (reply, answer) = oneshot::channel();
        let finished = self.inner.finished.clone();
        let job: Job = Box::new(move || {
            if reply.is_closed() {
                return;
            }
            // A panic is a bug; the thread survives it, and the request gets a 500
            // (the dropped `reply`) instead of a closed connection.
            let result = catch_unwind(AssertUnwindSafe(work));
            finished.fetch_add(1, Ordering::Relaxed);
            if let Ok(result) = result {
                let _ = reply.send(result);
            }
        });
        if self.sender()?.send(job).is_err() {
            return Err(gone());
        }
        answer.await.map_err(|_| gone())
    }

    fn sender(&self) -> Result<&crossbeam_channel::Sender<Job>, AppError> {
        if let Some(sender) = self.inner.sender.get() {
            return Ok(sender);
        }
        let (sender, receiver) = crossbeam_channel::unbounded::<Job>();
        if self.inner.sender.set(sender).is_ok() {
            for n in 0..self.inner.threads {
                let receiver = receiver.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("errbook-diagnose-{n}"))
                    .spawn(move || {
                        // Ends when every sender is gone: the queue was dropped.
                        while let Ok(job) = receiver.recv() {
                            job();
                        }
                    });
                if let Err(error) = spawned {
                    tracing::error!(%error, "cannot start a diagnosis thread");
                }
            }
        }
        self.inner.sender.get().ok_or_else(gone)
    }
}

fn gone() -> AppError {
    AppError::Internal("the diagnosis failed; the details are in the server log".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn diagnoses_queue_once_recent_ones_are_slow_or_the_paste_is_long() {
        let cost = RecentCost::default();
        assert!(!cost.queues(4096));
        assert!(cost.queues(QUEUED_BYTES));
        for _ in 0..40 {
            cost.record(Duration::from_micros(300));
        }
        assert!(!cost.queues(4096), "mean {:?}", cost.mean());
        // A knowledge base where each new diagnosis takes milliseconds.
        for _ in 0..20 {
            cost.record(Duration::from_micros(2_500));
        }
        assert!(cost.queues(4096), "mean {:?}", cost.mean());
        // One slow outlier among fast ones does not move the work off the workers.
        for _ in 0..40 {
            cost.record(Duration::from_micros(300));
        }
        cost.record(Duration::from_millis(5));
        assert!(!cost.queues(4096), "mean {:?}", cost.mean());
    }

    #[tokio::test]
    async fn work_runs_in_the_order_it_came_and_returns_its_result() {
        let queue = WorkQueue::new(1);
        let order = Arc::new(Mutex::new(Vec::new()));
        // The first piece holds the only thread while the rest queue up behind it.
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let first = {
            let order = order.clone();
            let queue = queue.clone();
            tokio::spawn(async move {
                queue
                    .run(move || {
                        hold.recv().unwrap();
                        order.lock().unwrap().push(0);
                        0
                    })
                    .await
            })
        };
        while queue.inner.sender.get().is_none() || queue.waiting() > 0 {
            tokio::task::yield_now().await;
        }
        let mut rest = Vec::new();
        for n in 1..=5 {
            let order = order.clone();
            let sender = queue.clone();
            rest.push(tokio::spawn(async move {
                sender
                    .run(move || {
                        order.lock().unwrap().push(n);
                        n * 10
                    })
                    .await
            }));
            // Each is queued before the next is sent.
            while queue.waiting() < n {
                tokio::task::yield_now().await;
            }
        }
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap().unwrap(), 0);
        for (n, task) in rest.into_iter().enumerate() {
            assert_eq!(task.await.unwrap().unwrap(), (n + 1) * 10);
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    }

    #[tokio::test]
    async fn work_whose_caller_stopped_waiting_is_skipped() {
        let queue = WorkQueue::new(1);
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let blocker = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.run(move || hold.recv().unwrap()).await })
        };
        while queue.inner.sender.get().is_none() || queue.waiting() > 0 {
            tokio::task::yield_now().await;
        }
        let ran = Arc::new(Mutex::new(false));
        let abandoned = {
            let ran = ran.clone();
            queue.run(move || *ran.lock().unwrap() = true)
        };
        // The caller gives up (as the request timeout does) while the work waits.
        let timed_out = tokio::time::timeout(Duration::from_millis(20), abandoned).await;
        assert!(timed_out.is_err());
        release.send(()).unwrap();
        blocker.await.unwrap().unwrap();
        // Work queued after it has run, so the thread has passed it by.
        queue.run(|| ()).await.unwrap();
        assert!(!*ran.lock().unwrap(), "abandoned work ran");
    }

    #[tokio::test]
    async fn a_panic_is_an_error_for_its_caller_and_the_thread_goes_on() {
        let queue = WorkQueue::new(1);
        let failed = queue.run(|| -> usize { panic!("a bug") }).await;
        assert_eq!(
            failed.unwrap_err().status(),
            axum::http::StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(queue.run(|| 7).await.unwrap(), 7);
    }
}
