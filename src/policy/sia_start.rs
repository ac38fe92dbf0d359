//! A starting solution for Sia's integer program (rule 6 of
//! [`crate::policy::sia`]), **ours**: the program's LP relaxation rounded
//! down, filled greedily, then improved by local search. It serves only as
//! the objective cutoff that lets the exact solver skip the ties of a
//! program whose values lie on a 0.01 grid: the solver still decides
//! whether anything better exists, and finds it when it does.
//!
//! microlp 0.2's branch and bound (depth-first, no warm start) prunes a node
//! only when its relaxation is strictly worse than the best solution found,
//! so a program with many equal-valued solutions makes it visit every node
//! whose bound lies within one grid step of the optimum. Given a feasible
//! solution of cost `z` and values on a grid of step `s`, any strictly
//! better solution costs at most `z − s`: the program with that cutoff
//! either is infeasible (then `z` is optimal) or has the optimum. The
//! heuristic is the greedy and pairwise-exchange search usual for
//! multiple-choice knapsacks (Kellerer, Pferschy, Pisinger, *Knapsack
//! Problems*, Springer 2004, ch. 11).

/// One group of interchangeable jobs in the program: how many jobs it
/// holds, its candidate configurations, and the configuration it must keep.
pub(super) struct Group {
    /// Jobs in the group (its members), at least 1.
    pub members: u32,
    /// Candidates: (GPU type index, GPUs, cost). Cost is the objective
    /// coefficient in the minimising sense (Sia's `A − λ_n` when `p < 0`,
    /// `λ_n − A` when `p > 0`).
    pub cands: Vec<(usize, u32, f64)>,
    /// Index into `cands` of a configuration the group's one job must keep
    /// (rule 6: within its re-scale delay).
    pub forced: Option<usize>,
}

/// Work bound of the pairwise-exchange search, candidate-move pairs per
/// pass (ours): past it only single moves are tried, so a round's cost
/// stays bounded on programs of thousands of jobs. Depends only on the
/// program's size, so results stay deterministic.
const PAIR_WORK: usize = 2_000_000;

/// A unit move: in `group`, one member leaves candidate `from` (`None`: a
/// member without configuration) for `to` (`None`: none).
#[derive(Clone, Copy)]
struct Move {
    group: usize,
    from: Option<usize>,
    to: Option<usize>,
    cost: f64,
    /// GPUs taken (positive) or freed (negative) per type; at most two
    /// entries are non-zero.
    gpus: [(usize, i64); 2],
}

/// A feasible solution: per group, per candidate, how many members take
/// it; `None` when `lp` (the relaxation's values, same shape) rounded down
/// is not feasible (a numerical accident: the caller then solves without a
/// cutoff). `caps`: GPUs per type. Deterministic: every choice is the
/// first best in group and candidate order.
pub(super) fn start(groups: &[Group], caps: &[u32], lp: &[Vec<f64>]) -> Option<Vec<Vec<u32>>> {
    let mut used = vec![0i64; caps.len()];
    let mut counts: Vec<Vec<u32>> = Vec::with_capacity(groups.len());
    for (g, vals) in groups.iter().zip(lp) {
        let mut row = Vec::with_capacity(g.cands.len());
        for (&(t, n, _), &x) in g.cands.iter().zip(vals) {
            let k = if (x - x.round()).abs() < 1e-6 { x.round() } else { x.floor() };
            let k = k.max(0.0) as u32;
            used[t] += i64::from(n) * i64::from(k);
            row.push(k);
        }
        counts.push(row);
    }
    let feasible = groups.iter().zip(&counts).all(|(g, row)| {
        let taken: u32 = row.iter().sum();
        taken <= g.members && g.forced.is_none_or(|f| row[f] == 1 && taken == 1)
    }) && used.iter().zip(caps).all(|(&u, &c)| u <= i64::from(c));
    if !feasible {
        return None;
    }
    // Greedy fill: each group's free members take the cheapest candidate
    // that still fits, if it lowers the cost.
    for (gi, g) in groups.iter().enumerate() {
        if g.forced.is_some() {
            continue;
        }
        while counts[gi].iter().sum::<u32>() < g.members {
            let best = g
                .cands
                .iter()
                .enumerate()
                .filter(|&(_, &(t, n, c))| c < 0.0 && used[t] + i64::from(n) <= i64::from(caps[t]))
                .fold(None, |b: Option<(usize, f64)>, (k, &(_, _, c))| match b {
                    Some((_, bc)) if bc <= c => b,
                    _ => Some((k, c)),
                });
            let Some((k, _)) = best else { break };
            let (t, n, _) = g.cands[k];
            used[t] += i64::from(n);
            counts[gi][k] += 1;
        }
    }
    improve(groups, caps, &mut counts, &mut used);
    Some(counts)
}

