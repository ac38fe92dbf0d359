//! Derives the profile database from the public measurements in
//! `../shared/profiles` (`dlsched profile import`). Every conversion is here,
//! and explained again in `src/profile/data/README.md`:
//!
//! - **Gavel** (OSDI'20, MIT), `gavel/gavel_throughputs_flat.csv`, rows with
//!   `source = simulation` only → throughput rows (K80/P100/V100) and
//!   co-location rows.
//! - **Pollux** (OSDI'21, Apache-2.0), `pollux/<model>/placements.csv` → T4
//!   throughput rows.
//! - **Sia** (SOSP'23), `sia/<model>/placements-<suffix>.csv` → V100, A100,
//!   RTX 2080 Ti and Quadro RTX 6000 throughput rows.
//! - **Chronus** (SoCC'21, MIT), `chronus/model_info.json` → multi-node rows.
//! - **ElasticFlow** (ASPLOS'23, Apache-2.0),
//!   `elasticflow/throughputs_A100/<model>.csv` → A100 throughput rows on 1
//!   to 64 GPUs (see `elasticflow` below). Its `throughputs_T4/` is skipped: the
//!   ElasticFlow README says it was taken from the Pollux data, imported above.
//! - `models.csv` from the static [`MODEL_FACTS`] table below (papers and
//!   model zoos, cited per row).
//!
//! Lucid's profiles (`lucid/`) are deliberately not imported: their licence
//! (S-Lab License 1.0) forbids commercial use, and the default tables must be
//! usable by anyone who can use this crate.
//!
//! The output is deterministic: rows are sorted, numbers rounded to 6
//! significant digits ([`round_num`]), and nothing depends on hash order, so
//! re-running the import gives byte-identical files.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::TraceError;
use crate::profile::db::{
    ColocRow, MemoryRow, ModelInfo, MultiNodeRow, ProfileDb, Rec, Split, ThroughputRow, read_csv, round_num,
};

/// Gavel job-type names `<prefix> (batch size N)` → canonical model (the batch
/// is the per-GPU batch N). Datasets from Gavel's `scheduler/job_table.py` and
/// its OSDI'20 paper, Table 2.
pub const GAVEL_MODELS: [(&str, &str); 5] = [
    ("ResNet-18", "resnet18-cifar10"),
    ("ResNet-50", "resnet50-imagenet"),
    // Gavel trains the Transformer on `multi30k.atok.low.pt` (Multi30k de-en,
    // the WMT'16 multimodal task's data), not the WMT'16 news corpus.
    ("Transformer", "transformer-multi30k"),
    ("LM", "lstm-wikitext2"),
    ("Recommendation", "autoencoder-ml20m"),
];

/// Gavel job types whose name has no batch size → (canonical model, batch).
///
/// - CycleGAN: Gavel's `cyclegan.py` is run without `--batch_size`, whose
///   default is 1 image.
/// - A3C has no mini-batch. Gavel runs `main.py --env PongDeterministic-v4
///   --workers 4`; one counted iteration is one update of a worker after a
///   rollout of `--num-steps` (default 20) environment steps, so 20
///   transitions per iteration is recorded as the batch.
pub const GAVEL_FIXED_BATCH: [(&str, &str, u32); 2] =
    [("A3C", "a3c-pong", 20), ("CycleGAN", "cyclegan-monet2photo", 1)];

/// Pollux/Sia model folders → canonical model (datasets from the Pollux
/// artifact's `benchmark/models/*`: BERT-base fine-tuned on SQuAD v1.1,
/// ResNet-18 on CIFAR-10, DeepSpeech2 on CMU-ARCTIC (VoxForge manifests),
/// ResNet-50 on ImageNet, NeuMF on MovieLens-1M (`ml-1m` in `ncf/config.py`),
/// YOLOv3 on PASCAL VOC). `gpt_pmp` (Sia only, pipeline model parallelism) is
/// skipped: its "placement" is a pipeline layout, not data-parallel replicas.
pub const POLLUX_MODELS: [(&str, &str); 6] = [
    ("bert", "bert-squad"),
    ("cifar10", "resnet18-cifar10"),
    ("deepspeech2", "deepspeech2-cmuarctic"),
    ("imagenet", "resnet50-imagenet"),
    ("ncf", "ncf-ml1m"),
    ("yolov3", "yolov3-voc"),
];

/// Sia file suffixes → GPU type. `aws` (T4) is skipped: identical to Pollux's
/// files. `dgx` is skipped: a subset of `dgx-ext` (fewer batch sizes).
pub const SIA_GPUS: [(&str, &str); 4] =
    [("azure", "v100"), ("dgx-ext", "a100"), ("rtx", "rtx2080ti"), ("quad", "quadro6000")];

/// Chronus model names → canonical model. Chronus's table names torchvision
/// ImageNet architectures; its artifact does not state the dataset, ImageNet
/// (the architectures' input size and classifier) is assumed.
pub const CHRONUS_MODELS: [(&str, &str); 5] = [
    ("alexnet", "alexnet-imagenet"),
    ("vgg16", "vgg16-imagenet"),
    ("resnet101", "resnet101-imagenet"),
    ("mobilenet_v2", "mobilenetv2-imagenet"),
    ("inception_v3", "inceptionv3-imagenet"),
];

