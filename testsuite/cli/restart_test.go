package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/readiness"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
	"github.com/sessionflow/sessionflow/wire"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
)

// bin holds the binaries built once for the package.
var bin struct{ starter, worker string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sessionflow-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.starter, bin.worker = filepath.Join(dir, "starter"), filepath.Join(dir, "worker")
	for out, pkg := range map[string]string{bin.starter: "../../cmd/starter", bin.worker: "../../worker"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", pkg, err)
			os.Exit(1)
		}
	}
	// The embedded dev server is located (or built) once, before any test.
	prep := exec.Command(bin.worker, "--dev-prepare")
	prep.Stdout, prep.Stderr = os.Stderr, os.Stderr
	if err := prep.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "prepare the dev server: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// envDeadline bounds one test of the package: a worker --dev started (a
// cold dev server on a loaded machine takes a minute or two), a few
// restarts and CLI calls. A test still running after it fails by name.
const envDeadline = 8 * time.Minute

// env is a worker's and the CLI's shared setup.
type env struct {
	t *testing.T
	// ctx ends at the test's deadline; the processes the test starts are
	// killed then.
	ctx                  context.Context
	devDir, root         string
	port, uiPort         int
	worker               *exec.Cmd
	exited               <-chan struct{}
	starts               int
	identity             string
	workerLog            *syncBuffer
	taskQueue, namespace string
	// workerArgs are more flags of the worker.
	workerArgs []string
	// workerDir, when set, is the worker's working directory; the store
	// root and the dev directory are then passed relative to it, as a
	// person running `worker --dev` there leaves them.
	workerDir string
}

