//! Writers for a run directory: `jobs.csv`, `summary.json`, `vc_summary.csv`,
//! `timeline.csv`, `vc_timeline.csv`, `skipped.csv`, `manifest.json`. Each file is written to a
//! temporary name and renamed, so a reader never sees half a file.

use std::io::Write;
use std::path::Path;

use super::VcSummary;
use crate::engine::RunOutput;
use crate::ids::JobId;
use crate::job::{JobState, Skipped};

/// Writes `bytes` to `path` atomically (temporary file in the same directory,
/// then rename): a killed process leaves the old file or the new one, never
/// half of one. (No fsync: this guards against interruption, not power loss.)
///
/// # Errors
/// The I/O error, with the path in its message.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Like [`write_atomic`], with the content streamed by `fill` through a buffer.
///
/// # Errors
/// The I/O error, with the path in its message.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    write_renamed(path, false, fill)
}

/// Like [`write_atomic_with`], except that an old file at `path` is removed
/// just before the new one is renamed into place, so a killed process may
/// leave no file at all (never half of one). For files of a run directory
/// whose manifest, the mark of a complete run, is already gone: renaming over
/// an existing file makes ext4 (`auto_da_alloc`) start writing the new one
/// out at once, which costs more than the rest of writing it.
///
/// # Errors
/// The I/O error, with the path in its message.
pub fn write_replacing_with(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    write_renamed(path, true, fill)
}

