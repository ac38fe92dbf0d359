//! The policy kinds and trace formats a command line, a sweep file and a
//! manifest can name beyond the built-in ones: a [`Registry`] value, made by
//! the program that runs them and handed to the parsers (no global state).
//! [`Registry::default`] holds the built-in kinds and formats only.

use std::sync::Arc;

use crate::policy::registry::{KINDS, PolicyKind, PolicySpec, RegisteredOptions};
use crate::trace::{TraceFormat, TraceFormatKind};

/// The policy kinds and trace formats registered from outside the crate,
/// beside the built-in ones. Cheap to clone (shared entries).
///
/// ```
/// use dlsched::experiment::Registry;
/// use dlsched::policy::registry::QueueOptions;
/// // A kind of one's own (here with the options struct of `fifo`).
/// let registry = Registry::default().policy::<QueueOptions>("my-fifo", "FIFO under another name.");
/// assert!(registry.check().is_ok());
/// assert_eq!(registry.policy_kind("my-fifo").unwrap().help(), "FIFO under another name.");
/// ```
#[derive(Clone, Debug, Default)]
pub struct Registry {
    policies: Vec<Arc<PolicyKind>>,
    formats: Vec<&'static TraceFormatKind>,
    /// Registrations refused (a name taken or malformed), reported by [`Registry::check`].
    refused: Vec<String>,
}

/// Two registries are equal when they register the same names.
impl PartialEq for Registry {
    fn eq(&self, other: &Self) -> bool {
        self.kinds() == other.kinds() && self.format_names() == other.format_names()
    }
}

/// The built-in trace formats, in `--format`'s order.
fn builtin_formats() -> impl Iterator<Item = TraceFormat> {
    <TraceFormat as crate::names::ValueNames>::selectable().iter().copied()
}