/// ElasticFlow `throughputs_A100/<file>.csv` → canonical model. What each
/// file measured is checked against the ElasticFlow artifact
/// (pkusys/ElasticFlow, `ElasticFlow/elastic-training-executor/`: `utils.py`
/// `model_list()` builds the models the trainer runs, the `*_ddp.py` workloads
/// load the data):
///
/// - `bert`: Hugging Face `BertForSequenceClassification` from
///   **`bert-large-uncased`** (2 labels), not the BERT-base SQuAD model of
///   Pollux/Sia (`bert-squad`), so it gets its own name. The training data is
///   a preprocessed `data.pth` that is not in the repository; of the testbed
///   datasets the README lists (ImageNet, CoLA, aclImdb, LibriSpeech) the
///   other workloads use ImageNet, aclImdb and LibriSpeech, so CoLA (binary
///   acceptability) is assumed.
/// - `deepspeech2`: a DeepSpeech2-style model defined in the artifact (3
///   residual CNN layers, 5 bidirectional GRU layers of 512, 128 mel bins, 29
///   labels) trained on LibriSpeech `train-clean-100`: neither the model nor
///   the data of Pollux's `deepspeech2-cmuarctic`, so its own name.
/// - `gpt2`: `GPT2ForSequenceClassification` from Hugging Face `gpt2`
///   (GPT-2 small, 12 layers, d_model 768, 124 M) with 2 labels, fine-tuned
///   on the IMDB movie reviews (`aclImdb/train`, sentiment), sequences
///   truncated to 60 tokens.
/// - `inception3`: torchvision `inception_v3(aux_logits=False)`, ImageNet,
///   299×299 crops (the `inceptionv3-imagenet` row counts the auxiliary head,
///   which is not trained here).
/// - `resnet50`, `vgg16`: torchvision `resnet50`, `vgg16`, ImageNet.
/// - `resnet50_cifar10`: torchvision `resnet50` with a 10-class head, on
///   32×32 CIFAR-10 images (not resized), so not `resnet18-cifar10`.
pub const ELASTICFLOW_MODELS: [(&str, &str); 7] = [
    ("bert", "bert-large-cola"),
    ("deepspeech2", "deepspeech2-librispeech"),
    ("gpt2", "gpt2-imdb"),
    ("inception3", "inceptionv3-imagenet"),
    ("resnet50", "resnet50-imagenet"),
    ("resnet50_cifar10", "resnet50-cifar10"),
    ("vgg16", "vgg16-imagenet"),
];

/// ElasticFlow's GPU-count columns (after `global_batch_size`).
pub const ELASTICFLOW_GPUS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

/// GPUs per server on ElasticFlow's A100 testbed: the ElasticFlow README's
/// testbed section ("up to 16 VMs, each with 8 A100 GPUs", Azure
/// Standard_ND96asr_A100).
pub const ELASTICFLOW_GPUS_PER_SERVER: u32 = 8;