/// Local search: the best improving single move, else the best improving
/// pair of moves (one frees GPUs the other needs), until neither exists.
fn improve(groups: &[Group], caps: &[u32], counts: &mut [Vec<u32>], used: &mut [i64]) {
    const TOL: f64 = 1e-9;
    let fits = |used: &[i64], a: &Move, b: Option<&Move>| {
        let mut extra: [(usize, i64); 4] = [(0, 0); 4];
        extra[..2].copy_from_slice(&a.gpus);
        if let Some(b) = b {
            extra[2..].copy_from_slice(&b.gpus);
        }
        extra.iter().all(|&(t, _)| {
            let d: i64 = extra.iter().filter(|&&(u, _)| u == t).map(|&(_, d)| d).sum();
            used[t] + d <= i64::from(caps[t])
        })
    };
    loop {
        let moves = moves(groups, counts);
        let mut best: Option<(f64, usize, Option<usize>)> = None;
        for (i, m) in moves.iter().enumerate() {
            if m.cost < -TOL && fits(used, m, None) && best.is_none_or(|b| m.cost < b.0 - TOL) {
                best = Some((m.cost, i, None));
            }
        }
        if best.is_none() {
            // Pairs: an improving move that does not fit, with one that
            // frees GPUs.
            let wanting: Vec<usize> = (0..moves.len()).filter(|&i| !fits(used, &moves[i], None)).collect();
            let freeing: Vec<usize> = (0..moves.len()).filter(|&i| moves[i].gpus.iter().any(|&(_, d)| d < 0)).collect();
            if wanting.len().saturating_mul(freeing.len()) <= PAIR_WORK {
                for &i in &wanting {
                    for &j in &freeing {
                        let (a, b) = (&moves[i], &moves[j]);
                        let cost = a.cost + b.cost;
                        if cost >= -TOL || best.is_some_and(|bb| cost >= bb.0 - TOL) {
                            continue;
                        }
                        if (a.group == b.group && !pair_valid(&groups[a.group], &counts[a.group], a, b))
                            || !fits(used, a, Some(b))
                        {
                            continue;
                        }
                        best = Some((cost, i, Some(j)));
                    }
                }
            }
        }
        let Some((_, i, j)) = best else { return };
        for m in std::iter::once(moves[i]).chain(j.map(|j| moves[j])) {
            apply(counts, used, &m);
        }
    }
}

/// Every unit move of the groups that are not forced.
fn moves(groups: &[Group], counts: &[Vec<u32>]) -> Vec<Move> {
    let mut out = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        if g.forced.is_some() {
            continue;
        }
        let taken: u32 = counts[gi].iter().sum();
        let froms =
            (0..g.cands.len()).filter(|&k| counts[gi][k] > 0).map(Some).chain((taken < g.members).then_some(None));
        for from in froms {
            for to in (0..g.cands.len()).map(Some).chain(std::iter::once(None)) {
                if to == from {
                    continue;
                }
                let mut cost = 0.0;
                let mut gpus = [(0usize, 0i64); 2];
                if let Some(f) = from {
                    let (t, n, c) = g.cands[f];
                    cost -= c;
                    gpus[0] = (t, -i64::from(n));
                }
                if let Some(k) = to {
                    let (t, n, c) = g.cands[k];
                    cost += c;
                    gpus[1] = (t, i64::from(n));
                }
                out.push(Move { group: gi, from, to, cost, gpus });
            }
        }
    }
    out
}

/// Whether two moves within one group can both be made.
fn pair_valid(g: &Group, counts: &[u32], a: &Move, b: &Move) -> bool {
    let mut c = counts.to_vec();
    let mut taken: i64 = c.iter().map(|&x| i64::from(x)).sum();
    for m in [a, b] {
        match m.from {
            Some(f) if c[f] == 0 => return false,
            Some(f) => c[f] -= 1,
            None => taken += 1,
        }
        match m.to {
            Some(k) => c[k] += 1,
            None => taken -= 1,
        }
    }
    // `taken` counts members with a configuration after both moves.
    taken <= i64::from(g.members) && taken >= 0
}

fn apply(counts: &mut [Vec<u32>], used: &mut [i64], m: &Move) {
    if let Some(f) = m.from {
        counts[m.group][f] -= 1;
    }
    if let Some(k) = m.to {
        counts[m.group][k] += 1;
    }
    for &(t, d) in &m.gpus {
        used[t] += d;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(groups: &[Group], counts: &[Vec<u32>]) -> f64 {
        groups
            .iter()
            .zip(counts)
            .map(|(g, row)| g.cands.iter().zip(row).map(|(c, &k)| c.2 * f64::from(k)).sum::<f64>())
            .sum()
    }

    #[test]
    fn a_swap_frees_the_gpus_a_better_configuration_needs() {
        // One type of 4 GPUs. Job 0: 4 GPUs at -1.0 or 2 GPUs at -0.6;
        // job 1: 2 GPUs at -0.5. The relaxation rounded down gives nothing;
        // greedy gives job 0 its 4 GPUs (-1.0); the optimum is 2 + 2 (-1.1),
        // reached by the pair move (job 0: 4 -> 2, job 1: none -> 2).
        let groups = vec![
            Group { members: 1, cands: vec![(0, 2, -0.6), (0, 4, -1.0)], forced: None },
            Group { members: 1, cands: vec![(0, 2, -0.5)], forced: None },
        ];
        let lp = vec![vec![0.0, 0.5], vec![0.5]];
        let s = start(&groups, &[4], &lp).unwrap();
        assert_eq!(s, vec![vec![1, 0], vec![1]]);
        assert!((cost(&groups, &s) - -1.1).abs() < 1e-12);
    }

    #[test]
    fn forced_groups_keep_their_configuration_and_infeasible_roundings_are_refused() {
        let groups = vec![
            Group { members: 1, cands: vec![(0, 2, 0.3), (0, 1, -0.9)], forced: Some(0) },
            Group { members: 2, cands: vec![(0, 1, -0.4)], forced: None },
        ];
        // 2 GPUs forced to group 0; two 1-GPU members of group 1 fill the rest.
        let s = start(&groups, &[4], &[vec![1.0, 0.0], vec![0.0]]).unwrap();
        assert_eq!(s, vec![vec![1, 0], vec![2]]);
        // A relaxation over capacity (3 × 2 GPUs on 4) is refused.
        let wide = vec![Group { members: 3, cands: vec![(0, 2, -1.0)], forced: None }];
        assert!(start(&wide, &[4], &[vec![3.0]]).is_none());
    }
}
