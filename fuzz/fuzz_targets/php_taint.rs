//! The PHP taint analysis: its tokenizer and flow pass never panic on any bytes, stay
//! within their caps, and every flow it reports points at lines inside the input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svc::scan::taint::{analyze_source, flow, lexer};

fuzz_target!(|data: &[u8]| {
    let toks = lexer::tokenize(data);
    assert!(toks.tokens.len() <= lexer::MAX_TOKENS);
    let lines = data.iter().filter(|b| **b == b'\n').count() as u32 + 1;
    assert!(toks.tokens.iter().all(|t| t.line >= 1 && t.line <= lines));
    let r = analyze_source(data);
    assert!(r.flows.len() <= flow::MAX_FLOWS);
    for f in &r.flows {
        assert!(f.source_line <= lines && f.sink_line <= lines);
    }
});