/// Per-model facts: (model, family, millions of parameters, training GFLOPs
/// per sample, source). Training FLOPs = 3 × forward FLOPs (backward ≈ 2 ×
/// forward), one multiply-add = 2 FLOPs; torchvision's "GFLOPS" column counts
/// multiply-adds, so training GFLOPs = 6 × that figure. NaN = unknown (the
/// source says why). Tiresias's `model_summary.csv` (total large-tensor MB / 4
/// ≈ million fp32 parameters, large tensors only, so a lower bound)
/// corroborates: alexnet 235.8 MB → 59 M (61.1), vgg16 526.8 → 132 M (138.4),
/// resnet50 80.6 → 20 M (25.6), resnet101 119.7 → 30 M (44.5), inception3
/// 56.6 → 14 M (27.2).
pub const MODEL_FACTS: [(&str, &str, f64, f64, &str); 20] = [
    (
        "a3c-pong",
        "rl",
        3.2496,
        f64::NAN,
        "Mnih et al. 2016 (A3C); parameters computed here from A3Clstm of dgriff777/rl_a3c_pytorch as used by Gavel \
         (4 conv + LSTMCell 1024->512 + heads, 6 Pong actions); GFLOPs unknown (RL: cost per update depends on the rollout)",
    ),
    (
        "alexnet-imagenet",
        "cnn",
        61.1008,
        4.26,
        "Krizhevsky et al. 2012; torchvision alexnet (61.1 M params, 0.71 GMAC at 224x224)",
    ),
    (
        "autoencoder-ml20m",
        "recsys",
        f64::NAN,
        f64::NAN,
        "Recoder DynamicAutoencoder (one 200-unit tanh layer, negative sampling) as in Gavel's recommendation/train.py; \
         size is 2 x 200 x the input dimension (ML-20M items or users after preprocessing), not recorded: unknown",
    ),
    (
        "bert-large-cola",
        "transformer",
        335.144,
        f64::NAN,
        "Devlin et al. 2019 (BERT-large uncased, 24 layers, d_model 1024); parameters computed here for \
         BertForSequenceClassification with 2 labels (335.142 M + 2,050 head) as built by ElasticFlow's \
         elastic-training-executor/utils.py; dataset CoLA assumed (ElasticFlow README dataset list); GFLOPs unknown \
         (sequence length of its preprocessed data.pth not recorded)",
    ),
    (
        "bert-squad",
        "transformer",
        109.48,
        204.0,
        "Devlin et al. 2019 (BERT-base uncased, 110 M; Hugging Face count 109.48 M); GFLOPs estimated here for 384-token \
         SQuAD sequences as 3 x forward with forward = 2 x 84.9 M non-embedding params + attention per token (Kaplan et al. 2020)",
    ),
    (
        "cyclegan-monet2photo",
        "gan",
        28.2858,
        f64::NAN,
        "Zhu et al. 2017; 2 ResNet-9-block generators (11.378 M each) + 2 PatchGAN discriminators (2.765 M each), \
         counted here from the PyTorch-GAN implementation Gavel uses; GFLOPs unknown (6 generator passes per step, 256x256)",
    ),
    (
        "deepspeech2-cmuarctic",
        "rnn",
        41.188,
        f64::NAN,
        "Amodei et al. 2016; parameters computed here for the Pollux benchmark's deepspeech.pytorch model \
         (2 conv + 5 bidirectional GRU layers of 800, 161 spectrogram bins, 29 labels); GFLOPs unknown (depend on utterance length)",
    ),
    (
        "deepspeech2-librispeech",
        "rnn",
        23.7054,
        f64::NAN,
        "Amodei et al. 2016 style model of ElasticFlow's elastic-training-executor (3 residual CNN + 5 bidirectional \
         GRU layers of 512, 128 mel bins, 29 labels), LibriSpeech train-clean-100; parameters computed here; GFLOPs \
         unknown (depend on utterance length)",
    ),
    (
        "gpt2-imdb",
        "transformer",
        124.441,
        30.82,
        "Radford et al. 2019 (GPT-2 small, Hugging Face `gpt2`, 124.44 M) with a 2-label sequence-classification head \
         (1,536 params), IMDB reviews (Maas et al. 2011), as in ElasticFlow's GPT2/gpt2_ddp.py; GFLOPs estimated here \
         for 60-token samples (its max_length) as 3 x forward with forward = 2 x 85.05 M non-embedding params + \
         attention per token (Kaplan et al. 2020)",
    ),
    (
        "inceptionv3-imagenet",
        "cnn",
        27.1613,
        34.26,
        "Szegedy et al. 2016; torchvision inception_v3 (27.16 M params incl. aux head, 5.71 GMAC at 299x299)",
    ),
    (
        "lstm-wikitext2",
        "rnn",
        13.9877,
        1.532,
        "Zaremba et al. 2014 style 2-layer LSTM (pytorch/examples word_language_model, emsize=nhid=200, untied) as in Gavel; \
         params and GFLOPs computed here for the WikiText-2 vocabulary (33,278) and 35-token samples (bptt)",
    ),
    (
        "mobilenetv2-imagenet",
        "cnn",
        3.50487,
        1.8,
        "Sandler et al. 2018; torchvision mobilenet_v2 (3.50 M params, 0.30 GMAC at 224x224)",
    ),
    (
        "ncf-ml1m",
        "recsys",
        1.60266,
        0.000259,
        "He et al. 2017 (NeuMF-end, 32 factors, 3 MLP layers) as in the Pollux benchmark (guoyang9/NCF); params and GFLOPs \
         computed here for MovieLens-1M (6,040 users, 3,706 items); a sample is one (user, item) pair",
    ),
    (
        "resnet101-imagenet",
        "cnn",
        44.5492,
        46.8,
        "He et al. 2016; torchvision resnet101 (44.55 M params, 7.80 GMAC at 224x224)",
    ),
    (
        "resnet18-cifar10",
        "cnn",
        11.174,
        3.34,
        "He et al. 2016; kuangliu/pytorch-cifar ResNet18 as used by Gavel and Pollux (11.17 M params, 0.56 GMAC at 32x32)",
    ),
    (
        "resnet50-cifar10",
        "cnn",
        23.5285,
        0.5006,
        "He et al. 2016; torchvision resnet50 with a 10-class head as in ElasticFlow (23.53 M params); at 32x32 every \
         feature map is 1/49 of the 224x224 one: 0.0834 GMAC computed here, x6",
    ),
    (
        "resnet50-imagenet",
        "cnn",
        25.557,
        24.54,
        "He et al. 2016; torchvision resnet50 (25.56 M params, 4.09 GMAC at 224x224)",
    ),
    (
        "transformer-multi30k",
        "transformer",
        f64::NAN,
        f64::NAN,
        "Vaswani et al. 2017 base config (6+6 layers, d_model 512, d_ff 2048; 44 M non-embedding params) in \
         jadore801120/attention-is-all-you-need-pytorch as used by Gavel; Multi30k vocabulary size not recorded: \
         total params and GFLOPs per sentence unknown",
    ),
    (
        "vgg16-imagenet",
        "cnn",
        138.358,
        92.8,
        "Simonyan & Zisserman 2015; torchvision vgg16 (138.36 M params, 15.47 GMAC at 224x224)",
    ),
    (
        "yolov3-voc",
        "cnn",
        61.626,
        229.0,
        "Redmon & Farhadi 2018 (Darknet-53, 61.95 M params with the 80-class head; 20-class VOC head computed here: \
         61.63 M); 65.86 GFLOPs forward at 416x416 (darknet), scaled to the Pollux training size 448x448, x3",
    ),
];

