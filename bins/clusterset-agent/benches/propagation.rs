//! Propagation benchmark (filled in below).
fn main() {}
