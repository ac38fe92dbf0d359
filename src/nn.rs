//! A small dense multilayer perceptron on the ground floor: ReLU hidden layers, a linear
//! (or sigmoid) output, hand-written forward and backward passes, mean-squared-error loss on
//! all or on selected outputs, plain SGD, seeded initialisation, exact serialisation.
//!
//! Built for LDWP's deep Q-network (`policy::ldwp`: hidden 256 and 128, spec §5.2) and
//! IAWP's collaborative-filtering model; a few tens of thousands of weights need no ML
//! framework. Imports nothing above the ground floor.
//!
//! Shapes follow linfa's convention `(rows, columns)`: a batch of inputs is
//! `(batch, n_in)`, a layer's weights `(n_in, n_out)`, its bias `(n_out)`, its
//! output `(batch, n_out)`; a layer computes `y = x · W + b`.
//!
//! **Determinism.** The matrix products are explicit loops in one fixed summation order
//! (no BLAS, no `matrixmultiply` kernel whose order may depend on the CPU's vector units),
//! so the same weights and inputs give bit-identical outputs and gradients on every machine
//! and thread count. Randomness enters only through the caller's generator at
//! [`Mlp::new`].
//!
//! **Serialisation.** Weights are written as text in Rust's shortest round-trip decimal
//! form and parsed back with the standard library's correctly-rounded parser, so a save and
//! load reproduces every weight bit for bit (serde_json's default float parser is not
//! correctly rounded, hence the string form). With [`TextPrecision::F32`] the weights are
//! first rounded to `f32` and written as `f32` text (half the size), which again loads back
//! exactly.

use ndarray::{Array1, Array2, ArrayView2, Axis};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The activation of the output layer (hidden layers are always ReLU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OutputActivation {
    /// `y = z` (regression, Q-values).
    #[default]
    Linear,
    /// `y = 1 / (1 + e^-z)` (a bounded score, e.g. NCF's output, spec §5.3).
    Sigmoid,
}

/// How weights are written as text (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TextPrecision {
    /// Every `f64` weight, exactly.
    #[default]
    F64,
    /// Weights rounded to `f32` (set by [`Mlp::round_to_f32`]), exactly.
    F32,
}

/// One dense layer: `y = x · w + b`.
#[derive(Clone, Debug, PartialEq)]
pub struct Dense {
    /// Weights, shape `(n_in, n_out)`.
    pub w: Array2<f64>,
    /// Bias, shape `(n_out)`.
    pub b: Array1<f64>,
}

impl Dense {
    /// Number of inputs.
    pub fn n_in(&self) -> usize {
        self.w.nrows()
    }
    /// Number of outputs.
    pub fn n_out(&self) -> usize {
        self.w.ncols()
    }
}

/// A dense MLP: `layers[0]` takes the input; every layer but the last is followed by ReLU;
/// the last by [`OutputActivation`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "MlpWire", into = "MlpWire")]
pub struct Mlp {
    /// The layers, input first.
    pub layers: Vec<Dense>,
    /// The output layer's activation.
    pub output: OutputActivation,
    /// How [`Serialize`] writes the weights.
    pub precision: TextPrecision,
}

/// Gradients of a loss with respect to every weight of an [`Mlp`], same shapes.
#[derive(Clone, Debug, PartialEq)]
pub struct Grads {
    /// `d loss / d w` per layer, shape `(n_in, n_out)`.
    pub w: Vec<Array2<f64>>,
    /// `d loss / d b` per layer, shape `(n_out)`.
    pub b: Vec<Array1<f64>>,
    /// `d loss / d input`, shape `(batch, n_in)` (for models that learn their inputs,
    /// e.g. embeddings).
    pub input: Array2<f64>,
}

impl Default for Grads {
    fn default() -> Self {
        Grads::empty()
    }
}

impl Grads {
    /// No gradients yet: buffers that [`Mlp::backward_weights_into`] sizes on first use.
    pub fn empty() -> Self {
        Grads { w: Vec::new(), b: Vec::new(), input: Array2::zeros((0, 0)) }
    }
}