/// Reads the public measurements under `from` (the `profiles` folder of
/// `../shared`) and derives the four tables, sorted and rounded as written.
///
/// # Errors
/// A missing or malformed input file, a Gavel job type or Chronus model with
/// no canonical name here, or a model used in a table with no
/// [`MODEL_FACTS`] row; each error names the file and what to add.
pub fn import(from: &Path) -> Result<ProfileDb, TraceError> {
    let mut db = ProfileDb::default();
    gavel(from, &mut db)?;
    for (dir, model) in POLLUX_MODELS {
        let file = from.join("pollux").join(dir).join("placements.csv");
        placements(&file, model, "t4", "pollux", &mut db.throughput)?;
    }
    for (dir, model) in POLLUX_MODELS {
        for (suffix, gpu) in SIA_GPUS {
            let file = from.join("sia").join(dir).join(format!("placements-{suffix}.csv"));
            placements(&file, model, gpu, "sia", &mut db.throughput)?;
        }
    }
    for (file, model) in ELASTICFLOW_MODELS {
        let path = from.join("elasticflow").join("throughputs_A100").join(format!("{file}.csv"));
        elasticflow(&path, model, &mut db.throughput)?;
    }
    chronus(&from.join("chronus").join("model_info.json"), &mut db.multinode)?;
    let used: Vec<String> = {
        let names: std::collections::BTreeSet<&str> = db.models().collect();
        names.into_iter().map(str::to_string).collect()
    };
    for name in &used {
        let Some(&(model, family, params_m, gflops, source)) = MODEL_FACTS.iter().find(|f| f.0 == name) else {
            return Err(TraceError::Format {
                file: from.to_path_buf(),
                message: format!("model `{name}` has no row in MODEL_FACTS (src/profile/import.rs); add one"),
            });
        };
        let Some(&(_, state_bytes, act_mib, mem_source)) = MEMORY_FACTS.iter().find(|f| f.0 == name) else {
            return Err(TraceError::Format {
                file: from.to_path_buf(),
                message: format!("model `{name}` has no row in MEMORY_FACTS (src/profile/import.rs); add one"),
            });
        };
        db.models.push(ModelInfo {
            model: model.to_string(),
            family: family.to_string(),
            params_m: round_num(params_m),
            gflops_per_sample: round_num(gflops),
            source: source.to_string(),
            state_bytes_per_param: round_num(state_bytes),
            act_mib_per_sample: round_num(act_mib),
            mem_source: mem_source.to_string(),
        });
    }
    db.sort();
    Ok(db)
}

/// GPU-memory facts per model for the analytical estimate
/// ([`crate::profile::db::ProfileDb::estimated_gpu_mem_mib`]): (model, bytes
/// of model state per parameter, fp32 activation MiB saved for backward per
/// sample or NaN when not derived, derivation). Not measurements: derived here
/// from each architecture as `src/profile/data/README.md` ("GPU memory
/// estimate") explains, with the arithmetic in
/// `src/profile/data/activations.py`. Optimizer state (ZeRO, Rajbhandari et
/// al., SC'20, section 3.1, counted in fp32): SGD with momentum = 4 weight + 4
/// gradient + 4 momentum = 12 B/parameter (the image CNNs' reference recipes);
/// Adam = 4 + 4 + 8 (two moments) = 16 B/parameter (everything else).
pub const MEMORY_FACTS: [(&str, f64, f64, &str); 20] = [
    (
        "a3c-pong",
        16.0,
        2.13238,
        "Adam (rl_a3c_pytorch shared Adam); act: conv/LSTM outputs of one 80x80 step x2 tensors x4 B",
    ),
    (
        "alexnet-imagenet",
        12.0,
        3.77032,
        "SGD momentum (torchvision reference); act: conv+fc outputs at 224x224 x2 x4 B",
    ),
    ("autoencoder-ml20m", 16.0, f64::NAN, "Adam; act not derived (input dimension not recorded): family fallback"),
    (
        "bert-large-cola",
        16.0,
        253.0,
        "Adam; act: Korthikanti et al. 2022 per-layer count in fp32 (66sh + 9as^2 B), 24 layers, h 1024, 16 heads, 128 tokens (assumed, GLUE max_seq_length)",
    ),
    (
        "bert-squad",
        16.0,
        407.25,
        "Adam; act: Korthikanti et al. 2022 per-layer count in fp32 (66sh + 9as^2 B), 12 layers, h 768, 12 heads, 384 tokens",
    ),
    (
        "cyclegan-monet2photo",
        16.0,
        1527.0,
        "Adam; act: 6 generator + 2 discriminator passes per 256x256 step, conv outputs x2 x4 B",
    ),
    (
        "deepspeech2-cmuarctic",
        16.0,
        24.626,
        "Adam (assumed); act: 3 s utterance assumed (150 frames after stride 2): 2 conv x2, 5 BiGRU of 800 (4 gate tensors per direction), x4 B",
    ),
    (
        "deepspeech2-librispeech",
        16.0,
        172.463,
        "AdamW (ElasticFlow trainer); act: 12.7 s mean train-clean-100 utterance (Panayotov et al. 2015: 100.6 h / 28,539) = 635 frames after stride 2: 3 residual CNN blocks, 5 BiGRU of 512, x4 B",
    ),
    (
        "gpt2-imdb",
        16.0,
        39.6057,
        "Adam; act: Korthikanti et al. 2022 per-layer count in fp32 (66sh + 9as^2 B), 12 layers, h 768, 12 heads, 60 tokens",
    ),
    ("inceptionv3-imagenet", 12.0, f64::NAN, "SGD momentum; act not derived: GFLOPs fallback"),
    (
        "lstm-wikitext2",
        8.0,
        9.23332,
        "plain SGD without momentum (pytorch/examples word_language_model): 4 weight + 4 gradient B; act: per token embedding, 2 LSTM layers x (4 gates + c + h) x 200, logits + log-softmax over 33,278 words, 35 tokens x4 B",
    ),
    (
        "mobilenetv2-imagenet",
        12.0,
        50.9576,
        "SGD momentum (torchvision reference); act: conv+fc outputs at 224x224 x2 x4 B",
    ),
    ("ncf-ml1m", 16.0, 0.00427628, "Adam (guoyang9/NCF); act: 1,121 embedding/MLP outputs per (user, item) pair x4 B"),
    (
        "resnet101-imagenet",
        12.0,
        123.847,
        "SGD momentum (torchvision reference); act: conv+fc outputs at 224x224 x2 x4 B",
    ),
    ("resnet18-cifar10", 12.0, 4.68758, "SGD momentum (kuangliu/pytorch-cifar); act: conv+fc outputs at 32x32 x2 x4 B"),
    ("resnet50-cifar10", 12.0, 1.73055, "SGD momentum; act: conv+fc outputs of torchvision resnet50 at 32x32 x2 x4 B"),
    (
        "resnet50-imagenet",
        12.0,
        84.8006,
        "SGD momentum (torchvision reference); act: conv+fc outputs at 224x224 x2 x4 B",
    ),
    (
        "transformer-multi30k",
        16.0,
        18.3008,
        "Adam (Vaswani et al. 2017); act: Korthikanti et al. 2022 fp32 count, 6 encoder + 6 decoder layers (+ cross-attention), h 512, 8 heads, 32 tokens and a 10,000-word target vocabulary assumed",
    ),
    ("vgg16-imagenet", 12.0, 103.43, "SGD momentum (torchvision reference); act: conv+fc outputs at 224x224 x2 x4 B"),
    (
        "yolov3-voc",
        12.0,
        341.144,
        "SGD momentum (darknet); act: conv outputs of Darknet-53 + 3 heads at 448x448 x2 x4 B",
    ),
];