/// Whether `name` is a usable kind or format name: lower-case ASCII letters,
/// digits and `-`, starting with a letter.
fn well_formed(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

impl Registry {
    /// Registers the policy kind `name` with options type `O` (its
    /// `Default` the defaults, its serde names the options that
    /// `--policy-opt NAME=VALUE` and a sweep file's `policy_opt.NAME` set)
    /// and the one-line `help` that `simulate --help` lists. A name that is
    /// taken (built-in or registered before) or malformed is refused:
    /// [`Registry::check`] reports it.
    #[must_use]
    pub fn policy<O: RegisteredOptions>(mut self, name: &'static str, help: &'static str) -> Self {
        if !well_formed(name) {
            self.refused.push(format!(
                "policy kind `{name}`: a kind's name is lower-case letters, digits and `-`, starting with a letter"
            ));
        } else if KINDS.contains(&name) || self.policy_kind(name).is_some() {
            self.refused.push(format!("policy kind `{name}` is registered twice (or is a built-in kind)"));
        } else {
            self.policies.push(PolicyKind::new::<O>(name, help));
        }
        self
    }

    /// Registers the trace format `kind` (declared as a `static`,
    /// [`TraceFormatKind::new`]): `--format NAME`, a sweep file's `format`
    /// key and manifests name it. A name that is taken (built-in or
    /// registered before) or malformed is refused: [`Registry::check`]
    /// reports it.
    #[must_use]
    pub fn format(mut self, kind: &'static TraceFormatKind) -> Self {
        let name = kind.name();
        if !well_formed(name) {
            self.refused.push(format!(
                "trace format `{name}`: a format's name is lower-case letters, digits and `-`, starting with a letter"
            ));
        } else if builtin_formats().any(|f| f.name() == name) || self.format_kind(name).is_some() {
            self.refused.push(format!("trace format `{name}` is registered twice (or is a built-in format)"));
        } else {
            self.formats.push(kind);
        }
        self
    }

    /// The registered trace formats, in registration order.
    pub fn formats(&self) -> &[&'static TraceFormatKind] {
        &self.formats
    }

    /// The registered trace format `name`, if any (built-in formats are not
    /// listed here).
    pub fn format_kind(&self, name: &str) -> Option<&'static TraceFormatKind> {
        self.formats.iter().copied().find(|k| k.name() == name)
    }

    /// The format `name`, built-in or registered.
    pub fn trace_format(&self, name: &str) -> Option<TraceFormat> {
        builtin_formats().find(|f| f.name() == name).or_else(|| self.format_kind(name).map(TraceFormat::Registered))
    }

    /// Every trace format's name: the built-in ones, then the registered ones.
    pub fn format_names(&self) -> Vec<&'static str> {
        builtin_formats().map(TraceFormat::name).chain(self.formats.iter().map(|k| k.name())).collect()
    }

    /// The registered policy kinds, in registration order.
    pub fn policies(&self) -> &[Arc<PolicyKind>] {
        &self.policies
    }

    /// The registered policy kind `name`, if any (built-in kinds are not
    /// listed here).
    pub fn policy_kind(&self, name: &str) -> Option<&Arc<PolicyKind>> {
        self.policies.iter().find(|k| k.name() == name)
    }

    /// Reads a policy spec (`{"kind": ..., options}`) of any kind, built-in
    /// or registered.
    ///
    /// # Errors
    /// The path of the bad field (`backfill`, empty for the whole spec) and
    /// serde's message; an unknown kind lists every kind.
    pub fn policy_spec(&self, json: serde_json::Value) -> Result<PolicySpec, (String, String)> {
        let kind = json.get("kind").and_then(serde_json::Value::as_str).map(str::to_string);
        if let Some(k) = kind.as_deref().and_then(|k| self.policy_kind(k)) {
            return k.spec(json);
        }
        serde_path_to_error::deserialize::<_, PolicySpec>(json).map_err(|e| {
            let msg = e.inner().to_string();
            match kind {
                Some(k) if !KINDS.contains(&k.as_str()) && !self.policies.is_empty() => (
                    e.path().to_string(),
                    format!("unknown policy kind `{k}`, expected one of {}", self.kinds().join(", ")),
                ),
                _ => (e.path().to_string(), msg),
            }
        })
    }

    /// Every policy kind's name: the built-in ones, then the registered ones.
    pub fn kinds(&self) -> Vec<&str> {
        KINDS.iter().copied().chain(self.policies.iter().map(|k| k.name())).collect()
    }

    /// Checks the registrations.
    ///
    /// # Errors
    /// One line per refused registration.
    pub fn check(&self) -> Result<(), String> {
        if self.refused.is_empty() { Ok(()) } else { Err(self.refused.join("\n")) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::raw::{Origin, RawSpec, Value, to_run_spec_in};
    use crate::policy::registry::QueueOptions;

    fn raw(pairs: &[(&str, Value)]) -> RawSpec {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn a_registered_kind_is_named_set_and_written_like_a_built_in_one() {
        // The options struct of fifo under a kind of its own.
        let reg = Registry::default().policy::<QueueOptions>("my-fifo", "FIFO again.");
        let p = raw(&[("policy", Value::Str("my-fifo".into())), ("policy_opt.backfill", Value::Bool(true))]);
        let spec = to_run_spec_in(&p, Origin::CommandLine, None, &reg).unwrap();
        assert_eq!(spec.policy.kind(), "my-fifo");
        assert!(spec.policy.name().is_none());
        // Written as a built-in kind is: kind first, then the options by name
        // (serde_json's map order: alphabetical); ShareLimits::default is 2
        // tenants, 5 % headroom.
        let json = serde_json::to_string(&spec.policy).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"my-fifo","backfill":true,"placement":"consolidate","share":{"max_tenants":2,"mem_headroom":0.05}}"#
        );
        // Read back by the registry; plain serde knows the built-in kinds only.
        let back = reg.policy_spec(serde_json::from_str(&json).unwrap()).unwrap();
        assert_eq!(back, spec.policy);
        let e = serde_json::from_str::<PolicySpec>(&json).unwrap_err().to_string();
        assert!(e.contains("unknown variant `my-fifo`"), "{e}");
        // A bad option names itself and lists the kind's options.
        let p = raw(&[("policy", Value::Str("my-fifo".into())), ("policy_opt.backfil", Value::Bool(true))]);
        let e = to_run_spec_in(&p, Origin::File(std::path::Path::new("e.toml")), None, &reg).unwrap_err().message;
        assert!(e.starts_with("`policy_opt.backfil` = `true`: unknown field `backfil`"), "{e}");
        assert!(e.contains("(`my-fifo` options: backfill (default false)"), "{e}");
        // An unknown kind lists the registered kinds after the built-in ones.
        let p = raw(&[("policy", Value::Str("nosuch".into()))]);
        let e = to_run_spec_in(&p, Origin::CommandLine, None, &reg).unwrap_err().message;
        assert!(e.contains("ldwp-frozen, my-fifo"), "{e}");
    }

    #[test]
    fn built_in_specs_are_written_as_before() {
        // The derived form of the closed enum: kind, then the fields in
        // declaration order.
        let json = serde_json::to_string(&PolicySpec::default()).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"fifo","backfill":false,"placement":"consolidate","share":{"max_tenants":2,"mem_headroom":0.05}}"#
        );
    }

    fn one_job(
        _file: &std::path::Path,
        _bytes: &[u8],
    ) -> Result<Vec<crate::trace::TraceRecord>, crate::error::TraceError> {
        Ok(vec![crate::trace::TraceRecord::new("a", 0, 60_000, 1)])
    }

    static ONE: TraceFormatKind = TraceFormatKind::new("one-job", "One job.", one_job);
    static HELIOS_AGAIN: TraceFormatKind = TraceFormatKind::new("helios", "", one_job);

    #[test]
    fn a_registered_format_is_named_by_the_format_key_and_written_by_name() {
        let reg = Registry::default().format(&ONE);
        let d = tempfile::tempdir().unwrap();
        let trace = d.path().join("t.txt");
        std::fs::write(&trace, "anything\n").unwrap();
        let p = raw(&[("trace", Value::Str(trace.display().to_string())), ("format", Value::Str("one-job".into()))]);
        let spec = to_run_spec_in(&p, Origin::CommandLine, None, &reg).unwrap();
        let json = serde_json::to_value(&spec.workload).unwrap();
        assert_eq!(json["format"], "one-job");
        assert_eq!(reg.trace_format("one-job"), Some(TraceFormat::Registered(&ONE)));
        assert_eq!(reg.trace_format("helios"), Some(TraceFormat::Helios));
        // Without the registry the name is refused, listing the built-in formats.
        let e = to_run_spec_in(&p, Origin::CommandLine, None, &Registry::default()).unwrap_err().message;
        assert!(e.contains("--format one-job") && e.contains("alibaba-openb"), "{e}");
        // With it, an unknown name lists the registered formats too.
        let p = raw(&[("trace", Value::Str(trace.display().to_string())), ("format", Value::Str("x".into()))]);
        let e = to_run_spec_in(&p, Origin::CommandLine, None, &reg).unwrap_err().message;
        assert!(e.contains("elastic-workload, one-job"), "{e}");
        // The run reads it: one job of 60 s on one GPU.
        let report = crate::experiment::run_one(&spec, |_| {}).unwrap();
        assert_eq!(report.summary.jobs_completed, 1);
        assert_eq!(Registry::default().format(&HELIOS_AGAIN).check().unwrap_err().lines().count(), 1);
    }

    #[test]
    fn taken_and_malformed_names_are_refused() {
        let reg = Registry::default()
            .policy::<QueueOptions>("fifo", "")
            .policy::<QueueOptions>("mine", "")
            .policy::<QueueOptions>("mine", "")
            .policy::<QueueOptions>("My Kind", "");
        let e = reg.check().unwrap_err();
        assert_eq!(e.lines().count(), 3, "{e}");
        assert!(e.contains("`fifo` is registered twice") && e.contains("`My Kind`"), "{e}");
        assert_eq!(reg.policies().len(), 1);
    }
}
