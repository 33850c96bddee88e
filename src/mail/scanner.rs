//! One message through the pipeline: the MIME walker hands each decoded part (and each
//! base64 interpretation) to [`EngineSink`], which scans it with clamd (`INSTREAM`) and the
//! content-signature scanner, unpacks archives and scans their members the same way, and
//! inspects outbound text parts for `email_content`.
//!
//! Each engine call is one unit on the row `email_av.scans` (running while it runs; a call
//! that could not be made or failed is a loss). clamd is fail-open: when it cannot scan a
//! part the message is reported incompletely scanned and mail keeps flowing.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use super::archive::{self, ArchiveLimits, Member, Unpacker};
use super::clamd::{self, Clamd, ClamdError};
use super::content;
use super::mime::{Incomplete, Interp, Limits, PartInfo, Reason, Sink, WalkReport, Walker};
use super::quarantine::{PartEntry, Verdict};
use super::staging::{Spill, Staging};
use crate::clock::SharedClock;
use crate::queue::QueueHealth;
use crate::scan::signatures::SignatureSet;

/// Parts listed in a result at most.
pub const MAX_LISTED_PARTS: usize = 256;
/// Verdicts kept per message at most.
pub const MAX_VERDICTS: usize = 64;

/// The engines and what they report to.
pub struct Engines {
    pub clamd: Option<Clamd>,
    pub clamd_health: Arc<clamd::Health>,
    pub signatures: Arc<SignatureSet>,
    /// `email_av.scans`.
    pub row: Arc<QueueHealth>,
    pub clock: SharedClock,
}

/// The outcome of scanning one message.
#[derive(Debug, Default)]
pub struct ScanResult {
    pub report: WalkReport,
    pub verdicts: Vec<Verdict>,
    pub parts: Vec<PartEntry>,
    pub content: Vec<content::Hit>,
    /// Reasons found after the walk (archives, engines).
    pub incomplete: Vec<Incomplete>,
    pub clamd_scans: u64,
    pub clamd_errors: u64,
    /// The last clamd error, when any.
    pub clamd_error: Option<String>,
    pub signature_scans: u64,
}

impl ScanResult {
    /// Every reason, walker's and engines', one per (reason, part).
    pub fn all_incomplete(&self) -> Vec<Incomplete> {
        let mut v = self.report.incomplete.clone();
        for i in &self.incomplete {
            if !v.iter().any(|x| x == i) {
                v.push(i.clone());
            }
        }
        v
    }

    /// Verdicts that put the message in quarantine: every clamd detection and
    /// high-confidence signatures.
    pub fn infected(&self) -> bool {
        self.verdicts
            .iter()
            .any(|v| v.engine == "clamd" || v.rating == "high")
    }
}

/// Scans the decoded parts for one message.
pub struct EngineSink<'e> {
    engines: &'e Engines,
    archive: ArchiveLimits,
    staging: Option<Arc<Staging>>,
    mem_bytes: usize,
    outbound: bool,
    clamd_down: bool,
    pub result: ScanResult,
}

fn ext_for(content_type: &str) -> &'static str {
    match content_type {
        "text/html" => "html",
        "text/plain" => "txt",
        "application/x-php" | "text/x-php" | "application/x-httpd-php" => "php",
        "application/javascript" | "text/javascript" => "js",
        _ => "bin",
    }
}

/// What a blob is, for verdicts.
struct BlobRef<'a> {
    part: &'a str,
    name: Option<&'a str>,
    member: Option<&'a str>,
    interpretation: Option<Interp>,
    content_type: &'a str,
    index: usize,
}

