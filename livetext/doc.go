// Package livetext carries the text a running model call streams to the
// viewers of its session, through the store's session directory and not
// through Temporal: the model activity writes each chunk to a per-call
// file beside the log (Writer), and any process that sees the store root
// follows it with low latency (Follow, Source), woken by inotify with a
// polling fallback.
//
// The live file is not part of the log and is not durable (docs/FORMAT.md
// "Live text"): it is written without fsync, removed once the call's
// message is stored, and replaced by the next attempt of a retried call.
// Its records carry the call's turn, step and attempt, each chunk's byte
// offset, and an end marker; a follower yields chunk, reset (a retried
// attempt replaces what was shown) and end events (wire.LiveEvent). Torn or
// damaged content is skipped, never fatal: the log is the source of truth.
//
// Layering (README.md, Architecture; testsuite/layers checks it): livetext
// sits beside the store, on row 3. It may import wire, internal/lib/... and
// jsonl/... (the store's id lookup is the only way from a session id to its
// directory); activities, agent and the programs above import it. Package
// client does not: it takes a follower through an interface
// (client.LiveSource) that Source satisfies.
package livetext
