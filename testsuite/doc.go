// Package testsuite is the root of sessionflow's suites; it holds no test
// of its own. Its subpackages hold the suites (cli, cluster, faults,
// harness, integration, replay, soak, layers), the recorded histories
// (histories/) and the test harness (sessiontest, testdeadline) that the
// tests of every package may use. The S0 cases of docs/CONFORMANCE.md and
// the turn tests with the real agent activities are the tests of package
// workflows, in workflows/, on the harness testsuite/sessiontest.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; nothing imports it.
package testsuite
