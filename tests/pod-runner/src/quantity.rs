//! Kubernetes quantities (`4Ti`, `1000`, `500m`, `1e3`) as numbers, for the downward API's
//! resource fields (pure).

/// The value of quantity `text`, or `None` when it is not one.
pub fn parse(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "Ki" => 1024_f64,
        "Mi" => 1024_f64.powi(2),
        "Gi" => 1024_f64.powi(3),
        "Ti" => 1024_f64.powi(4),
        "Pi" => 1024_f64.powi(5),
        "Ei" => 1024_f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exponent => 10_f64.powi(exponent.strip_prefix(['e', 'E'])?.parse().ok()?),
    };
    Some(number * scale)
}

/// What the kubelet gives `resourceFieldRef` with `divisor`: the value divided by the
/// divisor, rounded up, as an integer (`0` for a divisor that is not positive; the caller
/// makes an unset one 1).
pub fn divided(value: f64, divisor: f64) -> String {
    if divisor <= 0.0 {
        return "0".to_owned();
    }
    format!("{}", (value / divisor).ceil())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_with_binary_decimal_and_exponent_suffixes() {
        assert_eq!(parse("4Ti"), Some(4.0 * 1024_f64.powi(4)));
        assert_eq!(parse("1000"), Some(1000.0));
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("1e3"), Some(1000.0));
        assert_eq!(parse("1.5G"), Some(1.5e9));
        assert_eq!(parse("x"), None);
        assert_eq!(parse("1Q"), None);
    }

    #[test]
    fn a_divided_value_is_rounded_up() {
        assert_eq!(divided(4.0 * 1024_f64.powi(4), 1.0), "4398046511104");
        assert_eq!(divided(0.5, 1.0), "1");
        assert_eq!(divided(0.5, 1e-3), "500");
        assert_eq!(divided(0.0, 1.0), "0");
        assert_eq!(divided(3.0 * 1024_f64.powi(2), 1024_f64.powi(2)), "3");
    }
}
