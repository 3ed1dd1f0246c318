package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/readiness"
	"github.com/sessionflow/sessionflow/wire"
)

// runWorkerEnv makes the test binary run the worker command (main) instead
// of the tests.
const runWorkerEnv = "SESSIONFLOW_TEST_RUN_WORKER"

// cliPath is the Temporal CLI located once for the package's tests.
var cliPath string

func TestMain(m *testing.M) {
	if os.Getenv(runWorkerEnv) == "1" {
		// The test binary re-executed as the worker command.
		main()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	p, err := devserver.Locate(ctx, devserver.LocateOptions{Progress: os.Stderr})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "locating the Temporal CLI:", err)
		os.Exit(1)
	}
	cliPath = p
	os.Exit(m.Run())
}

// syncBuffer is a buffer safe for concurrent writes and reads that signals
// every write.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{wrote: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the buffer contains s, or the command ended. The
// deadline is longer than the dev server's own readiness wait, so that a
// server that never comes up is reported by the command itself.
func (b *syncBuffer) waitFor(t *testing.T, s string, done <-chan int) {
	t.Helper()
	deadline := time.After(2 * readiness.DefaultTimeout)
	for !strings.Contains(b.String(), s) {
		select {
		case <-b.wrote:
		case code := <-done:
			t.Fatalf("the command exited with %d before printing %q", code, s)
		case <-deadline:
			t.Fatalf("no %q printed", s)
		}
	}
}

func isolatedEnv(t *testing.T) []string {
	return []string{
		"TEMPORAL_CLI=" + cliPath,
		"TEMPORAL_CONFIG_FILE=" + filepath.Join(t.TempDir(), "absent.toml"),
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
		code int
	}{
		{"help", []string{"-h"}, "-dev-ephemeral", 0},
		{"unknown flag", []string{"--frobnicate"}, "frobnicate", 2},
		{"positional", []string{"now"}, "unexpected arguments", 2},
		{"dev flag without dev", []string{"--dev-ephemeral"}, "need --dev", 2},
		{"address with dev", []string{"--dev", "--address", "x:1"}, "--address cannot be combined with --dev", 2},
		{"tls with dev, namespace allowed", []string{"--dev", "--namespace", "ns", "--tls"}, "--tls cannot be combined with --dev", 2},
		{"log format", []string{"--log-format", "xml"}, "--log-format", 2},
		{"log level", []string{"--log-level", "loud"}, "--log-level", 2},
		{"bad compression", []string{"--compression", "gzip"}, "--compression", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), c.args, isolatedEnv(t), &stdout, &stderr)
			assert.Equal(t, c.code, code)
			assert.Contains(t, stderr.String(), c.want)
		})
	}
}

func TestDevPreparePrintsTheCLI(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--dev-prepare"}, isolatedEnv(t), &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Equal(t, cliPath+"\n", stdout.String())
}

// devRun is a `worker --dev` run in a goroutine.
type devRun struct {
	cancel context.CancelFunc
	done   chan int
	stdout *syncBuffer
	stderr *syncBuffer
}

func startDev(t *testing.T, args []string) *devRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &devRun{cancel: cancel, done: make(chan int, 1), stdout: newSyncBuffer(), stderr: newSyncBuffer()}
	go func() { r.done <- run(ctx, args, isolatedEnv(t), r.stdout, r.stderr) }()
	t.Cleanup(cancel)
	r.stderr.waitFor(t, "worker started", r.done)
	return r
}

func (r *devRun) field(t *testing.T, label string) string {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(label) + `\s+(\S+)`).FindStringSubmatch(r.stdout.String())
	require.NotNil(t, m, "no %q line in %q", label, r.stdout.String())
	return m[1]
}

func (r *devRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.done:
		require.Equal(t, 0, code, r.stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("the worker did not stop")
	}
}

func TestDevModeSessionSurvivesRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	args := []string{
		"--dev", "--dev-dir", filepath.Join(dir, "dev"), "--dev-port", "0", "--dev-ui-port", "0",
		"--store-root", filepath.Join(dir, "store"), "--metrics-address", "", "--task-queue", "sessionflow",
	}

	first := startDev(t, args)
	ui := first.field(t, "Web UI:")
	resp, err := http.Get(ui)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, filepath.Join(dir, "dev", devserver.DBFileName), first.field(t, "Server state:"))
	assert.FileExists(t, filepath.Join(dir, "dev", "temporal.log"))

	c, err := client.Dial(client.Options{HostPort: first.field(t, "Temporal dev server:")})
	require.NoError(t, err)
	wid := wire.WorkflowID("kept")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: "sessionflow"},
		wire.CreateSessionName, workflows.CreateSessionRequest{SessionID: "kept"})
	require.NoError(t, err)
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: wid, UpdateName: wire.UpdateWaitReady, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	var info wire.SessionInfo
	require.NoError(t, h.Get(ctx, &info))
	c.Close()
	first.stop(t)
	assert.Contains(t, first.stderr.String(), "stopping the dev server")

	// The server and the worker come back; the live session is still there
	// and is disposed through the new worker.
	second := startDev(t, args)
	c, err = client.Dial(client.Options{HostPort: second.field(t, "Temporal dev server:")})
	require.NoError(t, err)
	defer c.Close()
	h, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: wid, UpdateName: wire.UpdateDispose, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	var dr wire.DisposeResult
	require.NoError(t, h.Get(ctx, &dr))
	assert.Equal(t, info.NextSeq, dr.NextSeq)
	require.NoError(t, c.GetWorkflow(ctx, wid, run.GetRunID()).Get(ctx, nil))
	second.stop(t)
}

func TestDevModeEphemeral(t *testing.T) {
	dir := t.TempDir()
	r := startDev(t, []string{
		"--dev", "--dev-ephemeral", "--dev-dir", filepath.Join(dir, "dev"), "--dev-port", "0", "--dev-ui-port", "0",
		"--store-root", filepath.Join(dir, "store"), "--metrics-address", "127.0.0.1:0", "--log-format", "json",
	})
	assert.Contains(t, r.stdout.String(), "in memory (--dev-ephemeral)")
	assert.NoFileExists(t, filepath.Join(dir, "dev", devserver.DBFileName))
	assert.Contains(t, r.stderr.String(), `"msg":"worker started"`)
	r.stop(t)
}