impl<'e> EngineSink<'e> {
    pub fn new(
        engines: &'e Engines,
        archive: ArchiveLimits,
        staging: Option<Arc<Staging>>,
        mem_bytes: usize,
        outbound: bool,
    ) -> EngineSink<'e> {
        EngineSink {
            engines,
            archive,
            staging,
            mem_bytes,
            outbound,
            clamd_down: false,
            result: ScanResult::default(),
        }
    }

    fn incomplete(&mut self, reason: Reason, part: &str) {
        let i = Incomplete {
            reason,
            part: part.to_string(),
        };
        if self.result.incomplete.len() < 64 && !self.result.incomplete.contains(&i) {
            self.result.incomplete.push(i);
        }
    }

    fn verdict(&mut self, b: &BlobRef<'_>, engine: &str, signature: String, rating: String) {
        if self.result.verdicts.len() >= MAX_VERDICTS {
            return;
        }
        self.result.verdicts.push(Verdict {
            engine: engine.into(),
            signature,
            rating,
            part: b.part.to_string(),
            name: b.name.map(str::to_string),
            member: b.member.map(str::to_string),
            interpretation: b.interpretation,
        });
    }

    fn scan_blob(&mut self, b: &BlobRef<'_>, content: &Spill, len: u64) {
        let e = self.engines;
        if let Some(c) = &e.clamd {
            if self.clamd_down {
                e.row.record_loss();
                self.result.clamd_errors += 1;
            } else {
                let g = e.row.start_running();
                let mut r = content.reader(len);
                match c.scan(&mut r) {
                    Ok(v) => {
                        g.finish();
                        self.result.clamd_scans += 1;
                        let found = matches!(v, clamd::Verdict::Found(_));
                        e.clamd_health.scanned(found);
                        if e.clamd_health.ok(e.clock.now(), None) {
                            log::info!("clamd reachable again");
                        }
                        if let clamd::Verdict::Found(name) = v {
                            self.verdict(b, "clamd", name, "FOUND".into());
                        }
                    }
                    Err(err) => {
                        g.lose();
                        self.result.clamd_errors += 1;
                        e.clamd_health.failed(e.clock.now(), &err);
                        if matches!(err, ClamdError::Unreachable(_) | ClamdError::Io(_)) {
                            self.clamd_down = true;
                        }
                        self.result.clamd_error = Some(err.to_string());
                        self.incomplete(Reason::ClamdError, b.part);
                    }
                }
            }
        }
        // The content-signature scanner: the name decides which rules apply.
        let shown = b
            .member
            .and_then(|m| m.rsplit('/').next())
            .or(b.name)
            .map(str::to_string)
            .unwrap_or_else(|| format!("part-{}.{}", b.index, ext_for(b.content_type)));
        let vpath = PathBuf::from(format!("/mail/{shown}"));
        if !e.signatures.applies_to(&vpath) {
            return;
        }
        let g = e.row.start_running();
        let matches = match (content.bytes(), content.file()) {
            (Some(bytes), _) => e
                .signatures
                .scan_bytes(&vpath, bytes.get(..len as usize).unwrap_or(bytes)),
            (None, Some(f)) if len == content.len() => match e.signatures.scan_open_file(&vpath, f)
            {
                Ok(m) => m,
                Err(_) => {
                    g.lose();
                    return;
                }
            },
            _ => {
                // A prefix view of a staged part: its first 2 MiB.
                let mut buf = Vec::new();
                let _ = content.reader(len.min(2 << 20)).read_to_end(&mut buf);
                e.signatures.scan_bytes(&vpath, &buf)
            }
        };
        g.finish();
        self.result.signature_scans += 1;
        for m in matches {
            self.verdict(
                b,
                "signatures",
                m.name.clone(),
                m.confidence.label().to_string(),
            );
        }
    }
}

impl Sink for EngineSink<'_> {
    fn part(&mut self, info: &PartInfo, content: &Spill, len: u64) {
        if self.result.parts.len() < MAX_LISTED_PARTS {
            self.result.parts.push(PartEntry {
                part: info.path.clone(),
                content_type: crate::text::cut(&info.content_type, 100).into_owned(),
                name: info.name.clone(),
                size: len,
                member: None,
                interpretation: info.interpretation,
            });
        }
        let b = BlobRef {
            part: &info.path,
            name: info.name.as_deref(),
            member: None,
            interpretation: info.interpretation,
            content_type: &info.content_type,
            index: info.index,
        };
        self.scan_blob(&b, content, len);
        if self.outbound
            && info.interpretation.is_none()
            && (info.content_type == "text/plain" || info.content_type == "text/html")
        {
            let mut buf = Vec::new();
            let _ = content
                .reader(len.min(content::MAX_TEXT as u64))
                .read_to_end(&mut buf);
            content::inspect(
                &buf,
                info.content_type == "text/html",
                &mut self.result.content,
            );
        }
        let Some(kind) = archive::detect(&archive::head(content, len)) else {
            return;
        };
        let top = info
            .name
            .clone()
            .unwrap_or_else(|| format!("part-{}", info.index));
        let (limits, staging, mem) = (self.archive, self.staging.clone(), self.mem_bytes);
        let mut members: Vec<(Member, Option<Verdict>)> = Vec::new();
        let refused = {
            let path = info.path.clone();
            let ct = info.content_type.clone();
            let index = info.index;
            let interp = info.interpretation;
            let name = info.name.clone();
            let mut visit = |m: &Member, s: &Spill| {
                let b = BlobRef {
                    part: &path,
                    name: name.as_deref(),
                    member: Some(&m.path),
                    interpretation: interp,
                    content_type: &ct,
                    index,
                };
                self.scan_blob(&b, s, s.len());
                members.push((m.clone(), None));
            };
            let mut u = Unpacker::new(limits, staging, mem, &mut visit);
            u.unpack(kind, content, len, &top, 1);
            u.out.refused
        };
        for (m, _) in members {
            if self.result.parts.len() < MAX_LISTED_PARTS {
                self.result.parts.push(PartEntry {
                    part: info.path.clone(),
                    content_type: "archive member".into(),
                    name: m.name.clone(),
                    size: m.size,
                    member: Some(m.path),
                    interpretation: info.interpretation,
                });
            }
        }
        for r in refused {
            self.incomplete(r, &info.path);
        }
    }
}

/// Options of one scan.
pub struct ScanOptions {
    pub limits: Limits,
    pub archive: ArchiveLimits,
    pub staging: Option<Arc<Staging>>,
    /// Outbound mail: the `email_content` check runs on its text parts.
    pub outbound: bool,
}

/// Scans the message read from `r` (header block then body).
pub fn scan_message(r: &mut dyn Read, engines: &Engines, o: &ScanOptions) -> ScanResult {
    let mut sink = EngineSink::new(
        engines,
        o.archive,
        o.staging.clone(),
        o.limits.mem_part_bytes,
        o.outbound,
    );
    let report = {
        let mut w = Walker::new(o.limits, o.staging.clone(), &mut sink);
        w.walk_message(r)
    };
    let mut result = sink.result;
    result.report = report;
    result
}
