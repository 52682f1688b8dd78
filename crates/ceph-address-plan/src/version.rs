//! Ceph versions, as given (`18.2.4`) or read from an image tag (`quay.io/ceph/ceph:v18.2.4`).

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A Ceph version. Minor and patch may be unknown when it comes from an image tag such as
/// `quay.io/ceph/ceph:v20`.
///
/// ```
/// use ceph_address_plan::CephVersion;
///
/// let v: CephVersion = "17.2.6".parse()?;
/// assert!(v.is_at_least(17, 2, 6) == Some(true));
/// let tag = CephVersion::from_image("quay.io/ceph/ceph:v18.2.4-20240716").unwrap();
/// assert_eq!(tag.to_string(), "18.2.4");
/// // A bare major version says enough about 18, not about 17:
/// assert_eq!(CephVersion::from_image("quay.io/ceph/ceph:v18").unwrap().is_at_least(17, 2, 6), Some(true));
/// assert_eq!(CephVersion::from_image("quay.io/ceph/ceph:v17").unwrap().is_at_least(17, 2, 6), None);
/// # Ok::<(), ceph_address_plan::InvalidCephVersion>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CephVersion {
    /// Major release (17 = Quincy, 18 = Reef, 19 = Squid, 20 = Tentacle).
    pub major: u32,
    /// Minor version, if known.
    pub minor: Option<u32>,
    /// Patch version, if known.
    pub patch: Option<u32>,
}

/// Text that is not a Ceph version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid Ceph version {0:?}: write it as MAJOR[.MINOR[.PATCH]], for example \"18.2.4\" (a leading \"v\" is allowed)"
)]
pub struct InvalidCephVersion(pub String);

impl CephVersion {
    /// A fully known version.
    pub fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            major,
            minor: Some(minor),
            patch: Some(patch),
        }
    }

    /// Reads the version from a container image's tag (`...:v18.2.4`, `...:v18.2.4-20240716`,
    /// `...:v20`). `None` when the image has no version tag (for example only a digest).
    pub fn from_image(image: &str) -> Option<Self> {
        let without_digest = image.split('@').next().unwrap_or(image);
        let last_segment = without_digest.rsplit('/').next().unwrap_or(without_digest);
        let (_, tag) = last_segment.split_once(':')?;
        let version = tag.split('-').next().unwrap_or(tag);
        version.parse().ok()
    }

    /// Whether this version is at least `major.minor.patch`; `None` when the unknown parts of
    /// this version decide it.
    pub fn is_at_least(&self, major: u32, minor: u32, patch: u32) -> Option<bool> {
        let ordering = |have: Option<u32>, want: u32| have.map(|h| h.cmp(&want));
        match self.major.cmp(&major) {
            Ordering::Greater => return Some(true),
            Ordering::Less => return Some(false),
            Ordering::Equal => {}
        }
        match ordering(self.minor, minor)? {
            Ordering::Greater => return Some(true),
            Ordering::Less => return Some(false),
            Ordering::Equal => {}
        }
        Some(ordering(self.patch, patch)? != Ordering::Less)
    }
}

impl FromStr for CephVersion {
    type Err = InvalidCephVersion;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidCephVersion(s.to_owned());
        let digits = s.strip_prefix('v').unwrap_or(s);
        let mut parts = digits.split('.');
        let mut next = || -> Result<Option<u32>, InvalidCephVersion> {
            match parts.next() {
                None => Ok(None),
                Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                    p.parse().map(Some).map_err(|_| invalid())
                }
                Some(_) => Err(invalid()),
            }
        };
        let major = next()?.ok_or_else(invalid)?;
        let minor = next()?;
        let patch = if minor.is_some() { next()? } else { None };
        if parts.next().is_some() {
            return Err(invalid());
        }
        Ok(Self {
            major,
            minor,
            patch,
        })
    }
}

impl fmt::Display for CephVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.major)?;
        if let Some(minor) = self.minor {
            write!(f, ".{minor}")?;
            if let Some(patch) = self.patch {
                write!(f, ".{patch}")?;
            }
        }
        Ok(())
    }
}

impl TryFrom<String> for CephVersion {
    type Error = InvalidCephVersion;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl From<CephVersion> for String {
    fn from(v: CephVersion) -> Self {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_with_and_without_v() {
        assert_eq!(
            "v17.2.6".parse::<CephVersion>().unwrap(),
            CephVersion::new(17, 2, 6)
        );
        assert_eq!("19".parse::<CephVersion>().unwrap().to_string(), "19");
        assert_eq!("19.2".parse::<CephVersion>().unwrap().to_string(), "19.2");
        for bad in ["", "v", "17.x", "17..2", "17.2.6.1", "latest", "-1"] {
            assert!(bad.parse::<CephVersion>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_mcs_gate_compares_like_rook() {
        let at_least = |v: &str| v.parse::<CephVersion>().unwrap().is_at_least(17, 2, 6);
        assert_eq!(at_least("17.2.5"), Some(false));
        assert_eq!(at_least("17.2.6"), Some(true));
        assert_eq!(at_least("17.3"), Some(true));
        assert_eq!(at_least("16.2.15"), Some(false));
        assert_eq!(at_least("18"), Some(true));
        assert_eq!(at_least("17"), None);
        assert_eq!(at_least("17.2"), None);
    }

    #[test]
    fn image_tags_give_versions() {
        let v = |image: &str| CephVersion::from_image(image).map(|v| v.to_string());
        assert_eq!(v("quay.io/ceph/ceph:v18.2.4").as_deref(), Some("18.2.4"));
        assert_eq!(v("quay.io/ceph/ceph:v20").as_deref(), Some("20"));
        assert_eq!(
            v("registry:5000/ceph/ceph:v17.2.6-20230920").as_deref(),
            Some("17.2.6")
        );
        assert_eq!(
            v("quay.io/ceph/ceph:v19.2.1@sha256:abcd").as_deref(),
            Some("19.2.1")
        );
        assert_eq!(v("quay.io/ceph/ceph@sha256:abcd"), None);
        assert_eq!(v("registry:5000/ceph/ceph"), None);
        assert_eq!(v("quay.io/ceph/ceph:latest"), None);
    }
}
