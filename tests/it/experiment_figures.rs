//! The charts the write-ups show (issue 18): every `figures/NAME.svg` or
//! `figures/NAME.png` an `experiments/*.md` links exists, every chart in
//! `experiments/figures/` is shown by some write-up (a chart nobody links is
//! a stale one: `regenerate.sh` would not redraw it), and each ships as an SVG
//! and its PNG twin, as `experiments/figures/regenerate.sh` copies them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn experiments() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments")
}

/// The chart names (`NAME.svg` / `NAME.png`) linked as `figures/NAME.ext` in
/// `text`.
fn links_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("figures/") {
        let name: String = text[at + "figures/".len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            .collect();
        let name = name.trim_end_matches('.');
        if name.ends_with(".svg") || name.ends_with(".png") {
            out.insert(name.to_string());
        }
    }
    out
}

fn stem(name: &str) -> &str {
    name.rsplit_once('.').map_or(name, |(s, _)| s)
}

/// Every chart linked by any write-up, and the charts in `experiments/figures/`.
fn linked_and_shipped() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut linked = BTreeSet::new();
    for e in std::fs::read_dir(experiments()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            linked.extend(links_in(&std::fs::read_to_string(&p).unwrap()));
        }
    }
    let shipped: BTreeSet<String> = std::fs::read_dir(experiments().join("figures"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg") || n.ends_with(".png"))
        .collect();
    (linked, shipped)
}

#[test]
fn figure_links_are_read_as_written() {
    // By hand: two image links, one prose mention with a trailing full stop,
    // the script (not a chart) and a bare directory.
    let text = "![a](figures/x-jct_mean_s.png)\n![b](figures/y.svg)\nsee `figures/z_vs_load.svg`.\n\
                run `experiments/figures/regenerate.sh`; charts in `experiments/figures/`. figures/w.svg.";
    let want: BTreeSet<String> =
        ["x-jct_mean_s.png", "y.svg", "z_vs_load.svg", "w.svg"].iter().map(|s| s.to_string()).collect();
    assert_eq!(links_in(text), want);
    assert_eq!(stem("a.b_vs_policy_opt.theta_mem.png"), "a.b_vs_policy_opt.theta_mem");
}

#[test]
fn every_linked_chart_ships_and_every_shipped_chart_is_linked() {
    let (linked, shipped) = linked_and_shipped();
    assert!(linked.len() >= 40, "only {} chart links found in experiments/*.md", linked.len());
    let missing: Vec<&String> = linked.difference(&shipped).collect();
    assert!(missing.is_empty(), "linked from experiments/*.md but not in experiments/figures/: {missing:?}");
    // A chart counts as shown when its SVG or its PNG twin is linked.
    let linked_stems: BTreeSet<&str> = linked.iter().map(|n| stem(n)).collect();
    let orphans: Vec<&String> = shipped.iter().filter(|n| !linked_stems.contains(stem(n))).collect();
    assert!(orphans.is_empty(), "in experiments/figures/ but shown by no experiments/*.md: {orphans:?}");
}

#[test]
fn every_shipped_chart_has_its_svg_and_png_twin() {
    let (_, shipped) = linked_and_shipped();
    assert!(!shipped.is_empty());
    let lonely: Vec<&String> = shipped
        .iter()
        .filter(|n| {
            let twin = if n.ends_with(".svg") { format!("{}.png", stem(n)) } else { format!("{}.svg", stem(n)) };
            !shipped.contains(&twin)
        })
        .collect();
    assert!(lonely.is_empty(), "charts in experiments/figures/ without their SVG/PNG twin: {lonely:?}");
}