fn write_renamed(
    path: &Path,
    remove_old: bool,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("{}.tmp", path.extension().and_then(|e| e.to_str()).unwrap_or("")));
    let res = (|| {
        let mut w = std::io::BufWriter::with_capacity(1 << 16, std::fs::File::create(&tmp)?);
        fill(&mut w)?;
        w.flush()?;
        drop(w);
        if remove_old {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        // Leave nothing half-made behind (the temporary may not exist).
        let _ = std::fs::remove_file(&tmp);
    }
    res.map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// `jobs.csv`: one row per admitted job, in job order. Columns: `job_id` (trace
/// id), `vc` (the partition it ran in; `default` without partitions), `gpus`,
/// `submit_s`, `start_s` (the start of its last run: its only start unless
/// it was preempted), `end_s`, `jct_s` (end − submit), `queue_delay_s`
/// (every waiting period: the first wait plus each suspension; start −
/// submit for a job never preempted), `duration_s`
/// (trace run time), `nodes_spanned`, `status` (`completed`, `running`,
/// `suspended`, `pending`), `trace_vc` (the VC the trace names, if any), `model` and
/// `local_bsz` (the DL model and per-GPU batch, when known or drawn),
/// `gpu_mem_mib` (per-GPU memory need, when the profile database has it),
/// `speed` (completed jobs: trace run time / actual run time, the job's mean
/// rate relative to its trace speed, 4 decimals; below 1 when its placement or
/// co-tenants made it slower than recorded; for a moldable task, its speed-up
/// over one GPU; with preemptions, trace run time / time holding GPUs),
/// then `first_start_s` (its first start), `preemptions`, `attained_s` (time
/// it held GPUs over all its runs, checkpoint overhead and any release delay
/// included; empty while running) and `attained_gpu_s` (GPUs × that time).
/// A run with work-defined jobs (`crate::job::ElasticSpec`) has one more
/// column, `restarts`: a work-defined job's reallocations after its first
/// allocation (empty for a duration-defined job); `gpus` is then the GPUs a
/// work-defined job last held.
/// Times in seconds since the trace origin. Streamed to `w` a row at a time.
///
/// # Errors
/// The writer's error.
pub fn write_jobs_csv(out: &RunOutput, w: &mut impl Write) -> std::io::Result<()> {
    use rayon::prelude::*;
    w.write_all(
        b"job_id,vc,gpus,submit_s,start_s,end_s,jct_s,queue_delay_s,duration_s,nodes_spanned,status,trace_vc,model,local_bsz,gpu_mem_mib,speed,first_start_s,preemptions,attained_s,attained_gpu_s",
    )?;
    let elastic = out.jobs.work_defined() > 0;
    w.write_all(if elastic { b",restarts\n" } else { b"\n" })?;
    // Rows are formatted in blocks of at most BLOCK_ROWS rows, a wave of one
    // block per thread at a time, in parallel, and each wave is written in
    // job order before the next is formatted: the bytes are the same whatever
    // the number of threads, and memory holds one wave (a few MB), not the
    // whole file.
    let n = out.jobs.len();
    let threads = rayon::current_num_threads().max(1);
    let blocks_n = threads.min(n / MIN_BLOCK_ROWS).max(1);
    let block = n.div_ceil(blocks_n).clamp(1, BLOCK_ROWS);
    let blocks_total = n.div_ceil(block);
    // One buffer per block of a wave, reused by every wave (fresh memory
    // would be zeroed by the kernel again each time).
    let guess = block * 96;
    // A large block starts at HUGE_BUFFER, so that it is mapped on its own
    // with huge pages; a small one at its likely size.
    let room = if guess >= HUGE_BUFFER / 2 { guess.max(HUGE_BUFFER) } else { guess };
    let mut bufs: Vec<Vec<u8>> = (0..threads.min(blocks_total)).map(|_| Vec::with_capacity(room)).collect();
    let mut wave_start = 0;
    while wave_start < blocks_total {
        let wave_end = (wave_start + threads).min(blocks_total);
        bufs[..wave_end - wave_start].par_iter_mut().enumerate().for_each(|(k, buf)| {
            let b = wave_start + k;
            buf.clear();
            for i in b * block..n.min((b + 1) * block) {
                push_job_row(buf, out, JobId(i as u32), elastic);
            }
        });
        for b in &bufs[..wave_end - wave_start] {
            w.write_all(b)?;
        }
        wave_start = wave_end;
    }
    Ok(())
}

/// Most jobs in a `jobs.csv` block (about 6 MB of rows): a wave of blocks
/// (one per thread) is what the writer holds in memory at once.
const BLOCK_ROWS: usize = 65_536;

/// The least room a large `jobs.csv` block starts with (4 MiB: glibc maps so
/// large a block on its own, and the binary's allocator asks huge pages for it).
const HUGE_BUFFER: usize = 4 << 20;

/// Fewest jobs in a `jobs.csv` block (about 3 MB of rows).
const MIN_BLOCK_ROWS: usize = 32_768;

/// Appends one `jobs.csv` row (with its line break).
fn push_job_row(s: &mut Vec<u8>, out: &RunOutput, id: JobId, elastic: bool) {
    let (spec, state) = (out.jobs.spec(id), out.jobs.state(id));
    let vc = &out.cluster.partitions()[spec.vc.index()].name;
    let submit = spec.submit.as_ms();
    let (start, end, nodes, status): (_, _, _, &[u8]) = match state {
        JobState::Completed(d) => (Some(d.start.as_ms()), Some(d.end.as_ms()), Some(d.nodes_spanned), b"completed"),
        JobState::Running(r) => (Some(r.start.as_ms()), None, Some(r.nodes_spanned), b"running"),
        JobState::Suspended(_) => (None, None, None, b"suspended"),
        JobState::Pending | JobState::NotArrived => (None, None, None, b"pending"),
        JobState::Rejected(_) => (None, None, None, b"rejected"),
    };
    // (first start, preemptions, attained ms, attained GPU-ms, waited ms)
    let (first_start, preemptions, attained, attained_gpu, waited) = match state {
        JobState::Completed(d) => (
            Some(d.first_start().as_ms()),
            d.preemptions(),
            Some(d.attained_ms()),
            Some(d.attained_gpu_ms()),
            Some(d.waited_ms(spec.submit)),
        ),
        JobState::Running(r) => (Some(r.first_start.as_ms()), r.preemptions, None, None, Some(r.waited_ms)),
        JobState::Suspended(su) => {
            (Some(su.first_start.as_ms()), su.preemptions, Some(su.attained_ms), Some(su.attained_gpu_ms), None)
        }
        JobState::Pending | JobState::NotArrived | JobState::Rejected(_) => (None, 0, Some(0), Some(0), None),
    };
    let opt = |s: &mut Vec<u8>, v: Option<u64>| {
        if let Some(v) = v {
            push_secs(s, v);
        }
        s.push(b',');
    };
    push_field(s, &spec.name);
    s.push(b',');
    push_field(s, vc);
    s.push(b',');
    // GPUs used: a moldable task's are the policy's choice.
    let gpus = match state {
        JobState::Completed(d) => d.gpus,
        JobState::Running(r) => r.gpus.len() as u32,
        _ => spec.gpus,
    };
    push_uint(s, u64::from(gpus));
    s.push(b',');
    opt(s, Some(submit));
    // Where the start and the duration are written: a job never preempted
    // repeats them in the last columns, copied rather than formatted again.
    let start_at = s.len();
    opt(s, start);
    let start_bytes = start_at..s.len() - 1;
    opt(s, end);
    opt(s, end.map(|e| e - submit));
    opt(s, waited);
    let duration_at = s.len();
    opt(s, Some(spec.duration_ms));
    let duration_bytes = duration_at..s.len() - 1;
    if let Some(n) = nodes {
        push_uint(s, u64::from(n));
    }
    s.push(b',');
    s.extend_from_slice(status);
    s.push(b',');
    push_field(s, spec.vc_label().unwrap_or(""));
    s.push(b',');
    push_field(s, spec.model().unwrap_or(""));
    s.push(b',');
    if let Some(b) = spec.local_bsz() {
        push_uint(s, u64::from(b));
    }
    s.push(b',');
    if let Some(m) = spec.gpu_mem_mib() {
        push_uint(s, m);
    }
    s.push(b',');
    if let JobState::Completed(d) = state {
        // `attained_ms` is `end - start` for a job never preempted.
        let ran = d.attained_ms();
        if ran == spec.duration_ms {
            s.push(b'1');
        } else if ran > 0 {
            let _ = write!(s, "{:.4}", spec.duration_ms as f64 / ran as f64);
        }
    }
    s.push(b',');
    match first_start {
        Some(f) if Some(f) == start => s.extend_from_within(start_bytes),
        f => opt_secs(s, f),
    }
    s.push(b',');
    push_uint(s, u64::from(preemptions));
    s.push(b',');
    let attained_at = s.len();
    match attained {
        Some(a) if a == spec.duration_ms => s.extend_from_within(duration_bytes),
        a => opt_secs(s, a),
    }
    let attained_bytes = attained_at..s.len();
    s.push(b',');
    match (attained_gpu, attained) {
        // One GPU: GPU-seconds are the seconds.
        (Some(g), Some(a)) if g == a => s.extend_from_within(attained_bytes),
        (g, _) => opt_secs(s, g),
    }
    if elastic {
        s.push(b',');
        if spec.elastic().is_some() {
            push_uint(s, u64::from(restarts(state)));
        }
    }
    s.push(b'\n');
}

/// A work-defined job's restarts so far (reallocations after its first
/// allocation); 0 for any other job.
pub fn restarts(state: &JobState) -> u32 {
    match state {
        JobState::Completed(d) => d.restarts(),
        JobState::Running(r) => r.elastic.as_ref().map_or(0, |e| e.restarts()),
        JobState::Suspended(su) => su.elastic.map_or(0, |e| e.allocations.saturating_sub(1)),
        JobState::Pending | JobState::NotArrived | JobState::Rejected(_) => 0,
    }
}

/// Appends ms as seconds when known ([`push_secs`]), nothing otherwise.
fn opt_secs(s: &mut Vec<u8>, ms: Option<u64>) {
    if let Some(ms) = ms {
        push_secs(s, ms);
    }
}

/// Appends milliseconds as seconds, formatted like [`crate::time::fmt_ms_as_secs`]
/// (`45`, `45.5`, `45.125`), without allocating.
fn push_secs(s: &mut Vec<u8>, ms: u64) {
    let (whole, frac) = (ms / 1000, ms % 1000);
    s.extend_from_slice(itoa::Buffer::new().format(whole).as_bytes());
    if frac != 0 {
        let digits = [b'.', b'0' + (frac / 100) as u8, b'0' + (frac / 10 % 10) as u8, b'0' + (frac % 10) as u8];
        let n = if frac % 100 == 0 {
            2
        } else if frac % 10 == 0 {
            3
        } else {
            4
        };
        s.extend_from_slice(&digits[..n]);
    }
}

/// Appends an unsigned integer without going through `fmt`.
fn push_uint(s: &mut Vec<u8>, v: u64) {
    s.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends a CSV field, quoted when it holds a comma, quote or line break.
fn push_field(s: &mut Vec<u8>, field: &str) {
    if field.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r')) {
        s.push(b'"');
        s.extend_from_slice(field.replace('"', "\"\"").as_bytes());
        s.push(b'"');
    } else {
        s.extend_from_slice(field.as_bytes());
    }
}

/// `vc_summary.csv`: one row per VC partition.
pub fn vc_summary_csv(rows: &[VcSummary]) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        let _ = w.serialize(r);
    }
    w.into_inner().unwrap_or_default()
}