/// A co-location row's key: (GPU type, model a, batch a, model b, batch b).
type PairKey = (String, &'static str, u32, &'static str, u32);

fn read(file: &Path) -> Result<Vec<u8>, TraceError> {
    crate::io::read_csv(file)
}

/// `Gavel job type` → (canonical model, per-GPU batch).
pub fn gavel_job(job: &str) -> Option<(&'static str, u32)> {
    if let Some(&(_, model, bsz)) = GAVEL_FIXED_BATCH.iter().find(|f| f.0 == job) {
        return Some((model, bsz));
    }
    let (prefix, rest) = job.split_once(" (batch size ")?;
    let bsz: u32 = rest.strip_suffix(')')?.parse().ok().filter(|&b| b > 0)?;
    GAVEL_MODELS.iter().find(|m| m.0 == prefix).map(|m| (m.1, bsz))
}

/// A Gavel throughput: finite and ≥ 0 (0 means "not measured").
fn gavel_tput(r: &Rec<'_>, c: usize) -> Result<f64, TraceError> {
    let s = r.str(c);
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(r.err(c, format!("`{s}` is not a throughput (iterations/s, 0 or more)"))),
    }
}

/// Gavel's flat table, `source = simulation` rows.
///
/// - Isolated rows (no co-located job): `scale_factor` k = GPUs. The value is
///   training iterations per second counted across all k workers, so one
///   iteration of the whole job (every worker steps once) takes
///   `iter_time_s = k / throughput`. `consolidated = true` → split `[k]` (one
///   server); `false` → `spread`, only for k > 1 (a 1-GPU job cannot spread).
///   Throughput 0 = not measured: skipped.
/// - Pair rows: only single-GPU pairs (both scale factors 1) with both
///   throughputs > 0 (0 = not measured or cannot share), from the
///   consolidated entries (the unconsolidated pair entries repeat them; one
///   GPU is shared either way). `speed = pair throughput / isolated
///   throughput` of that job type on that GPU type (scale 1, consolidated).
///   Gavel stores each pair in both orders with the same numbers; one row is
///   kept, with (model, batch) of `a` ≤ that of `b`.
fn gavel(from: &Path, db: &mut ProfileDb) -> Result<(), TraceError> {
    const COLS: [&str; 9] = [
        "source",
        "gpu_type",
        "consolidated",
        "job_type",
        "scale_factor",
        "colocated_job_type",
        "colocated_scale_factor",
        "throughput_steps_per_s",
        "colocated_throughput_steps_per_s",
    ];
    let file = from.join("gavel").join("gavel_throughputs_flat.csv");
    let bytes = read(&file)?;
    // (gpu, job type) → isolated single-GPU consolidated throughput.
    let mut isolated: BTreeMap<(String, String), f64> = BTreeMap::new();
    // (gpu, job a, job b, tput a, tput b, line), consolidated single-GPU pairs.
    let mut pairs: Vec<(String, String, String, f64, f64, u64)> = Vec::new();
    read_csv(&file, &bytes, &COLS, |r| {
        if r.str(0) != "simulation" {
            return Ok(());
        }
        let gpu = r.text(1, "GPU type")?.to_ascii_lowercase();
        let consolidated = match r.str(2) {
            "true" | "True" => true,
            "false" | "False" => false,
            s => return Err(r.err(2, format!("`{s}` is not true or false"))),
        };
        let job = r.text(3, "job type")?;
        let (model, bsz) = gavel_job(&job).ok_or_else(|| {
            r.err(3, format!("unknown Gavel job type `{job}`; add it to GAVEL_MODELS in src/profile/import.rs"))
        })?;
        let k = r.pos_u32(4, "workers")?;
        let tput = gavel_tput(r, 7)?;
        if r.str(5).is_empty() {
            if tput <= 0.0 || (!consolidated && k == 1) {
                return Ok(());
            }
            if consolidated && k == 1 {
                isolated.insert((gpu.clone(), job.clone()), tput);
            }
            db.throughput.push(ThroughputRow {
                model: model.to_string(),
                gpu_type: gpu,
                local_bsz: bsz,
                gpus: k,
                split: if consolidated { Split::Exact(vec![k]) } else { Split::Spread },
                iter_time_s: round_num(f64::from(k) / tput),
                source: "gavel".into(),
            });
            return Ok(());
        }
        let other = r.text(5, "job type")?;
        if gavel_job(&other).is_none() {
            return Err(
                r.err(5, format!("unknown Gavel job type `{other}`; add it to GAVEL_MODELS in src/profile/import.rs"))
            );
        }
        let k_other = r.pos_u32(6, "workers")?;
        let tput_other = gavel_tput(r, 8)?;
        if consolidated && k == 1 && k_other == 1 && tput > 0.0 && tput_other > 0.0 {
            pairs.push((gpu, job, other, tput, tput_other, r.line));
        }
        Ok(())
    })?;
    // (gpu, model a, bsz a, model b, bsz b) → (speed a, speed b, from a's own entry).
    let mut rows: BTreeMap<PairKey, (f64, f64, bool)> = BTreeMap::new();
    for (gpu, a, b, ta, tb, line) in &pairs {
        let iso = |job: &String| {
            isolated.get(&(gpu.clone(), job.clone())).copied().ok_or_else(|| TraceError::Field {
                file: file.clone(),
                line: *line,
                column: "job_type".into(),
                message: format!("no isolated single-GPU throughput of `{job}` on {gpu} to normalise the pair by"),
            })
        };
        let (sa, sb) = (ta / iso(a)?, tb / iso(b)?);
        let (ma, ba) = gavel_job(a).expect("checked while reading");
        let (mb, bb) = gavel_job(b).expect("checked while reading");
        if (ma, ba) <= (mb, bb) {
            rows.insert((gpu.clone(), ma, ba, mb, bb), (sa, sb, true));
        } else {
            rows.entry((gpu.clone(), mb, bb, ma, ba)).or_insert((sb, sa, false));
        }
    }
    for ((gpu, ma, ba, mb, bb), (sa, sb, _)) in rows {
        db.colocation.push(ColocRow {
            gpu_type: gpu,
            model_a: ma.to_string(),
            bsz_a: ba,
            model_b: mb.to_string(),
            bsz_b: bb,
            speed_a: round_num(sa),
            speed_b: round_num(sb),
            source: "gavel".into(),
        });
    }
    Ok(())
}

