//! `--output-format csv|parquet|both` (cargo feature `parquet`): the parquet
//! tables read back with the parquet crate's own reader equal the CSVs parsed
//! by the csv crate. The tests always have the feature (Cargo.toml turns it
//! on for them); a build without it refuses `parquet` and `both` with
//! `experiment::output::NO_PARQUET`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn simulate(out: &Path, format: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dlsched"))
        .args(["simulate", "--trace", "traces/example_jobs.csv", "--vcs", "traces/example_vcs.csv"])
        .args(["--sample-interval", "60", "--output-format", format, "--out"])
        .arg(out)
        .current_dir(root())
        .output()
        .unwrap()
}

#[test]
fn parquet_output_format_is_not_part_of_the_run_id_and_cannot_be_swept() {
    let d = tempfile::tempdir().unwrap();
    let load = |body: &str| {
        let p = d.path().join("e.toml");
        std::fs::write(&p, format!("question = \"q\"\n{body}")).unwrap();
        dlsched::sweep::Experiment::load(&p)
    };
    let plain = load("[base]\njobs = 10\n[sweep]\nseed = [1, 2]\n").unwrap();
    let csv = load("[base]\njobs = 10\noutput_format = \"csv\"\n[sweep]\nseed = [1, 2]\n").unwrap();
    let ids = |e: &dlsched::sweep::Experiment| e.runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&plain), ids(&csv));
    assert_eq!(csv.output_format, dlsched::experiment::OutputFormat::Csv);
    let e = load("[base]\njobs = 10\n[sweep]\noutput_format = [\"csv\", \"both\"]\n").unwrap_err().message;
    assert!(e.contains("`output_format` cannot be swept"), "{e}");
    let e = load("[base]\njobs = 10\noutput_format = \"xml\"\n").unwrap_err().message;
    assert!(e.contains("output_format") && e.contains("both"), "{e}");
}

#[cfg(feature = "parquet")]
mod with_feature {
    use super::*;
    use parquet::basic::Type as PhysicalType;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    /// The csv crate's parse of a CSV file: header and rows.
    fn read_csv(p: &Path) -> (Vec<String>, Vec<Vec<String>>) {
        let mut r = csv::Reader::from_path(p).unwrap();
        let h = r.headers().unwrap().iter().map(str::to_string).collect();
        let rows = r.records().map(|x| x.unwrap().iter().map(str::to_string).collect()).collect();
        (h, rows)
    }

    /// Checks that the parquet file has the CSV's column names, row count and
    /// values (an empty cell is a null; an INT64 or DOUBLE equals the cell
    /// parsed as a number; a string equals the cell); returns the physical
    /// type of each column.
    fn assert_same(csv_path: &Path, pq_path: &Path) -> Vec<(String, PhysicalType)> {
        let (header, rows) = read_csv(csv_path);
        let reader = SerializedFileReader::new(std::fs::File::open(pq_path).unwrap()).unwrap();
        let schema = reader.metadata().file_metadata().schema_descr_ptr();
        let types: Vec<(String, PhysicalType)> =
            schema.columns().iter().map(|c| (c.name().to_string(), c.physical_type())).collect();
        assert_eq!(types.iter().map(|t| t.0.clone()).collect::<Vec<_>>(), header, "{}", pq_path.display());
        assert_eq!(reader.metadata().file_metadata().num_rows() as usize, rows.len(), "{}", pq_path.display());
        let mut n = 0;
        for (i, row) in reader.get_row_iter(None).unwrap().enumerate() {
            let row = row.unwrap();
            for (j, (name, field)) in row.get_column_iter().enumerate() {
                let cell = &rows[i][j];
                let at = format!("{} row {i} column {name}: {field:?} vs `{cell}`", pq_path.display());
                match field {
                    Field::Null => assert_eq!(cell, "", "{at}"),
                    Field::Long(v) => assert_eq!(cell.parse::<i64>().ok(), Some(*v), "{at}"),
                    Field::Double(v) => assert_eq!(cell.parse::<f64>().ok(), Some(*v), "{at}"),
                    Field::Str(v) => assert_eq!(v, cell, "{at}"),
                    other => panic!("{at}: unexpected field {other:?}"),
                }
            }
            n += 1;
        }
        assert_eq!(n, rows.len());
        types
    }

    fn type_of(types: &[(String, PhysicalType)], col: &str) -> PhysicalType {
        types.iter().find(|t| t.0 == col).unwrap_or_else(|| panic!("no column {col}")).1
    }

