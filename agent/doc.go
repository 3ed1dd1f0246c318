// Package agent runs an agent's turns against the session log: the model
// and tool activities that read the conversation through a session's held
// write handle, call a provider or a tool, and store what they produced
// themselves, so that workflow history carries only seqs, ids and names.
//
// The activities are built on the worker's activities.Runtime, which they
// share with the store activities: the store, the heartbeat and the error
// classes (docs/DECISIONS.md D84). Each Activities value owns its
// conversation cache. A model call reads the log with jsonl.Handle.Tail and
// decodes it with no lock held; only the store of its message runs under
// the session's lock (jsonl.Handle.Update).
//
// Every activity is idempotent against the log: a retry finds what an
// earlier attempt stored and continues from there (LIFECYCLE.md, turns).
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 5. It
// may import wire, internal/lib/..., session, jsonl, livetext, provider, tool
// (and their subpackages) and activities; not workflows, client or anything
// above.
package agent
