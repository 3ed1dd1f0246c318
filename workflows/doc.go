// Package workflows is the workflow code of sessionflow: CreateSession and
// ResumeSession (a session's creation or resume, its live phase and its
// disposal, docs/LIFECYCLE.md), LiveSession (the same session after
// continue-as-new) and SessionLoop (a host of sessions started as child
// workflows). Their registered forms (CreateSessionWorkflow, ...) decode
// their input strictly.
//
// # State
//
// A session run is a lifecycle, which composes the owners of its state and
// writes none of their fields. Each piece of state has one owner type; its
// fields are written by its own methods only (other types may read them):
//
//   - env: what every owner reads and none writes after the run starts (the
//     contexts, the session id, settings, options, hooks), the run's
//     version gates (gates, versions.go) and what the run shows in the
//     Temporal UI (ui: its latest activity summary, written by env's act
//     methods; uimeta.go);
//   - storedLog: the write handle, the header and the cursor;
//   - phaseState: the lifecycle phase and its search attribute upserts, the
//     published entries, what WaitReady and Dispose answer;
//   - saga: the compensation stack of creation and resume;
//   - abortGuard: the Abort and OwnerUnload signals and the cancellation,
//     and the step in flight an abort interrupts;
//   - appendQueue: the accepted appends, their group commit or window, and
//     the local store;
//   - agentLoop: the agent's options, the running turn, the recent turns
//     and the waits for them, the queued and running manual compactions
//     (compact_update.go) and the trigger of the compaction running; its
//     inbox (the pending inputs) and the running turnRun (steps, tool
//     calls, span, whether its steps still measure pressure) own their own
//     fields.
//
// A SessionLoop run is a loop, which owns the registry of its children.
//
// An update's validator decodes its request and keeps it, by update id, for
// its handler (decodedRequests), so a request is decoded once; the handler
// decodes the payload itself when the validator did not run in this process
// (validators do not run on replay).
//
// # Determinism
//
// Workflow code runs again on replay and must issue the same commands in
// the same order from the same history. So workflow code:
//
//   - takes time from workflow.Now, never time.Now; sleeps with
//     workflow.Sleep or workflow.NewTimer;
//   - takes randomness and fresh ids only through workflow.SideEffect (the
//     handle id nonce, a configured agent's session id), or derives them from
//     the run (the turn span ids);
//   - runs concurrent work with workflow.Go, workflow.Channel,
//     workflow.Selector and workflow.Await, never go statements, Go
//     channels, select or sync;
//   - does no I/O: every effect is an activity (the store, the hooks, the
//     model and tools), a local activity, a signal or a child workflow;
//   - never ranges over a map where the order reaches a command or a result
//     (sort the keys first);
//   - reads no global mutable state and no environment; it may read the
//     workflow's own state, its input, the results of its activities and
//     workflow.GetInfo;
//   - may change what validators accept (they do not run on replay), but
//     lets a handler use what its validator kept only where the handler
//     would compute the same without it (decodedRequests).
//
// Activity options (timeouts, retry policies, heartbeat timeouts, task
// queues) are not part of the command sequence: changing them needs no
// gate. The CI runs the workflowcheck analyzer over the package with
// workflowcheck.config.yaml.
//
// # Versioning
//
// Every change to a command sequence (a command added, removed, reordered
// or of another type, an activity or signal name, a search attribute
// upsert, a marker) of a path that a recorded history holds is gated by
// workflow.GetVersion, and is proven by a history recorded with the change
// that replays beside the ones recorded before it. Every gate is listed in
// versions.go with what it changed. To add one:
//
//  1. declare its change id in versions.go (a new, never reused string,
//     with a comment saying what changes) and ask it only on the path it
//     changes, with versions DefaultVersion (before) and 1 (since):
//     workflow.GetVersion for a gate asked once, gates.taken for one asked
//     where many commands depend on it;
//  2. keep the DefaultVersion branch exactly as it was;
//  3. move the histories the change alters from testsuite/histories to
//     testsuite/histories/legacy (their names say which change they
//     predate), re-record with
//     go test ./testsuite/integration -run TestRecordHistories -record
//     (add a path to testsuite/integration/record_test.go when no recorded
//     path reaches the change), and describe the files in
//     testsuite/histories/README.md;
//  4. run go test ./testsuite/replay: every history, old and new, replays.
//
// Without -record, TestRecordHistories compares the command sequence of
// every path with its recorded file, so an ungated change is noticed even
// where a replay would still pass.
//
// # Imports
//
// The package sits above the event model and the activities and below the
// client and the program wiring. It may import wire (the contract),
// session (the event model), activities (the store activities' names and
// types), agent (the agent activities'), provider (a refused model call's
// error), internal/lib/wftrace (the workflow side of tracing; today
// internal/tracing), the Temporal SDK and API, the OpenTelemetry attribute
// API, github.com/google/uuid and the standard library. It imports no
// client, internal/app or testsuite package (testsuite/layers checks the
// house), and needs none of the store (jsonl) or the tools (tool): it
// reaches them through their activities.
package workflows
