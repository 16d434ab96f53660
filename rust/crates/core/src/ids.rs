//! Identifiers: UUID v4 strings for every resource, as the wire contract wants.

/// A fresh random UUID v4 in its hyphenated lower-case form.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_uuid_v4_and_distinct() {
        let a = new_id();
        let b = new_id();
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(a.len(), 36);
    }
}