/// `timeline.csv`: `time_s, gpus_busy, gpu_utilization, jobs_running,
/// jobs_pending`, from the recorded samples of a run on `out`'s cluster.
pub fn timeline_csv(out: &RunOutput, rec: &super::Recording) -> Vec<u8> {
    let total = f64::from(out.cluster.total_gpus().max(1));
    let mut s = b"time_s,gpus_busy,gpu_utilization,jobs_running,jobs_pending\n".to_vec();
    for x in &rec.timeline {
        let util = (f64::from(x.gpus_busy) / total * 1e6).round() / 1e6;
        push_secs(&mut s, x.time.as_ms());
        s.push(b',');
        push_uint(&mut s, u64::from(x.gpus_busy));
        s.push(b',');
        if util == 0.0 || util == 1.0 {
            s.push(if util == 0.0 { b'0' } else { b'1' });
        } else {
            let _ = write!(s, "{util}");
        }
        s.push(b',');
        push_uint(&mut s, u64::from(x.jobs_running));
        s.push(b',');
        push_uint(&mut s, u64::from(x.jobs_pending));
        s.push(b'\n');
    }
    s
}

/// The header of `vc_timeline.csv` ([`write_vc_timeline_csv`]).
pub const VC_TIMELINE_HEADER: &str = "time_s,vc,jobs_running,jobs_pending,gpus_busy,gpus_pending";

