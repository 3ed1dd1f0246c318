// Package jsonl is sessionflow's session store and its source of truth: one
// append-only log per session, in raw JSONL or in Zstandard frames, with
// exclusive write leases, crash repair and lazy materialization.
//
// # On-disk format
//
// A root belongs to one encoding (Options.Compression). Its layout is
//
//	<root>/
//	  _no-cwd/ | --<ProjectKey(cwd)>--/     project directory
//	    <EncodeSegment(id)>/                session directory
//	      session.v3.jsonl                  the log (raw root), or
//	      session.v3.jsonl.zstd             the log (zstd root)
//	      session.lock                      the write lease, while one is held
//	      summary.json                      optional summary sidecar
//	      session.<hex>.tmp                 transient publication temp files
//	      session.v3.jsonl.broken-<offset>  bytes a cut removed (quarantine)
//	      live.<turn>.<step>.<attempt>      the running model call's live text
//	                                        (package livetext; not the log's,
//	                                        not durable; the store ignores it)
//	  .revocations/<hash of handle id>      closed handle ids (kept 7 days)
//	  .create-locks/<hash of id>            flock of a create in progress
//	  .deleted/<random>                     a deleted session being removed
//
// No path below the root is followed through a symbolic link, and every
// file the store opens must be a regular file (docs/DECISIONS.md D15); a
// damaged session directory concerns that session only.
//
// A raw log is a header line followed by one event per line, every line
// terminated by '\n'. A zstd log is a sequence of independent Zstandard
// frames with content checksums: the first frame holds exactly the header
// line, and every later frame holds exactly one appended batch of lines.
// The header line is {"type":"session","version":3,"id",...} (see
// session.Header); each event line is one session.Event. Committed bytes are
// never rewritten: the only changes ever made to a log are an append at EOF,
// the truncation of a failed append back to its previous size, and the
// one-time truncation of a torn suffix by the first mutation of a write
// handle (or of a damaged suffix by a forced repair, CutOptions), whose
// bytes are first copied to a fsynced quarantine file beside the log. Damage
// followed by complete valid records is not a torn write: a read refuses it
// as corrupt.
//
// # Ownership
//
// A write handle is identified by a caller-chosen handle id. Create and Open
// for write publish session.lock (a temp file linked into place, never
// replacing) naming the handle id and its owning workflow; contention is
// ErrAlreadyOwned. Every mutation takes a short flock on the lease, checks
// that it still names the caller's handle id, mutates, and unlocks, so a
// zombie activity attempt cannot write after its handle was closed. Closing
// records the handle id as revoked and removes the lease; an Open or Create
// that lands after its handle was closed finds it revoked, releases what it
// took and fails with ErrHandleRevoked.
//
// # Crash assumptions
//
// The store assumes a POSIX filesystem on which fsync of a file makes its
// written data durable, fsync of a directory makes its entries (created,
// linked, removed) durable, link(2) fails with EEXIST instead of replacing,
// and O_EXCL creation is atomic. A process crash or power loss can leave:
//
//   - a torn tail: a final line without '\n', or a final zstd frame cut short.
//     Reads ignore it and serve the valid prefix; a write handle cuts it
//     before its first mutation (zstd records recovered from a torn frame
//     are re-written as a fresh frame first).
//   - complete records of an unfinished turn after the last turn/end. They
//     are kept; resume closes the turn with synthesized closers
//     (session.InterruptedTurnClosers).
//   - a temp file of an unfinished publication, which is ignored.
//   - a lease whose owner died. It stays until its workflow closes the
//     handle or an operator forfeits it (Store.ForceUnlock); the lease has no
//     expiry, by design.
//
// A record damaged at or before the last turn/end, or any bad record inside a
// complete zstd frame, cannot be a crash artifact: the log is refused as
// corrupt (ErrCorrupt) and never guessed at.
//
// When Append returns nil, the batch has been written and fsynced, so it
// survives a crash. When Append fails, the file has been cut back to its
// previous size (or the failure to do so is reported), so retrying the same
// batch never duplicates seqs; retrying a batch that did land succeeds
// without writing. A new log is published with a no-overwrite link of a
// fsynced temp file followed by a directory fsync.
//
// Layering (README.md, Architecture; testsuite/layers checks it): the store is
// on row 3. It may import wire, internal/lib/... and session; not its
// neighbours provider and tool, nor anything above. Its subpackages crashfs
// and faultfs are on the same row.
package jsonl
