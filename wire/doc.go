// Package wire is sessionflow's contract: the names and types that travel
// between the store, the workflows, their activities and their clients.
// It declares every workflow, update, query, signal and activity name; the
// requests and results of the workflows, updates, queries and hooks; the
// session header, the plain event envelope (Event) and the event payloads a
// client reads; the lease file and the store interface a forfeit needs;
// the store's error codes and errors, the application error types and
// their retryability; search-attribute names, the workflow-id encoding and
// the identity rule; the batching of JSONL appends; and the summaries a
// session workflow is started with for the Temporal UI (summary.go).
//
// Workflow histories, lease files and client requests carry these values,
// so their values and JSON field names never change (docs/API.md,
// docs/FORMAT.md). The package imports only the standard library and no
// package of the module; package client imports no package of the module
// but this one (docs/DECISIONS.md D83).
package wire