func newEnv(t *testing.T) *env {
	dir := t.TempDir()
	return &env{
		t: t, ctx: testdeadline.Context(t, envDeadline), devDir: filepath.Join(dir, "dev"), root: filepath.Join(dir, "store"),
		port: freePort(t), uiPort: freePort(t), taskQueue: "cli-e2e", namespace: "default",
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startWorker runs `worker --dev` in its own process group (the dev server is
// its child), and waits until the server is healthy, has sessionflow's
// search attributes and a worker polls the task queue. The wait fails at
// once if the worker exits, and reports the worker's and the server's logs.
//
// Another test's process may take the frontend or UI port the test picked
// before the worker's dev server binds it (the dev server itself starts
// again when a port of its own was taken, devserver.Start): a worker that
// exits because an address is in use is started again, up to three times
// in all, on new ports if the server never ran yet (the clients have not
// been given its address).
func (e *env) startWorker(ephemeral bool) {
	for attempt := 1; ; attempt++ {
		err := e.startWorkerOnce(ephemeral)
		if err == nil {
			return
		}
		select {
		case <-e.exited:
		default:
			require.NoError(e.t, err)
		}
		if attempt == 3 || !strings.Contains(e.logs(), "address already in use") {
			require.NoError(e.t, err)
		}
		e.t.Logf("worker --dev exited because an address was in use; starting it again: %v", err)
		if e.starts == attempt {
			e.port, e.uiPort = freePort(e.t), freePort(e.t)
		}
	}
}

// startWorkerOnce is one attempt of startWorker.
func (e *env) startWorkerOnce(ephemeral bool) error {
	e.starts++
	// A fresh identity per start: a persistent server still lists the
	// poller of a killed worker for a while.
	e.identity = fmt.Sprintf("cli-e2e-worker-%d", e.starts)
	devDir, root := e.devDir, e.root
	if e.workerDir != "" {
		var err error
		devDir, err = filepath.Rel(e.workerDir, e.devDir)
		require.NoError(e.t, err)
		root, err = filepath.Rel(e.workerDir, e.root)
		require.NoError(e.t, err)
	}
	args := []string{"--dev", "--dev-dir", devDir, "--dev-port", strconv.Itoa(e.port), "--dev-ui-port", strconv.Itoa(e.uiPort),
		"--store-root", root, "--compression", "none", "--task-queue", e.taskQueue, "--metrics-address", "", "--log-level", "warn",
		"--identity", e.identity}
	if ephemeral {
		args = append(args, "--dev-ephemeral")
	}
	args = append(args, e.workerArgs...)
	e.workerLog = &syncBuffer{}
	e.worker = exec.Command(bin.worker, args...)
	e.worker.Dir = e.workerDir
	e.worker.Stdout, e.worker.Stderr = e.workerLog, e.workerLog
	e.worker.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(e.t, e.worker.Start())
	exited := make(chan struct{})
	e.exited = exited
	var exitErr error
	go func(cmd *exec.Cmd) {
		exitErr = cmd.Wait()
		close(exited)
	}(e.worker)
	e.t.Cleanup(func() { e.kill() })
	err := readiness.Wait(e.ctx, readiness.Options{
		What: "worker --dev",
		// Longer than the worker's own wait for its dev server, so that a
		// server that never comes up is reported by the worker itself.
		Timeout: 2 * readiness.DefaultTimeout,
		Exited:  exited,
		ExitErr: func() error { return exitErr },
		Log:     e.logs,
	}, e.ready)
	return err
}

// ready is the probe of startWorker: the server answers its health check,
// serves the namespace with sessionflow's search attributes, and a worker
// polls the task queue under the identity of this start.
func (e *env) ready(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.DialContext(pctx, client.Options{
		HostPort:  fmt.Sprintf("127.0.0.1:%d", e.port),
		Namespace: e.namespace,
		Logger:    log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	sa, err := c.OperatorService().ListSearchAttributes(pctx, &operatorservice.ListSearchAttributesRequest{Namespace: e.namespace})
	if err != nil {
		return err
	}
	for name := range devserver.SearchAttributes() {
		if _, ok := sa.GetCustomAttributes()[name]; !ok {
			return fmt.Errorf("search attribute %s is not registered yet", name)
		}
	}
	return readiness.TaskQueuePolled(c, e.taskQueue, e.identity)(pctx)
}

// logs returns the worker's output and the dev server's own log.
func (e *env) logs() string {
	server, err := os.ReadFile(filepath.Join(e.devDir, "temporal.log"))
	if err != nil {
		server = []byte(fmt.Sprintf("(reading the dev server log: %v)", err))
	}
	return fmt.Sprintf("worker output:\n%s\ndev server log (%s):\n%s", e.workerLog, filepath.Join(e.devDir, "temporal.log"), server)
}

// syncBuffer is a bytes.Buffer safe for the process's output copier and
// the test to use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// kill sends SIGKILL to the worker and its dev server (the whole process
// group), as a crash of the machine's processes would, and waits for them.
func (e *env) kill() {
	if e.worker == nil || e.worker.Process == nil {
		return
	}
	_ = syscall.Kill(-e.worker.Process.Pid, syscall.SIGKILL)
	select {
	case <-e.exited:
	case <-time.After(30 * time.Second):
		e.t.Errorf("the worker (pid %d) was sent SIGKILL but did not exit within 30s", e.worker.Process.Pid)
	}
	e.worker = nil
	// The server's listener is gone once the group is dead.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", e.port), 200*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(100 * time.Millisecond)
	}
}

// starter runs the CLI against the worker's server and returns its stdout.
func (e *env) starter(stdin string, args ...string) (string, error) {
	return e.starterCtx(e.ctx, stdin, args...)
}

// starterCtx is starter, killed when ctx ends.
func (e *env) starterCtx(ctx context.Context, stdin string, args ...string) (string, error) {
	full := append(args, "--address", fmt.Sprintf("127.0.0.1:%d", e.port), "--namespace", e.namespace,
		"--task-queue", e.taskQueue, "--timeout", "90s")
	cmd := exec.CommandContext(ctx, bin.starter, full...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if e.ctx.Err() != nil {
			err = fmt.Errorf("killed at the test's deadline: %w", err)
		}
		return out.String(), fmt.Errorf("starter %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func (e *env) mustStarter(stdin string, args ...string) string {
	return e.mustStarterCtx(context.Background(), stdin, args...)
}

// mustStarterCtx is mustStarter, killed when ctx ends.
func (e *env) mustStarterCtx(ctx context.Context, stdin string, args ...string) string {
	out, err := e.starterCtx(ctx, stdin, args...)
	require.NoError(e.t, err, "%s", e.logs())
	return out
}

// stored reads the session's log from the store root.
func (e *env) stored(id string) []session.Event {
	st, err := jsonl.NewStore(jsonl.Options{Root: e.root, Compression: jsonl.CompressionNone})
	require.NoError(e.t, err)
	ctx := context.Background()
	h, err := st.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(e.t, err)
	defer h.Close(ctx)
	events, err := h.Read(ctx, 0, -1)
	require.NoError(e.t, err)
	return events
}

func sample(t *testing.T) (string, []session.Event) {
	b, err := os.ReadFile("../../testdata/sample.jsonl")
	require.NoError(t, err)
	var events []session.Event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev session.Event
		require.NoError(t, ev.UnmarshalJSON([]byte(line)))
		events = append(events, ev)
	}
	return string(b), events
}

func requireContiguous(t *testing.T, events []session.Event) {
	for i, e := range events {
		require.Equal(t, int64(i), e.Seq)
	}
}

// requireListed waits until `starter list` (eventually consistent
// visibility) shows the session with its phase and cwd read from the search
// attributes the workflow keeps.
func (e *env) requireListed(id, phase, cwd string) {
	var out string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out = e.mustStarter("", "list", "--json")
		var rows []struct {
			SessionID string `json:"sessionId"`
			Phase     string `json:"phase"`
			Cwd       string `json:"cwd"`
			Source    string `json:"source"`
		}
		require.NoError(e.t, json.Unmarshal([]byte(out), &rows), out)
		for _, r := range rows {
			if r.SessionID == id && r.Phase == phase && r.Cwd == cwd && r.Source == "searchAttributes" {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.t.Fatalf("session %q (phase %s, cwd %s) not listed from search attributes:\n%s", id, phase, cwd, out)
}

// A session created and appended through the CLI survives SIGKILL of the
// worker and of its persistent dev server: after both restart, the same
// workflow is still live and the session goes on.
func TestSessionSurvivesKillWithPersistentServer(t *testing.T) {
	e := newEnv(t)
	e.startWorker(false)
	in, want := sample(t)
	e.mustStarter("", "create", "--id", "s1", "--cwd", "/work")
	e.mustStarter(in, "append", "--id", "s1")
	require.Equal(t, want, e.stored("s1"))
	e.requireListed("s1", "live", "/work")

	e.kill()
	e.startWorker(false)

	out := e.mustStarter("", "describe", "--id", "s1", "--json")
	require.Contains(t, out, `"phase": "live"`)
	next, err := session.NewEvent(wire.TypeTurnStart, int64(len(want)), 1767225700000, map[string]any{"turn": 3})
	require.NoError(t, err)
	line, err := next.MarshalJSON()
	require.NoError(t, err)
	e.mustStarter(string(line)+"\n", "append", "--id", "s1")
	e.mustStarter("", "dispose", "--id", "s1")

	got := e.stored("s1")
	require.Equal(t, want, got[:len(want)])
	require.Equal(t, wire.TypeTurnStart, got[len(want)].Type)
	requireContiguous(t, got)
}

// The same with an in-memory server: Temporal forgets everything, the store
// does not. The dead workflow's lease is forfeited through the Temporal-checked
// unlock, and resume continues the session from its log.
func TestSessionSurvivesKillWithEphemeralServer(t *testing.T) {
	e := newEnv(t)
	e.startWorker(true)
	in, want := sample(t)
	e.mustStarter("", "create", "--id", "s2")
	e.mustStarter(in, "append", "--id", "s2")

	e.kill()
	e.startWorker(true)

	_, err := e.starter("", "resume", "--id", "s2")
	require.ErrorContains(t, err, "already owned by an active write handle")
	e.mustStarter("", "unlock", "--id", "s2", "--root", e.root, "--compression", "none")
	e.mustStarter("", "resume", "--id", "s2")
	e.mustStarter("", "dispose", "--id", "s2")

	got := e.stored("s2")
	require.Equal(t, want, got[:len(want)])
	require.Len(t, got, len(want)+1, "a balanced log gains only the end-seed marker")
	require.Equal(t, wire.TypeEndSeed, got[len(want)].Type)
	requireContiguous(t, got)
}
