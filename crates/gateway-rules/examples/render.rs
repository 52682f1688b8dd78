//! Prints the nft script of a state file: `cargo run -p gateway-rules --example render FILE`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: render STATE-FILE")?;
    let state = gateway_rules::GatewayState::parse(&std::fs::read_to_string(path)?)?;
    print!(
        "{}",
        gateway_rules::RuleSet::desired(&state)?.to_nft_script()
    );
    Ok(())
}
