// Package sessiontest is the deterministic harness the workflow tests run
// on: one store, the real activities and a Temporal test environment
// (go.temporal.io/sdk/testsuite) per Harness, with hook activities that
// record their calls, steps that run in the order they are written
// (UpdateAt, At, WaitFor and their forms), results every test must check,
// store fixtures and checks (WriteStored, Stored, RequireReleased,
// RequireErased), event builders (Ev, LiveTurn), and a scripted fake of the
// agent activities (FakeAgent) for the loop's turns.
//
// It is used by the unit tests of package workflows (package workflows_test,
// among them the S0 conformance cases) and by the suites under testsuite;
// nothing outside tests imports it. It lives beside the tests, not in
// internal/, because it is test harness, not code the programs run.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; of testsuite, only this
// harness (sessiontest, testdeadline) may be imported, by the tests of any
// package, never by production code.
package sessiontest
