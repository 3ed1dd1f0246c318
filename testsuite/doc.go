// Package testsuite holds sessionflow's conformance suite: one test per S0
// case of docs/CONFORMANCE.md and the turn tests with the real agent
// activities, on the deterministic harness testsuite/sessiontest. Its
// subpackages hold the other suites (cli, cluster, faults, harness,
// integration, replay, soak, layers), the recorded histories (histories/)
// and the test harness (sessiontest, testdeadline) that the tests of every
// package may use.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; nothing imports it.
package testsuite