/// The activations of one forward pass, kept for [`Mlp::backward`].
#[derive(Clone, Debug)]
pub struct Trace {
    /// `acts[0]` is the input `(batch, n_in)`; `acts[l + 1]` is layer `l`'s output after its
    /// activation `(batch, n_out_l)`; the last is the network's output.
    pub acts: Vec<Array2<f64>>,
}

impl Trace {
    /// The network's output, shape `(batch, n_out)`.
    pub fn output(&self) -> &Array2<f64> {
        self.acts.last().expect("a trace has its input")
    }
}

/// `x · w + b` in a fixed order: for each row, outputs accumulate over the inputs `i` in
/// ascending order. `x (batch, n_in)`, `w (n_in, n_out)`, `b (n_out)` → `(batch, n_out)`.
fn affine(x: ArrayView2<f64>, w: &Array2<f64>, b: &Array1<f64>) -> Array2<f64> {
    let (batch, n_in) = x.dim();
    debug_assert_eq!(n_in, w.nrows());
    let mut y = Array2::<f64>::zeros((batch, w.ncols()));
    for (x_row, mut y_row) in x.rows().into_iter().zip(y.rows_mut()) {
        y_row.assign(b);
        let ys = y_row.as_slice_mut().expect("owned rows are contiguous");
        for (xi, w_row) in x_row.iter().zip(w.rows()) {
            if *xi == 0.0 {
                continue; // exact: adds 0 * w (w finite) to every output
            }
            let ws = w_row.to_slice().expect("owned rows are contiguous");
            for (yo, wo) in ys.iter_mut().zip(ws) {
                *yo += xi * wo;
            }
        }
    }
    y
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

impl Mlp {
    /// A network with layer sizes `sizes = [n_in, h1, ..., n_out]` (at least two entries),
    /// initialised from `rng`: ReLU layers He-uniform, `U(-√(6/n_in), √(6/n_in))`
    /// (He et al. 2015, "Delving Deep into Rectifiers", §2.2), the output layer
    /// Glorot/Xavier-uniform, `U(-√(6/(n_in+n_out)), +…)` (Glorot & Bengio 2010, eq. 16);
    /// biases 0. Weights are drawn layer by layer, row by row.
    ///
    /// # Panics
    /// If `sizes` has fewer than two entries or a zero entry (a programming error; callers
    /// build sizes from validated shapes).
    pub fn new<R: Rng + ?Sized>(sizes: &[usize], output: OutputActivation, rng: &mut R) -> Self {
        assert!(sizes.len() >= 2 && sizes.iter().all(|&s| s > 0), "bad MLP sizes {sizes:?}");
        let n = sizes.len() - 1;
        let layers = (0..n).map(|l| Self::init_layer(sizes[l], sizes[l + 1], l + 1 == n, rng)).collect();
        Mlp { layers, output, precision: TextPrecision::F64 }
    }

    /// A freshly initialised `(n_in, n_out)` layer, drawn as in [`Mlp::new`] (`last`: the
    /// output layer, Glorot; else He).
    pub fn init_layer<R: Rng + ?Sized>(n_in: usize, n_out: usize, last: bool, rng: &mut R) -> Dense {
        let limit = if last { (6.0 / (n_in + n_out) as f64).sqrt() } else { (6.0 / n_in as f64).sqrt() };
        let w = Array2::from_shape_fn((n_in, n_out), |_| rng.gen_range(-limit..limit));
        Dense { w, b: Array1::zeros(n_out) }
    }

    /// Layer sizes `[n_in, h1, ..., n_out]`.
    pub fn sizes(&self) -> Vec<usize> {
        let mut s = vec![self.n_in()];
        s.extend(self.layers.iter().map(Dense::n_out));
        s
    }

    /// Input width.
    pub fn n_in(&self) -> usize {
        self.layers[0].n_in()
    }

    /// Output width.
    pub fn n_out(&self) -> usize {
        self.layers.last().expect("an MLP has layers").n_out()
    }

    /// Number of weights and biases.
    pub fn n_params(&self) -> usize {
        self.layers.iter().map(|l| l.w.len() + l.b.len()).sum()
    }

    /// The output for a batch `x (batch, n_in)` → `(batch, n_out)`.
    pub fn forward(&self, x: ArrayView2<f64>) -> Array2<f64> {
        let mut a = self.layer_out(0, x);
        for l in 1..self.layers.len() {
            a = self.layer_out(l, a.view());
        }
        a
    }

    /// The output for one input `x (n_in)` → `(n_out)`.
    pub fn forward_one(&self, x: &[f64]) -> Vec<f64> {
        let x = ArrayView2::from_shape((1, x.len()), x).expect("a slice is one row");
        self.forward(x).into_raw_vec_and_offset().0
    }

    fn layer_out(&self, l: usize, x: ArrayView2<f64>) -> Array2<f64> {
        let layer = &self.layers[l];
        let mut z = affine(x, &layer.w, &layer.b);
        if l + 1 < self.layers.len() {
            z.mapv_inplace(|v| v.max(0.0));
        } else if self.output == OutputActivation::Sigmoid {
            z.mapv_inplace(sigmoid);
        }
        z
    }

    /// A forward pass that keeps every activation for [`Mlp::backward`].
    pub fn forward_trace(&self, x: ArrayView2<f64>) -> Trace {
        let mut acts = Vec::with_capacity(self.layers.len() + 1);
        acts.push(x.to_owned());
        for l in 0..self.layers.len() {
            let a = self.layer_out(l, acts[l].view());
            acts.push(a);
        }
        Trace { acts }
    }

    /// Back-propagation: given `d_out = d loss / d output` `(batch, n_out)` (of the output
    /// *after* its activation) and the trace of the forward pass, the gradients of every
    /// weight and of the input. ReLU's derivative at 0 is taken as 0.
    pub fn backward(&self, trace: &Trace, d_out: &Array2<f64>) -> Grads {
        let mut g = Grads::empty();
        self.backward_inner(trace, d_out, true, &mut g);
        g
    }

    /// [`Mlp::backward`] into `out`, whose buffers are reused when their shapes match
    /// (a training loop allocates them once), and without the input gradient
    /// (`out.input` is left empty, shape `(0, 0)`): the same weight and bias gradients,
    /// bit for bit, without the last `batch × n_in × n_out_0` pass that only models
    /// learning their inputs need.
    pub fn backward_weights_into(&self, trace: &Trace, d_out: &Array2<f64>, out: &mut Grads) {
        self.backward_inner(trace, d_out, false, out);
    }

    fn backward_inner(&self, trace: &Trace, d_out: &Array2<f64>, want_input: bool, out: &mut Grads) {
        let n = self.layers.len();
        let fits = out.w.len() == n
            && out.b.len() == n
            && self
                .layers
                .iter()
                .zip(&out.w)
                .zip(&out.b)
                .all(|((l, w), b)| l.w.dim() == w.dim() && l.b.dim() == b.dim());
        if !fits {
            out.w = self.layers.iter().map(|l| Array2::zeros(l.w.dim())).collect();
            out.b = self.layers.iter().map(|l| Array1::zeros(l.b.dim())).collect();
        }
        // delta = d loss / d z of the current layer (pre-activation).
        let mut delta = d_out.clone();
        if self.output == OutputActivation::Sigmoid {
            let y = &trace.acts[n];
            delta.zip_mut_with(y, |d, &yv| *d *= yv * (1.0 - yv));
        }
        for l in (0..n).rev() {
            let x = &trace.acts[l];
            let layer = &self.layers[l];
            let (n_in, n_out) = layer.w.dim();
            // dW = x^T · delta, accumulated over the batch in row order. A
            // row of dW at a time (kept in cache while the batch passes), on
            // flat rows so the element-wise updates vectorise: each element
            // sees the same additions in the same order.
            let dw = &mut out.w[l];
            dw.fill(0.0);
            let dws = dw.as_slice_mut().expect("owned arrays are contiguous");
            let ds = delta.as_standard_layout();
            let ds = ds.as_slice().expect("standard layout is contiguous");
            for (i, g_row) in dws.chunks_exact_mut(n_out).enumerate() {
                for (xi, d_row) in x.column(i).iter().zip(ds.chunks_exact(n_out)) {
                    if *xi == 0.0 {
                        continue;
                    }
                    for (g, d) in g_row.iter_mut().zip(d_row) {
                        *g += xi * d;
                    }
                }
            }
            out.b[l] = delta.sum_axis(Axis(0));
            if l == 0 && !want_input {
                delta = Array2::zeros((0, 0));
                break;
            }
            // d loss / d x = delta · W^T, then through the previous layer's ReLU.
            // dx[r][i] = Σ_j w[i][j] · delta[r][j], summed over j in order from
            // -0.0 (what `Iterator::sum` of f64 does), computed a column j at a
            // time over W^T's contiguous rows: the same sums, vectorised.
            let wt = layer.w.t().as_standard_layout().into_owned();
            let wts = wt.as_slice().expect("owned arrays are contiguous");
            let mut dx = Array2::<f64>::from_elem(x.dim(), -0.0);
            for (d_row, mut dx_row) in delta.rows().into_iter().zip(dx.rows_mut()) {
                let acc = dx_row.as_slice_mut().expect("owned rows are contiguous");
                for (d, w_col) in d_row.iter().zip(wts.chunks_exact(n_in)) {
                    for (a, w) in acc.iter_mut().zip(w_col) {
                        *a += w * d;
                    }
                }
            }
            if l > 0 {
                dx.zip_mut_with(x, |d, &a| {
                    if a <= 0.0 {
                        *d = 0.0;
                    }
                });
            }
            delta = dx;
        }
        out.input = delta;
    }

    /// Plain SGD, `θ ← θ - lr · g`, only if every updated weight is finite: returns whether
    /// the step was taken (the weights are unchanged otherwise). The same values as
    /// [`Mlp::sgd_step`] followed by [`Mlp::is_finite`] and a restore, without the copy.
    pub fn sgd_step_if_finite(&mut self, grads: &Grads, lr: f64) -> bool {
        // `w + (-lr · g)`, as `scaled_add` computes it; every element is checked (no
        // early exit, so the check vectorises).
        let all_finite =
            |w: &[f64], g: &[f64]| w.iter().zip(g).fold(true, |ok, (&w, &g)| ok & (w + -lr * g).is_finite());
        let finite = self.layers.iter().zip(&grads.w).zip(&grads.b).all(|((layer, gw), gb)| {
            match (layer.w.as_slice(), gw.as_slice(), layer.b.as_slice(), gb.as_slice()) {
                (Some(w), Some(g), Some(b), Some(h)) => all_finite(w, g) && all_finite(b, h),
                _ => {
                    layer.w.iter().zip(gw.iter()).all(|(&w, &g)| (w + -lr * g).is_finite())
                        && layer.b.iter().zip(gb.iter()).all(|(&b, &g)| (b + -lr * g).is_finite())
                }
            }
        });
        if finite {
            self.sgd_step(grads, lr);
        }
        finite
    }

    /// Plain SGD: every weight `θ ← θ - lr · g`.
    pub fn sgd_step(&mut self, grads: &Grads, lr: f64) {
        for ((layer, gw), gb) in self.layers.iter_mut().zip(&grads.w).zip(&grads.b) {
            layer.w.scaled_add(-lr, gw);
            layer.b.scaled_add(-lr, gb);
        }
    }

    /// Rounds every weight to the nearest `f32` and makes [`Serialize`] write `f32` text
    /// (a model file half the size, loaded back exactly).
    pub fn round_to_f32(&mut self) {
        for layer in &mut self.layers {
            layer.w.mapv_inplace(|v| f64::from(v as f32));
            layer.b.mapv_inplace(|v| f64::from(v as f32));
        }
        self.precision = TextPrecision::F32;
    }

    /// Whether every weight is finite (SGD at a large learning rate can diverge).
    pub fn is_finite(&self) -> bool {
        self.layers.iter().all(|l| l.w.iter().chain(l.b.iter()).all(|v| v.is_finite()))
    }
}

/// Mean squared error over every output: `L = (1/(B·K)) Σ_b Σ_k (y_bk - t_bk)²` for
/// `out`, `target` of shape `(B, K)`; returns `(L, dL/d out)`.
pub fn mse(out: &Array2<f64>, target: &Array2<f64>) -> (f64, Array2<f64>) {
    assert_eq!(out.dim(), target.dim(), "output and target shapes differ");
    let n = out.len().max(1) as f64;
    let diff = out - target;
    let loss = diff.iter().map(|d| d * d).sum::<f64>() / n;
    (loss, diff * (2.0 / n))
}

/// Mean squared error weighted per output: `L = Σ w_bk (y_bk - t_bk)² / Σ w_bk`
/// (e.g. `w` = 1 on the outputs that have a label, 0 elsewhere); `out`,
/// `target`, `weight` of shape `(B, K)`; returns `(L, dL/d out)`; 0 and a zero
/// gradient when every weight is 0.
pub fn mse_masked(out: &Array2<f64>, target: &Array2<f64>, weight: &Array2<f64>) -> (f64, Array2<f64>) {
    assert!(out.dim() == target.dim() && out.dim() == weight.dim(), "output, target and weight shapes differ");
    let wsum: f64 = weight.sum();
    if wsum <= 0.0 {
        return (0.0, Array2::zeros(out.dim()));
    }
    let diff = out - target;
    let loss = diff.iter().zip(weight.iter()).map(|(d, w)| w * d * d).sum::<f64>() / wsum;
    let mut grad = diff * weight;
    grad *= 2.0 / wsum;
    (loss, grad)
}

/// Mean squared error on one selected output per row (Q-learning: only the taken action's
/// Q-value has a target): `L = (1/B) Σ_b (y[b, sel_b] - t_b)²`; the gradient is zero on
/// every other output. `out (B, K)`, `selected`, `target` of length `B`; returns
/// `(L, dL/d out)`.
pub fn mse_selected(out: &Array2<f64>, selected: &[usize], target: &[f64]) -> (f64, Array2<f64>) {
    let b = out.nrows();
    assert!(selected.len() == b && target.len() == b, "one selection and target per row");
    let mut grad = Array2::<f64>::zeros(out.dim());
    let mut loss = 0.0;
    let nb = b.max(1) as f64;
    for (r, (&k, &t)) in selected.iter().zip(target).enumerate() {
        let d = out[[r, k]] - t;
        loss += d * d;
        grad[[r, k]] = 2.0 * d / nb;
    }
    (loss / nb, grad)
}

// ---- serialisation ----

#[derive(Serialize, Deserialize)]
struct DenseWire {
    n_in: usize,
    n_out: usize,
    /// Row-major weights, space-separated.
    w: String,
    /// Bias, space-separated.
    b: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MlpWire {
    output: OutputActivation,
    precision: TextPrecision,
    layers: Vec<DenseWire>,
}

fn write_values<'a>(values: impl Iterator<Item = &'a f64>, p: TextPrecision) -> String {
    let mut s = String::new();
    for (i, v) in values.enumerate() {
        if i > 0 {
            s.push(' ');
        }
        match p {
            TextPrecision::F64 => s.push_str(&format!("{v:?}")),
            TextPrecision::F32 => s.push_str(&format!("{:?}", *v as f32)),
        }
    }
    s
}

fn read_values(s: &str, n: usize, p: TextPrecision, what: &str) -> Result<Vec<f64>, String> {
    let mut out = Vec::with_capacity(n);
    for (i, tok) in s.split_ascii_whitespace().enumerate() {
        let v = match p {
            TextPrecision::F64 => tok.parse::<f64>().map_err(|e| e.to_string()),
            TextPrecision::F32 => tok.parse::<f32>().map(f64::from).map_err(|e| e.to_string()),
        }
        .map_err(|e| format!("{what}: value {} ({tok:?}) is not a number: {e}", i + 1))?;
        if !v.is_finite() {
            return Err(format!("{what}: value {} ({tok:?}) is not finite", i + 1));
        }
        out.push(v);
    }
    if out.len() != n {
        return Err(format!("{what}: {} values, expected {n}", out.len()));
    }
    Ok(out)
}

impl From<Mlp> for MlpWire {
    fn from(m: Mlp) -> Self {
        let p = m.precision;
        let layers = m
            .layers
            .iter()
            .map(|l| DenseWire {
                n_in: l.n_in(),
                n_out: l.n_out(),
                w: write_values(l.w.iter(), p),
                b: write_values(l.b.iter(), p),
            })
            .collect();
        MlpWire { output: m.output, precision: p, layers }
    }
}

impl TryFrom<MlpWire> for Mlp {
    type Error = String;
    fn try_from(w: MlpWire) -> Result<Self, String> {
        if w.layers.is_empty() {
            return Err("an MLP needs at least one layer".into());
        }
        let mut layers = Vec::with_capacity(w.layers.len());
        for (i, l) in w.layers.iter().enumerate() {
            if l.n_in == 0 || l.n_out == 0 {
                return Err(format!("layer {}: zero width ({} x {})", i + 1, l.n_in, l.n_out));
            }
            if i > 0 && l.n_in != w.layers[i - 1].n_out {
                return Err(format!(
                    "layer {}: n_in {} does not match layer {}'s n_out {}",
                    i + 1,
                    l.n_in,
                    i,
                    w.layers[i - 1].n_out
                ));
            }
            let wv = read_values(&l.w, l.n_in * l.n_out, w.precision, &format!("layer {} w", i + 1))?;
            let bv = read_values(&l.b, l.n_out, w.precision, &format!("layer {} b", i + 1))?;
            layers.push(Dense {
                w: Array2::from_shape_vec((l.n_in, l.n_out), wv).map_err(|e| e.to_string())?,
                b: Array1::from(bv),
            });
        }
        Ok(Mlp { layers, output: w.output, precision: w.precision })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    /// A hand-computed forward pass: one hidden unit.
    #[test]
    fn forward_matches_hand_arithmetic() {
        // x = [1, 2]; hidden: z = 1*0.5 + 2*(-1) + 0.25 = -1.25 -> relu 0, and
        // z2 = 1*1 + 2*1 + 0 = 3 -> 3; output = 0*2 + 3*(-0.5) + 1 = -0.5.
        let mut m = Mlp::new(&[2, 2, 1], OutputActivation::Linear, &mut rng(1));
        m.layers[0].w = ndarray::array![[0.5, 1.0], [-1.0, 1.0]];
        m.layers[0].b = ndarray::array![0.25, 0.0];
        m.layers[1].w = ndarray::array![[2.0], [-0.5]];
        m.layers[1].b = ndarray::array![1.0];
        assert_eq!(m.forward_one(&[1.0, 2.0]), vec![-0.5]);
        m.output = OutputActivation::Sigmoid;
        assert!((m.forward_one(&[1.0, 2.0])[0] - 1.0 / (1.0 + 0.5f64.exp())).abs() < 1e-15);
    }

    /// Every analytic gradient (weights, biases, input) against central differences,
    /// `(L(θ+h) - L(θ-h)) / 2h` with h = 1e-6, relative error < 1e-6, for both losses and
    /// both output activations.
    #[test]
    fn gradients_match_central_differences() {
        for output in [OutputActivation::Linear, OutputActivation::Sigmoid] {
            let mut r = rng(42);
            let m = Mlp::new(&[4, 6, 5, 3], output, &mut r);
            let x = Array2::from_shape_fn((5, 4), |_| r.gen_range(-1.0..1.0));
            let t = Array2::from_shape_fn((5, 3), |_| r.gen_range(-1.0..1.0));
            let sel = [0usize, 2, 1, 1, 0];
            let ts = [0.3, -0.2, 0.9, 0.1, -0.7];
            for selected in [false, true] {
                // `selected` also checks the masked loss, weights 1 on the
                // selected outputs (the same loss as `mse_selected`, over B).
                let mut w = Array2::<f64>::zeros((5, 3));
                for (r, &k) in sel.iter().enumerate() {
                    w[[r, k]] = 1.0;
                }
                let mut tm = t.clone();
                for (r, (&k, &v)) in sel.iter().zip(&ts).enumerate() {
                    tm[[r, k]] = v;
                }
                assert!(
                    (mse_masked(&m.forward(x.view()), &tm, &w).0 - mse_selected(&m.forward(x.view()), &sel, &ts).0)
                        .abs()
                        < 1e-15
                );
                let loss = |m: &Mlp, x: &Array2<f64>| {
                    let y = m.forward(x.view());
                    if selected { mse_selected(&y, &sel, &ts).0 } else { mse(&y, &t).0 }
                };
                let tr = m.forward_trace(x.view());
                let d = if selected { mse_selected(tr.output(), &sel, &ts).1 } else { mse(tr.output(), &t).1 };
                if selected {
                    let dm = mse_masked(tr.output(), &tm, &w).1;
                    assert!(d.iter().zip(dm.iter()).all(|(a, b)| (a - b).abs() < 1e-15));
                }
                let g = m.backward(&tr, &d);
                let h = 1e-6;
                let check = |analytic: f64, plus: f64, minus: f64, what: &str| {
                    let numeric = (plus - minus) / (2.0 * h);
                    let scale = analytic.abs().max(numeric.abs()).max(1e-8);
                    let rel = (analytic - numeric).abs() / scale;
                    assert!(rel < 1e-6, "{what}: analytic {analytic} numeric {numeric} rel {rel}");
                };
                for l in 0..m.layers.len() {
                    for idx in 0..m.layers[l].w.len() {
                        let (i, j) = (idx / m.layers[l].n_out(), idx % m.layers[l].n_out());
                        let (mut p, mut q) = (m.clone(), m.clone());
                        p.layers[l].w[[i, j]] += h;
                        q.layers[l].w[[i, j]] -= h;
                        check(g.w[l][[i, j]], loss(&p, &x), loss(&q, &x), &format!("w{l}[{i},{j}]"));
                    }
                    for j in 0..m.layers[l].n_out() {
                        let (mut p, mut q) = (m.clone(), m.clone());
                        p.layers[l].b[j] += h;
                        q.layers[l].b[j] -= h;
                        check(g.b[l][j], loss(&p, &x), loss(&q, &x), &format!("b{l}[{j}]"));
                    }
                }
                for i in 0..x.nrows() {
                    for j in 0..x.ncols() {
                        let (mut xp, mut xq) = (x.clone(), x.clone());
                        xp[[i, j]] += h;
                        xq[[i, j]] -= h;
                        check(g.input[[i, j]], loss(&m, &xp), loss(&m, &xq), &format!("x[{i},{j}]"));
                    }
                }
            }
        }
    }

    /// XOR is not linearly separable: a 2-8-1 ReLU net trained by full-batch SGD
    /// (lr 0.1, 2,000 steps) reaches MSE < 0.01 (a linear model's best is 0.25: the mean 0.5
    /// predicted everywhere) and classifies all four points.
    #[test]
    fn weight_gradients_into_reused_buffers_equal_the_full_backward() {
        // The buffer-reusing, input-gradient-free path must give the weight and bias
        // gradients of `backward` bit for bit (LDWP trains with it), on a second call
        // into the same (dirty) buffers too; and the guarded step equals the plain one.
        let mut r = rng(7);
        let mut m = Mlp::new(&[5, 7, 3], OutputActivation::Linear, &mut r);
        let mut buf = Grads::empty();
        for step in 0..2 {
            let x = Array2::from_shape_fn((4, 5), |_| r.gen_range(-1.0..1.0));
            let t = Array2::from_shape_fn((4, 3), |_| r.gen_range(-1.0..1.0));
            let tr = m.forward_trace(x.view());
            let d = mse(tr.output(), &t).1;
            let full = m.backward(&tr, &d);
            m.backward_weights_into(&tr, &d, &mut buf);
            assert_eq!(buf.w, full.w, "step {step}");
            assert_eq!(buf.b, full.b, "step {step}");
            assert_eq!(buf.input.dim(), (0, 0));
            assert_eq!(full.input.dim(), (4, 5));
            let mut plain = m.clone();
            plain.sgd_step(&full, 0.05);
            assert!(m.sgd_step_if_finite(&buf, 0.05));
            assert_eq!(m, plain);
        }
        // A step that overflows a weight is refused and leaves the weights as they were:
        // w + (-lr · g) with g = -1e308 and lr = 1e10 is +inf.
        let before = m.clone();
        let mut huge = buf.clone();
        huge.w[0][[0, 0]] = -1e308;
        assert!(!m.sgd_step_if_finite(&huge, 1e10));
        assert_eq!(m, before);
    }

    #[test]
    fn learns_xor() {
        let x = ndarray::array![[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]];
        let t = ndarray::array![[0.0], [1.0], [1.0], [0.0]];
        let mut m = Mlp::new(&[2, 8, 1], OutputActivation::Linear, &mut rng(3));
        let mut loss = f64::INFINITY;
        for _ in 0..2000 {
            let tr = m.forward_trace(x.view());
            let (l, d) = mse(tr.output(), &t);
            loss = l;
            let g = m.backward(&tr, &d);
            m.sgd_step(&g, 0.1);
        }
        assert!(loss < 0.01, "XOR loss {loss}");
        let y = m.forward(x.view());
        for (yi, ti) in y.iter().zip(t.iter()) {
            assert_eq!(*yi > 0.5, *ti > 0.5, "output {yi} for target {ti}");
        }
    }

    /// A linear map y = 2 x0 - 3 x1 + 1 learned through the selected-output loss on one of
    /// two heads (the other head's weights into it get no gradient).
    #[test]
    fn learns_linear_map_through_selected_output() {
        let mut r = rng(5);
        let mut m = Mlp::new(&[2, 16, 2], OutputActivation::Linear, &mut r);
        let before_head1: Vec<f64> = m.layers[1].w.column(1).to_vec();
        let mut loss = f64::INFINITY;
        for _ in 0..3000 {
            let x = Array2::from_shape_fn((20, 2), |_| r.gen_range(-1.0..1.0));
            let t: Vec<f64> = x.rows().into_iter().map(|row| 2.0 * row[0] - 3.0 * row[1] + 1.0).collect();
            let tr = m.forward_trace(x.view());
            let (l, d) = mse_selected(tr.output(), &[0; 20], &t);
            loss = l;
            let g = m.backward(&tr, &d);
            m.sgd_step(&g, 0.02);
        }
        assert!(loss < 1e-3, "linear-map loss {loss}");
        assert_eq!(m.layers[1].w.column(1).to_vec(), before_head1);
    }

    #[test]
    fn serialisation_round_trips_exactly() {
        let mut m = Mlp::new(&[3, 7, 2], OutputActivation::Sigmoid, &mut rng(9));
        m.layers[0].w[[0, 0]] = 0.1 + 0.2; // 0.30000000000000004: needs all 17 digits
        m.layers[1].b[1] = -1e-300;
        let text = serde_json::to_string(&m).unwrap();
        let back: Mlp = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        m.round_to_f32();
        let text32 = serde_json::to_string(&m).unwrap();
        assert!(text32.len() < text.len());
        let back32: Mlp = serde_json::from_str(&text32).unwrap();
        assert_eq!(back32, m);
    }

    #[test]
    fn bad_files_are_errors_naming_the_layer() {
        let m = Mlp::new(&[2, 3, 1], OutputActivation::Linear, &mut rng(1));
        let mut v: serde_json::Value = serde_json::to_value(&m).unwrap();
        v["layers"][1]["n_in"] = 4.into();
        let e = serde_json::from_value::<Mlp>(v.clone()).unwrap_err().to_string();
        assert!(e.contains("layer 2: n_in 4"), "{e}");
        v["layers"][1]["n_in"] = 3.into();
        v["layers"][0]["w"] = "1 2 x 4 5 6".into();
        let e = serde_json::from_value::<Mlp>(v.clone()).unwrap_err().to_string();
        assert!(e.contains("layer 1 w: value 3"), "{e}");
        v["layers"][0]["w"] = "1 2 3".into();
        let e = serde_json::from_value::<Mlp>(v).unwrap_err().to_string();
        assert!(e.contains("3 values, expected 6"), "{e}");
    }

    #[test]
    fn initialisation_is_seeded_and_bounded() {
        let a = Mlp::new(&[10, 256, 128, 4], OutputActivation::Linear, &mut rng(7));
        let b = Mlp::new(&[10, 256, 128, 4], OutputActivation::Linear, &mut rng(7));
        assert_eq!(a, b);
        assert_eq!(a.n_params(), 10 * 256 + 256 + 256 * 128 + 128 + 128 * 4 + 4);
        let he0 = (6.0f64 / 10.0).sqrt();
        assert!(a.layers[0].w.iter().all(|w| w.abs() < he0));
        let glorot = (6.0f64 / 132.0).sqrt();
        assert!(a.layers[2].w.iter().all(|w| w.abs() < glorot));
        assert!(a.layers[2].w.iter().any(|w| w.abs() > 0.5 * glorot));
    }
}
