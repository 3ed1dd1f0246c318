// Package replay replays the workflow histories committed in
// ../histories, recorded from real runs of every lifecycle path, against
// the current workflow code: a change to a workflow's command sequence that
// is not gated with workflow.GetVersion fails here as non-determinism.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; nothing imports it.
package replay
