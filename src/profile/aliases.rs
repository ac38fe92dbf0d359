//! Model names other systems' traces use, mapped to the profile database's
//! canonical names (`architecture-dataset`, `src/profile/data/README.md`).
//!
//! A trace's `model` column may name a canonical model or one of these
//! aliases; [`resolve`] maps an alias to its model. Each mapping follows the
//! workload the source system's own code trains under that name (checked
//! against the sources' artifacts, as the data README's canonical table
//! records):
//!
//! | alias | model | source and reason |
//! |---|---|---|
//! | `cifar10` | `resnet18-cifar10` | Pollux / Sia `application` and profile folder `cifar10`: ResNet-18 (kuangliu/pytorch-cifar) on CIFAR-10 (petuum/adaptdl `osdi21-artifact` `benchmark/models/cifar10`) |
//! | `imagenet` | `resnet50-imagenet` | Pollux / Sia `imagenet`: torchvision ResNet-50 on ImageNet |
//! | `bert` | `bert-squad` | Pollux / Sia `bert`: BERT-base fine-tuned on SQuAD v1.1. **Ambiguous**: ElasticFlow's `bert` is BERT-large (write `elasticflow:bert`) |
//! | `deepspeech2` | `deepspeech2-cmuarctic` | Pollux / Sia `deepspeech2`: deepspeech.pytorch on CMU-ARCTIC. **Ambiguous**: ElasticFlow's is another model (write `elasticflow:deepspeech2`) |
//! | `yolov3` | `yolov3-voc` | Pollux / Sia `yolov3`: YOLOv3 on PASCAL VOC |
//! | `ncf` | `ncf-ml1m` | Pollux / Sia `ncf`: NeuMF on MovieLens-1M |
//! | `gpt2` | `gpt2-imdb` | ElasticFlow `model_name` `gpt2` (pkusys/ElasticFlow `traces_for_ElasticFlow/`, `throughputs_A100/gpt2.csv`): GPT-2 small on IMDB |
//! | `resnet50` | `resnet50-imagenet` | ElasticFlow `resnet50`: torchvision ResNet-50, ImageNet |
//! | `resnet50_cifar10` | `resnet50-cifar10` | ElasticFlow `resnet50_cifar10`: torchvision ResNet-50 on CIFAR-10 |
//! | `vgg16` | `vgg16-imagenet` | ElasticFlow / Chronus `vgg16`: torchvision VGG-16 |
//! | `inception3` | `inceptionv3-imagenet` | ElasticFlow `inception3`: torchvision Inception-v3 (without the auxiliary head) |
//! | `inception_v3` | `inceptionv3-imagenet` | Chronus `inception_v3` |
//! | `alexnet` | `alexnet-imagenet` | Chronus `alexnet`: torchvision AlexNet |
//! | `resnet101` | `resnet101-imagenet` | Chronus `resnet101`: torchvision ResNet-101 |
//! | `mobilenet_v2` | `mobilenetv2-imagenet` | Chronus `mobilenet_v2`: torchvision MobileNetV2 |
//! | `pollux:<name>` | as the bare name | any of the six Pollux / Sia names, qualified |
//! | `elasticflow:bert` | `bert-large-cola` | ElasticFlow's `bert`: BERT-large uncased, sequence classification |
//! | `elasticflow:deepspeech2` | `deepspeech2-librispeech` | ElasticFlow's DeepSpeech2-style model on LibriSpeech |
//! | `elasticflow:<name>` | as the bare name | `gpt2`, `resnet50`, `resnet50_cifar10`, `vgg16`, `inception3`, qualified |
//!
//! The two names both systems use for different models, `bert` and
//! `deepspeech2`, resolve to the Pollux / Sia meaning when bare: those are
//! the names of the Pollux and Sia workload files (and of ElasticFlow's
//! `elasticVpollux_e.csv`, which replays Pollux's jobs); a replay of
//! ElasticFlow's own traces writes the qualified names (e.g. with `sed`).
//! `dlsched simulate` says on stderr which aliases a run used, and flags the
//! ambiguous ones.
//!
//! Matching is exact (case-sensitive), as for canonical names. A database
//! loaded from a directory that itself has a model of an alias's name keeps
//! its own model; an alias whose model the database lacks is not applied
//! (the name is then unknown, an error that lists the known names and
//! aliases).

/// One alias: the name a trace writes, the canonical model, and where the
/// name comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alias {
    /// The name as a trace writes it.
    pub name: &'static str,
    /// The canonical profile-database model.
    pub model: &'static str,
    /// The system whose traces use the name (`pollux`, `elasticflow`, `chronus`).
    pub source: &'static str,
    /// The other model the bare name means in another system, if it is
    /// ambiguous (written qualified there).
    pub ambiguous_with: Option<&'static str>,
}

