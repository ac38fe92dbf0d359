//! Standard output and standard error that fail with an error instead of a
//! panic: the line writer behind `outln!`/`errln!`, and [`DeferredOut`].

use anyhow::Result;

/// A failed write to standard output or standard error.
#[derive(Debug, thiserror::Error)]
#[error("cannot write to standard {}: {err}", if *.stderr { "error" } else { "output" })]
pub(crate) struct StdioError {
    /// Standard error (else standard output).
    pub(crate) stderr: bool,
    /// The write's error.
    pub(crate) err: std::io::Error,
}

/// One line to standard output or standard error; see [`outln!`], [`errln!`].
pub(crate) fn write_line(stderr: bool, args: std::fmt::Arguments) -> Result<()> {
    use std::io::Write;
    let res = if stderr {
        writeln!(std::io::stderr().lock(), "{args}")
    } else {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{args}").and_then(|()| out.flush())
    };
    res.map_err(|err| anyhow::Error::new(StdioError { stderr, err }))
}

/// Standard output of a command that prints as it goes and writes its files
/// at the end: the first failed write is kept and later lines are dropped,
/// so the work goes on; [`DeferredOut::finish`] returns the error once the
/// files are written.
#[derive(Default)]
pub(crate) struct DeferredOut(Option<anyhow::Error>);

impl DeferredOut {
    /// Writes a line, unless an earlier one failed.
    pub(crate) fn line(&mut self, args: std::fmt::Arguments) {
        if self.0.is_none()
            && let Err(e) = write_line(false, args)
        {
            self.0 = Some(e);
        }
    }

    /// The first failed write, if any.
    pub(crate) fn finish(self) -> Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}