/// A Pollux/Sia `placements*.csv`, columns read by name (their order differs
/// between files): `placement` (digit string, one digit per server = GPUs on
/// it) → split (digits sorted descending: rotations and other orders of the
/// same servers are one split), `local_bsz`, `step_time` (s per iteration) →
/// `iter_time_s`. A (model, GPU, batch, split) measured several times (the
/// rotations of one placement) keeps the median (the mean of the two middle
/// values for an even count).
fn placements(
    file: &Path,
    model: &str,
    gpu: &str,
    source: &str,
    out: &mut Vec<ThroughputRow>,
) -> Result<(), TraceError> {
    let bytes = read(file)?;
    let mut times: BTreeMap<(u32, Vec<u32>), Vec<f64>> = BTreeMap::new();
    read_csv(file, &bytes, &["placement", "local_bsz", "step_time"], |r| {
        let p = r.str(0);
        let counts: Option<Vec<u32>> = p.chars().map(|c| c.to_digit(10).filter(|&d| d > 0)).collect();
        let counts = match counts {
            Some(c) if !c.is_empty() => c,
            _ => return Err(r.err(0, format!("`{p}` is not a placement (one digit 1-9 per server)"))),
        };
        let bsz = r.pos_u32(1, "samples")?;
        let t = r.pos_f64(2, "seconds")?;
        let Split::Exact(split) = Split::from_counts(counts) else { unreachable!("from_counts is exact") };
        times.entry((bsz, split)).or_default().push(t);
        Ok(())
    })?;
    for ((bsz, split), mut ts) in times {
        ts.sort_by(f64::total_cmp);
        let n = ts.len();
        let median = if n % 2 == 1 { ts[n / 2] } else { (ts[n / 2 - 1] + ts[n / 2]) / 2.0 };
        out.push(ThroughputRow {
            model: model.to_string(),
            gpu_type: gpu.to_string(),
            local_bsz: bsz,
            gpus: split.iter().sum(),
            split: Split::Exact(split),
            iter_time_s: round_num(median),
            source: source.to_string(),
        });
    }
    Ok(())
}