const fn a(name: &'static str, model: &'static str, source: &'static str) -> Alias {
    Alias { name, model, source, ambiguous_with: None }
}

/// Every alias, bare names first, then the qualified ones (see the module
/// table for the reasons).
pub const ALIASES: [Alias; 28] = [
    a("cifar10", "resnet18-cifar10", "pollux"),
    a("imagenet", "resnet50-imagenet", "pollux"),
    Alias { ambiguous_with: Some("elasticflow:bert = bert-large-cola"), ..a("bert", "bert-squad", "pollux") },
    Alias {
        ambiguous_with: Some("elasticflow:deepspeech2 = deepspeech2-librispeech"),
        ..a("deepspeech2", "deepspeech2-cmuarctic", "pollux")
    },
    a("yolov3", "yolov3-voc", "pollux"),
    a("ncf", "ncf-ml1m", "pollux"),
    a("gpt2", "gpt2-imdb", "elasticflow"),
    a("resnet50", "resnet50-imagenet", "elasticflow"),
    a("resnet50_cifar10", "resnet50-cifar10", "elasticflow"),
    a("vgg16", "vgg16-imagenet", "elasticflow"),
    a("inception3", "inceptionv3-imagenet", "elasticflow"),
    a("inception_v3", "inceptionv3-imagenet", "chronus"),
    a("alexnet", "alexnet-imagenet", "chronus"),
    a("resnet101", "resnet101-imagenet", "chronus"),
    a("mobilenet_v2", "mobilenetv2-imagenet", "chronus"),
    a("pollux:cifar10", "resnet18-cifar10", "pollux"),
    a("pollux:imagenet", "resnet50-imagenet", "pollux"),
    a("pollux:bert", "bert-squad", "pollux"),
    a("pollux:deepspeech2", "deepspeech2-cmuarctic", "pollux"),
    a("pollux:yolov3", "yolov3-voc", "pollux"),
    a("pollux:ncf", "ncf-ml1m", "pollux"),
    a("elasticflow:bert", "bert-large-cola", "elasticflow"),
    a("elasticflow:deepspeech2", "deepspeech2-librispeech", "elasticflow"),
    a("elasticflow:gpt2", "gpt2-imdb", "elasticflow"),
    a("elasticflow:resnet50", "resnet50-imagenet", "elasticflow"),
    a("elasticflow:resnet50_cifar10", "resnet50-cifar10", "elasticflow"),
    a("elasticflow:vgg16", "vgg16-imagenet", "elasticflow"),
    a("elasticflow:inception3", "inceptionv3-imagenet", "elasticflow"),
];

/// The alias `name`, if it is one (exact match).
pub fn resolve(name: &str) -> Option<&'static Alias> {
    ALIASES.iter().find(|a| a.name == name)
}

/// Every alias name, comma-separated (for error messages).
pub fn names() -> String {
    ALIASES.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
}

/// How often a run's trace used one alias.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AliasUse {
    /// The alias.
    pub alias: &'static Alias,
    /// Trace rows that named it.
    pub jobs: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::db::ProfileDb;

    #[test]
    fn every_alias_names_a_builtin_model_and_none_repeats() {
        let db = ProfileDb::builtin();
        for (i, a) in ALIASES.iter().enumerate() {
            assert!(db.models.iter().any(|m| m.model == a.model), "{} -> {}", a.name, a.model);
            assert!(!db.models.iter().any(|m| m.model == a.name), "{} is a canonical name", a.name);
            assert!(ALIASES[..i].iter().all(|b| b.name != a.name), "{} twice", a.name);
        }
        // ElasticFlow's and Pollux/Sia's model lists: every name resolves.
        for n in ["bert", "gpt2", "resnet50", "vgg16", "inception3", "deepspeech2"] {
            assert!(resolve(n).is_some(), "{n}");
            assert!(resolve(&format!("elasticflow:{n}")).is_some(), "elasticflow:{n}");
        }
        for n in ["cifar10", "imagenet", "bert", "deepspeech2", "yolov3", "ncf"] {
            assert_eq!(resolve(n).map(|a| a.model), resolve(&format!("pollux:{n}")).map(|a| a.model), "{n}");
        }
        assert_eq!(resolve("elasticflow:bert").unwrap().model, "bert-large-cola");
        assert_eq!(resolve("BERT"), None);
    }
}
