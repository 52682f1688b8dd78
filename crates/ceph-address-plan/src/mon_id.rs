//! Mon ids as Rook names them: `a`, `b`, ..., `z`, `aa`, `ab`, ... (`k8sutil.IndexToName`), and
//! the `maxMonId` bookkeeping that decides the next one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A mon id: lower-case letters, bijective base 26 over the mon index (`a` = 0, `z` = 25,
/// `aa` = 26).
///
/// ```
/// use ceph_address_plan::MonId;
///
/// assert_eq!(MonId::from_index(0).as_str(), "a");
/// assert_eq!(MonId::from_index(26).as_str(), "aa");
/// assert_eq!("ab".parse::<MonId>()?.index(), 27);
/// // Rook's maxMonId is the index of the highest mon id ever allocated (-1 for none):
/// assert_eq!(MonId::next_after(Some(2)).as_str(), "d");
/// assert_eq!(MonId::next_after(None).as_str(), "a");
/// # Ok::<(), ceph_address_plan::InvalidMonId>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MonId {
    index: u32,
    name: String,
}

/// A string that is not a Rook mon id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid mon id {0:?}: Rook mon ids are lower-case letters (a, b, ..., z, aa, ab, ...) of at most 6 characters"
)]
pub struct InvalidMonId(pub String);

/// Mon ids longer than this are rejected (26^6 mons is far beyond any cluster).
const MAX_ID_LEN: usize = 6;

impl MonId {
    /// The id of the mon with the given index (Rook's `IndexToName`).
    pub fn from_index(index: u32) -> Self {
        let mut letters = Vec::new();
        let mut rest = i64::from(index);
        loop {
            // `rest % 26` is in 0..26, so the cast cannot truncate.
            letters.push(b'a' + (rest % 26) as u8);
            rest = rest / 26 - 1;
            if rest < 0 {
                break;
            }
        }
        letters.reverse();
        Self {
            index,
            name: letters.into_iter().map(char::from).collect(),
        }
    }

    /// The id after the highest one ever allocated: `maxMonId + 1`, where `None` stands for
    /// Rook's `-1` (no mon yet).
    pub fn next_after(max_mon_id: Option<u32>) -> Self {
        Self::from_index(max_mon_id.map_or(0, |max| max.saturating_add(1)))
    }

    /// The mon index (Rook's `NameToIndex`).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.name
    }
}

impl FromStr for MonId {
    type Err = InvalidMonId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() || s.len() > MAX_ID_LEN || !s.bytes().all(|b| b.is_ascii_lowercase()) {
            return Err(InvalidMonId(s.to_owned()));
        }
        // Bijective base 26: "a" = 0, "z" = 25, "aa" = 26. At most 6 letters fits in u32.
        let index = s
            .bytes()
            .fold(0u32, |acc, b| acc * 26 + u32::from(b - b'a') + 1)
            - 1;
        Ok(Self {
            index,
            name: s.to_owned(),
        })
    }
}

impl TryFrom<String> for MonId {
    type Error = InvalidMonId;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl From<MonId> for String {
    fn from(id: MonId) -> Self {
        id.name
    }
}

impl fmt::Display for MonId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn matches_rooks_index_to_name() {
        let cases = [
            (0, "a"),
            (1, "b"),
            (25, "z"),
            (26, "aa"),
            (27, "ab"),
            (51, "az"),
            (52, "ba"),
            (701, "zz"),
            (702, "aaa"),
        ];
        for (index, name) in cases {
            assert_eq!(MonId::from_index(index).as_str(), name, "index {index}");
            assert_eq!(name.parse::<MonId>().unwrap().index(), index, "{name}");
        }
    }

    #[test]
    fn invalid_ids_are_rejected_with_the_rule() {
        for bad in ["", "A", "a1", "mon-a", "aaaaaaa"] {
            let err = bad.parse::<MonId>().unwrap_err();
            assert!(
                err.to_string().contains("lower-case letters"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn serde_uses_the_letters() {
        let id = MonId::from_index(28);
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"ac\"");
        assert_eq!(serde_json::from_str::<MonId>("\"ac\"").unwrap(), id);
        assert!(serde_json::from_str::<MonId>("\"A\"").is_err());
    }

    proptest! {
        #[test]
        fn index_and_name_round_trip(index in 0u32..26u32.pow(5)) {
            let id = MonId::from_index(index);
            prop_assert_eq!(id.as_str().parse::<MonId>().unwrap(), id.clone());
            // Order of ids by index is the order Rook allocates them in.
            prop_assert!(MonId::from_index(index + 1).index() > id.index());
        }
    }
}
