//! The end of a daemon's run: SIGTERM (what the kubelet sends) or Ctrl-C.

/// Completes on SIGTERM or Ctrl-C (SIGINT), whichever comes first; on a platform without
/// SIGTERM, or when its handler cannot be installed, on Ctrl-C only.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
