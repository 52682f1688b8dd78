//! A callsite first hit on a thread without a subscriber, while a capture is the only
//! subscriber registered in the process, is still recorded when hit on the capture's thread
//! afterwards. Alone in its test binary: another test's capture, registered at the same time,
//! would hide the case.

#[test]
fn a_callsite_first_hit_on_another_thread_is_recorded_here() {
    fn log() {
        tracing::debug!("shared callsite");
    }
    let capture = clusterset_trace_capture::Capture::new();
    let _default = capture.set_default();
    std::thread::spawn(log).join().unwrap();
    log();
    assert_eq!(capture.events().len(), 1, "{:?}", capture.events());
}