/// `vc_timeline.csv`, long format: `time_s, vc, jobs_running, jobs_pending,
/// gpus_busy, gpus_pending` ([`super::VcSample`]), one row per VC partition
/// (in the cluster's partition order, named as in `vc_summary.csv`) per
/// timeline sample, at the same instants as `timeline.csv`'s rows. Streamed
/// to `w` (a 10-million-job replay on a cluster of many VCs has many rows).
///
/// # Errors
/// The writer's I/O error.
pub fn write_vc_timeline_csv(out: &RunOutput, rec: &super::Recording, w: &mut impl Write) -> std::io::Result<()> {
    let parts = out.cluster.partitions();
    let mut s = Vec::with_capacity(1 << 12);
    s.extend_from_slice(VC_TIMELINE_HEADER.as_bytes());
    s.push(b'\n');
    for (x, rows) in rec.vc_samples() {
        for (p, r) in parts.iter().zip(rows) {
            push_secs(&mut s, x.time.as_ms());
            s.push(b',');
            push_field(&mut s, &p.name);
            for v in [u64::from(r.jobs_running), u64::from(r.jobs_pending), u64::from(r.gpus_busy), r.gpus_pending] {
                s.push(b',');
                push_uint(&mut s, v);
            }
            s.push(b'\n');
        }
        if s.len() >= 1 << 16 {
            w.write_all(&s)?;
            s.clear();
        }
    }
    w.write_all(&s)
}

/// `skipped.csv`: `job_id, line, gpus, reason` for every row not simulated.
pub fn skipped_csv(skipped: &[Skipped]) -> Vec<u8> {
    let mut s = b"job_id,line,gpus,reason\n".to_vec();
    for k in skipped {
        push_field(&mut s, &k.name);
        let _ = writeln!(s, ",{},{},{}", k.line, k.gpus, k.reason.name());
    }
    s
}

/// `skipped.csv` of a run that left malformed rows out
/// (`skip_malformed`): the columns of [`skipped_csv`] and two more, `field`
/// (the column at fault, empty for a row of the wrong shape) and `detail`
/// (what is wrong), by line. A malformed row has reason `malformed` and no
/// job id or GPU count (its fields did not parse); a row skipped for another
/// reason has an empty `field` and `detail`.
pub fn skipped_csv_with_malformed(skipped: &[Skipped], malformed: &[crate::error::MalformedRow]) -> Vec<u8> {
    let mut s = b"job_id,line,gpus,reason,field,detail\n".to_vec();
    let (mut a, mut b) = (skipped.iter().peekable(), malformed.iter().peekable());
    loop {
        let take_skipped = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(k), Some(m)) => k.line <= m.line,
            (Some(_), None) => true,
            (None, Some(_)) => false,
        };
        if take_skipped {
            let k = a.next().expect("peeked");
            push_field(&mut s, &k.name);
            let _ = writeln!(s, ",{},{},{},,", k.line, k.gpus, k.reason.name());
        } else {
            let m = b.next().expect("peeked");
            let _ = write!(s, ",{},,malformed,", m.line);
            push_field(&mut s, m.column.as_deref().unwrap_or(""));
            s.push(b',');
            push_field(&mut s, &m.message);
            s.push(b'\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::fmt_ms_as_secs;

    #[test]
    fn push_secs_formats_like_fmt_ms_as_secs() {
        for ms in [0, 7, 10, 100, 999, 1000, 1001, 1010, 1100, 45_125, 45_500, 86_400_000, 123_456_789_012] {
            let mut s = Vec::new();
            push_secs(&mut s, ms);
            assert_eq!(String::from_utf8(s).unwrap(), fmt_ms_as_secs(ms), "{ms} ms");
        }
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        // The target is a directory: the rename fails, for both variants.
        let target = d.path().join("jobs.csv");
        std::fs::create_dir(&target).unwrap();
        assert!(write_atomic(&target, b"x").is_err());
        let e = write_replacing_with(&target, |w| w.write_all(b"x")).unwrap_err();
        assert!(e.to_string().contains("jobs.csv"), "{e}");
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("jobs.csv")]);
        // And a good write leaves the file only.
        write_atomic(&d.path().join("a.csv"), b"ok").unwrap();
        assert_eq!(std::fs::read(d.path().join("a.csv")).unwrap(), b"ok");
        assert!(!d.path().join("a.csv.tmp").exists());
    }
}