/// An ElasticFlow `throughputs_A100/<model>.csv`: `global_batch_size`, then
/// one column per GPU count n in [`ELASTICFLOW_GPUS`]; a cell is the job's
/// training **iterations per second** at that global batch on n GPUs
/// (ElasticFlow's trainer counts iterations of the whole job on rank 0 and
/// gives every GPU `global_batch_size / n` samples).
///
/// - `iter_time_s = 1 / value`; `local_bsz = global_batch_size / n`.
/// - Skipped cells: empty or 0 (not measured; the 0s are `resnet50_cifar10`
///   on 16, 32 and 64 GPUs), or `global_batch_size` not a multiple of n
///   (ElasticFlow's trainer would floor it). In the current files that is 10
///   of 119 cells: 9 zeros and deepspeech2's empty global-batch-32 cell on 64
///   GPUs (32 / 64 is not whole either).
/// - Split (assumed: the files do not record the placement of the profiling
///   runs): n ≤ 8 → one server `[n]`; n > 8 → n / 8 whole servers of
///   [`ELASTICFLOW_GPUS_PER_SERVER`] = 8 A100s each (`8+8`, …).
fn elasticflow(file: &Path, model: &str, out: &mut Vec<ThroughputRow>) -> Result<(), TraceError> {
    const COLS: [&str; 8] = ["global_batch_size", "1", "2", "4", "8", "16", "32", "64"];
    let bytes = read(file)?;
    read_csv(file, &bytes, &COLS, |r| {
        let global = r.pos_u32(0, "samples")?;
        for (c, n) in ELASTICFLOW_GPUS.into_iter().enumerate().map(|(i, n)| (i + 1, n)) {
            let s = r.str(c);
            if s.is_empty() {
                continue;
            }
            let its = match s.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => v,
                _ => return Err(r.err(c, format!("`{s}` is not a throughput (iterations/s, 0 or more)"))),
            };
            if its == 0.0 || global % n != 0 {
                continue;
            }
            let per = ELASTICFLOW_GPUS_PER_SERVER;
            let split = if n <= per { vec![n] } else { vec![per; (n / per) as usize] };
            out.push(ThroughputRow {
                model: model.to_string(),
                gpu_type: "a100".into(),
                local_bsz: global / n,
                gpus: n,
                split: Split::Exact(split),
                iter_time_s: round_num(1.0 / its),
                source: "elasticflow".into(),
            });
        }
        Ok(())
    })
}

/// Chronus's `{model: {gpus: {servers: relative throughput}}}`: one row per
/// entry, as published (the `servers = 1` entries are the 1.0 reference).
fn chronus(file: &Path, out: &mut Vec<MultiNodeRow>) -> Result<(), TraceError> {
    let bytes = read(file)?;
    let bad = |message: String| TraceError::Format { file: file.to_path_buf(), message };
    let json: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
    let models = json.as_object().ok_or_else(|| bad("expected an object of models".into()))?;
    for (name, by_gpus) in models {
        let model = CHRONUS_MODELS.iter().find(|m| m.0 == name).map(|m| m.1).ok_or_else(|| {
            bad(format!("unknown Chronus model `{name}`; add it to CHRONUS_MODELS in src/profile/import.rs"))
        })?;
        let by_gpus = by_gpus.as_object().ok_or_else(|| bad(format!("{name}: expected an object of GPU counts")))?;
        for (g, by_servers) in by_gpus {
            let gpus: u32 =
                g.parse().ok().filter(|&n| n > 0).ok_or_else(|| bad(format!("{name}: `{g}` is not a GPU count")))?;
            let by_servers = by_servers
                .as_object()
                .ok_or_else(|| bad(format!("{name}/{g}: expected an object of server counts")))?;
            for (s, rel) in by_servers {
                let servers: u32 = s
                    .parse()
                    .ok()
                    .filter(|&n| n > 0 && n <= gpus)
                    .ok_or_else(|| bad(format!("{name}/{g}: `{s}` is not a server count from 1 to {gpus}")))?;
                let relative = rel
                    .as_f64()
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .ok_or_else(|| bad(format!("{name}/{g}/{s}: `{rel}` is not a positive relative throughput")))?;
                out.push(MultiNodeRow {
                    model: model.to_string(),
                    gpus,
                    servers,
                    relative: round_num(relative),
                    source: "chronus".into(),
                });
            }
        }
    }
    Ok(())
}

/// Lucid's (model, dataset) → canonical model, for the models the throughput
/// tables also have. Lucid's NeuMF is trained on MovieLens (size not stated);
/// it is mapped to `ncf-ml1m`, the NCF of the Pollux artifact.
pub const LUCID_MODELS: [((&str, &str), &str); 6] = [
    (("BERT", "SQuAD"), "bert-squad"),
    (("LSTM", "Wikitext2"), "lstm-wikitext2"),
    (("NeuMF", "MovieLens"), "ncf-ml1m"),
    (("ResNet18", "CIFAR-10"), "resnet18-cifar10"),
    (("ResNet50", "ImageNet"), "resnet50-imagenet"),
    (("Transformer", "Multi30k"), "transformer-multi30k"),
];

/// GPU memory rows from Lucid's single-job profiles (`lucid/single_data.csv`,
/// S-Lab-System-Group/Lucid @ 63685a3a; Hu et al., ASPLOS'23): `gmem` (MiB)
/// by model and batch, full precision runs only (`amp` = 0), for the models of
/// [`LUCID_MODELS`]. **Non-commercial licence (S-Lab License 1.0)**: never
/// part of the builtin tables; `dlsched profile import --include-lucid` adds
/// it to a database of your own.
///
/// # Errors
/// A missing or malformed `lucid/single_data.csv`.
pub fn lucid_memory(from: &Path) -> Result<Vec<MemoryRow>, TraceError> {
    let file = from.join("lucid").join("single_data.csv");
    let bytes = crate::io::read_csv(&file)?;
    let mut rows = Vec::new();
    read_csv(&file, &bytes, &["model", "dataset", "batchsize", "amp", "gmem"], |r: &Rec<'_>| {
        if r.str(3) != "0" {
            return Ok(());
        }
        let key = (r.str(0), r.str(1));
        if let Some(&(_, model)) = LUCID_MODELS.iter().find(|(k, _)| *k == key) {
            rows.push(MemoryRow {
                model: model.to_string(),
                local_bsz: r.pos_u32(2, "samples")?,
                gpu_mem_mib: round_num(r.pos_f64(4, "MiB")?),
                source: "lucid".to_string(),
            });
        }
        Ok(())
    })?;
    rows.sort_by(|a, b| (&a.model, a.local_bsz).cmp(&(&b.model, b.local_bsz)));
    Ok(rows)
}

