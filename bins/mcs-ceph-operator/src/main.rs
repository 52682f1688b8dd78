//! `mcs-ceph-operator`: see the library documentation.
#![forbid(unsafe_code)]

fn main() {}
