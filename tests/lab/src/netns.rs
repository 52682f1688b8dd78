//! Running async code with sockets in another network namespace: a dedicated thread joins the
//! namespace (`setns(2)`, which affects only the calling thread) and runs a single-threaded
//! tokio runtime. Sockets belong to the namespace they were created in, so everything this
//! thread binds or connects (the DNS server, the resolver's queries) stays inside it.

use std::future::Future;
use std::pin::Pin;

use nix::sched::{CloneFlags, setns};
use tokio::sync::{mpsc, oneshot};

use crate::LabError;

type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// A thread inside a network namespace that runs the futures given to it.
#[derive(Debug)]
pub struct NetnsThread {
    netns: String,
    jobs: Option<mpsc::UnboundedSender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NetnsThread {
    /// Starts the thread in `netns` (a name of `ip netns list`).
    pub fn spawn(netns: &str) -> Result<Self, LabError> {
        let fail = |detail: String| LabError::Netns {
            netns: netns.to_owned(),
            detail,
        };
        let path = format!("/var/run/netns/{netns}");
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let thread = std::thread::Builder::new()
            .name(format!("netns-{netns}"))
            .spawn(move || {
                let joined = std::fs::File::open(&path)
                    .map_err(|e| format!("opening {path}: {e}"))
                    .and_then(|file| {
                        setns(&file, CloneFlags::CLONE_NEWNET)
                            .map_err(|e| format!("setns({path}): {e}"))
                    });
                let runtime = joined.and_then(|()| {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| format!("starting a runtime: {e}"))
                });
                let runtime = match runtime {
                    Ok(runtime) => {
                        let _ = ready_tx.send(Ok(()));
                        runtime
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let local = tokio::task::LocalSet::new();
                local.block_on(&runtime, async move {
                    while let Some(job) = queue.recv().await {
                        tokio::task::spawn_local(job());
                    }
                });
            })
            .map_err(|e| fail(format!("spawning: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(NetnsThread {
                netns: netns.to_owned(),
                jobs: Some(jobs),
                thread: Some(thread),
            }),
            Ok(Err(detail)) => Err(fail(detail)),
            Err(_) => Err(fail("the thread ended before it was ready".into())),
        }
    }

    /// The namespace.
    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// Runs `make()`'s future on the thread and returns its output.
    pub async fn run<F, Fut, T>(&self, make: F) -> Result<T, LabError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            Box::pin(async move {
                let _ = tx.send(make().await);
            })
        });
        let gone = || LabError::Netns {
            netns: self.netns.clone(),
            detail: "the thread has stopped".into(),
        };
        self.jobs
            .as_ref()
            .ok_or_else(gone)?
            .send(job)
            .map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }
}

impl Drop for NetnsThread {
    fn drop(&mut self) {
        // Closing the queue ends the thread's loop; its runtime drops the tasks left.
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