/// Co-location pairs from Lucid's profiles (`lucid/colocate_info.csv`, same
/// origin and **non-commercial licence** as [`lucid_memory`]): two single-GPU
/// jobs sharing one GPU, each one's speed normalised to its solo speed, full
/// precision only, for the models of [`LUCID_MODELS`]. Lucid does not state
/// the GPU it profiled on, so the rows carry GPU type `unknown`; the
/// co-location rule reads them for any GPU type without measured pairs.
///
/// # Errors
/// A missing or malformed `lucid/colocate_info.csv`.
pub fn lucid_colocation(from: &Path) -> Result<Vec<ColocRow>, TraceError> {
    let file = from.join("lucid").join("colocate_info.csv");
    let bytes = crate::io::read_csv(&file)?;
    let mut rows = Vec::new();
    let cols =
        ["model1", "dataset1", "batchsize1", "amp1", "speed1", "model2", "dataset2", "batchsize2", "amp2", "speed2"];
    read_csv(&file, &bytes, &cols, |r: &Rec<'_>| {
        if r.str(3) != "0" || r.str(8) != "0" {
            return Ok(());
        }
        let name = |m: usize, d: usize| LUCID_MODELS.iter().find(|(k, _)| *k == (r.str(m), r.str(d))).map(|(_, n)| *n);
        if let (Some(a), Some(b)) = (name(0, 1), name(5, 6)) {
            rows.push(ColocRow {
                gpu_type: "unknown".to_string(),
                model_a: a.to_string(),
                bsz_a: r.pos_u32(2, "samples")?,
                model_b: b.to_string(),
                bsz_b: r.pos_u32(7, "samples")?,
                speed_a: round_num(r.pos_f64(4, "relative speed")?),
                speed_b: round_num(r.pos_f64(9, "relative speed")?),
                source: "lucid".to_string(),
            });
        }
        Ok(())
    })?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gavel_job_types_map_to_model_and_batch() {
        assert_eq!(gavel_job("ResNet-50 (batch size 64)"), Some(("resnet50-imagenet", 64)));
        assert_eq!(gavel_job("LM (batch size 5)"), Some(("lstm-wikitext2", 5)));
        assert_eq!(gavel_job("CycleGAN"), Some(("cyclegan-monet2photo", 1)));
        assert_eq!(gavel_job("A3C"), Some(("a3c-pong", 20)));
        assert_eq!(gavel_job("VGG (batch size 8)"), None);
        assert_eq!(gavel_job("ResNet-50 (batch size 0)"), None);
    }

    #[test]
    fn model_facts_are_sorted_unique_and_sane() {
        for w in MODEL_FACTS.windows(2) {
            assert!(w[0].0 < w[1].0, "{} before {}", w[0].0, w[1].0);
        }
        for (m, family, params, gflops, source) in MODEL_FACTS {
            assert!(["cnn", "transformer", "rnn", "recsys", "rl", "gan"].contains(&family), "{m}");
            assert!(params.is_nan() || params > 0.0, "{m}");
            assert!(gflops.is_nan() || gflops > 0.0, "{m}");
            assert!(!source.is_empty() && !source.contains('\n'), "{m}");
        }
        for (f, m) in MODEL_FACTS.iter().zip(MEMORY_FACTS) {
            assert_eq!(f.0, m.0);
            assert!(m.1 > 0.0 && (m.2.is_nan() || m.2 > 0.0) && !m.3.is_empty(), "{}", m.0);
        }
    }

    #[test]
    fn placements_take_the_median_over_rotations() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("placements-x.csv");
        std::fs::write(
            &f,
            "local_bsz,step_time,sync_time,placement\n8,1.0,0,12\n8,3.0,0,21\n8,2.0,0,4\n8,5.0,0,21\n8,4.0,0,112\n",
        )
        .unwrap();
        let mut rows = Vec::new();
        placements(&f, "m", "t4", "sia", &mut rows).unwrap();
        let got: Vec<(String, f64)> = rows.iter().map(|r| (r.split.to_string(), r.iter_time_s)).collect();
        // 12/21/21 → split 2+1, times {1, 3, 5}: median 3; 4 → 2; 112 → 2+1+1, 4.
        assert_eq!(got, [("2+1".to_string(), 3.0), ("2+1+1".to_string(), 4.0), ("4".to_string(), 2.0)]);
        std::fs::write(&f, "placement,local_bsz,step_time\n102,8,1.0\n").unwrap();
        let e = placements(&f, "m", "t4", "sia", &mut rows).unwrap_err();
        assert!(matches!(e, TraceError::Field { line: 2, ref column, .. } if column == "placement"), "{e}");
    }
}