    #[test]
    fn parquet_tables_equal_the_csvs_and_parquet_only_leaves_no_csv() {
        let d = tempfile::tempdir().unwrap();
        let both = d.path().join("both");
        let o = simulate(&both, "both");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        for t in ["jobs", "timeline", "vc_summary"] {
            assert!(both.join(format!("{t}.csv")).is_file(), "{t}.csv");
        }
        let jobs = assert_same(&both.join("jobs.csv"), &both.join("jobs.parquet"));
        // traces/example_jobs.csv has 10 jobs (11 lines with the header).
        let (_, rows) = read_csv(&both.join("jobs.csv"));
        assert_eq!(rows.len(), 10);
        // GPU counts are whole numbers, seconds are doubles, ids and VC names strings.
        assert_eq!(type_of(&jobs, "gpus"), PhysicalType::INT64);
        assert_eq!(type_of(&jobs, "jct_s"), PhysicalType::DOUBLE);
        assert_eq!(type_of(&jobs, "submit_s"), PhysicalType::DOUBLE);
        assert_eq!(type_of(&jobs, "job_id"), PhysicalType::BYTE_ARRAY);
        assert_eq!(type_of(&jobs, "vc"), PhysicalType::BYTE_ARRAY);
        let timeline = assert_same(&both.join("timeline.csv"), &both.join("timeline.parquet"));
        assert_eq!(type_of(&timeline, "time_s"), PhysicalType::DOUBLE);
        assert_eq!(type_of(&timeline, "jobs_pending"), PhysicalType::INT64);
        let vcs = assert_same(&both.join("vc_summary.csv"), &both.join("vc_summary.parquet"));
        // traces/example_vcs.csv has two VCs.
        assert_eq!(read_csv(&both.join("vc_summary.csv")).1.len(), 2);
        assert_eq!(type_of(&vcs, "vc"), PhysicalType::BYTE_ARRAY);

        // Parquet only: the same parquet bytes, no CSV tables, a manifest
        // (the run is complete), and a clear error from `dlsched plot`.
        let only = d.path().join("only");
        let o = simulate(&only, "parquet");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        for t in ["jobs", "timeline", "vc_summary"] {
            assert!(!only.join(format!("{t}.csv")).exists(), "{t}.csv");
            let (a, b) =
                (std::fs::read(both.join(format!("{t}.parquet"))), std::fs::read(only.join(format!("{t}.parquet"))));
            assert_eq!(a.unwrap(), b.unwrap(), "{t}.parquet differs between runs");
        }
        assert!(only.join("manifest.json").is_file() && only.join("summary.json").is_file());
        assert!(dlsched::experiment::check_run_dir(&only).is_ok());
        let o = Command::new(env!("CARGO_BIN_EXE_dlsched")).arg("plot").arg(&only).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("--output-format both"), "{err}");
        // The same directory rewritten as CSV: no parquet left from before.
        let o = simulate(&only, "csv");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(only.join("jobs.csv").is_file() && !only.join("jobs.parquet").exists());
    }

    #[test]
    fn parquet_sweep_summary_equals_summary_csv_with_numbers_as_doubles() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("e.toml");
        std::fs::write(
            &p,
            "question = \"q\"\n[base]\njobs = 20\nsample_interval = 0\n[sweep]\npolicy = [\"fifo\", \"sjf\"]\n",
        )
        .unwrap();
        let mut e = dlsched::sweep::Experiment::load(&p).unwrap();
        e.output_format = dlsched::experiment::OutputFormat::Both;
        let out = d.path().join("out");
        let o = dlsched::sweep::run_sweep(&e, &out, 2, None, false, &|_, _| {}).unwrap();
        assert!(o.failed.is_empty() && o.write_errors.is_empty(), "{:?} {:?}", o.failed, o.write_errors);
        let types = assert_same(&out.join("summary.csv"), &out.join("summary.parquet"));
        assert_eq!(type_of(&types, "run_id"), PhysicalType::BYTE_ARRAY);
        assert_eq!(type_of(&types, "policy"), PhysicalType::BYTE_ARRAY);
        // A count is a DOUBLE in a summary (one numeric type for every column).
        assert_eq!(type_of(&types, "jobs_total"), PhysicalType::DOUBLE);
        assert!(!types.iter().any(|t| t.1 == PhysicalType::INT64), "{types:?}");
        for r in &e.runs {
            let run = out.join("runs").join(&r.id);
            assert_same(&run.join("jobs.csv"), &run.join("jobs.parquet"));
        }
    }
}
