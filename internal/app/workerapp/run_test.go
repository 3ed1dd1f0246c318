package workerapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/workflows"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/readiness"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// srv is the dev server shared by the package's tests.
var srv *devserver.Server

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	path, err := devserver.Locate(ctx, devserver.LocateOptions{Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "locating the Temporal CLI:", err)
		return 1
	}
	srv, err = devserver.Start(ctx, devserver.Options{CLIPath: path, Ephemeral: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Stop()
	return m.Run()
}

// testLogger writes through t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// running is a worker started by startRun.
type running struct {
	cancel  context.CancelFunc
	done    chan error
	started Started
	stop    time.Duration
}

// startRun runs Run in a goroutine and waits until the worker polls.
func startRun(t *testing.T, cfg Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	startedCh := make(chan Started, 1)
	cfg.OnStarted = func(s Started) { startedCh <- s }
	r := &running{cancel: cancel, done: make(chan error, 1), stop: cfg.StopTimeout}
	go func() { r.done <- Run(ctx, cfg, testLogger(t)) }()
	select {
	case r.started = <-startedCh:
	case err := <-r.done:
		cancel()
		t.Fatalf("Run returned before the worker started: %v", err)
	case <-time.After(readiness.DefaultTimeout):
		cancel()
		t.Fatal("the worker did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		default:
		}
	})
	return r
}

// shutdown cancels Run and requires a nil return within the stop timeout
// (plus room for the server round trips of a stop).
func (r *running) shutdown(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		require.NoError(t, err)
	case <-time.After(r.stop + 30*time.Second):
		t.Fatalf("Run did not return within the stop timeout of %s", r.stop)
	}
}

// uniqueID returns an id no earlier test run used on the shared server.
func uniqueID(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// testConfig is a worker configuration against the shared dev server.
func testConfig(t *testing.T, taskQueue string) Config {
	cfg := DefaultConfig()
	cfg.Connection.Address = srv.Address()
	cfg.Connection.Namespace = srv.Namespace()
	cfg.TaskQueue = taskQueue
	cfg.StoreRoot = t.TempDir()
	cfg.MetricsAddress = "127.0.0.1:0"
	cfg.StopTimeout = 20 * time.Second
	return cfg
}

// update runs a workflow update to completion and decodes its result.
func update(t *testing.T, ctx context.Context, c client.Client, workflowID, name string, out any, args ...any) {
	t.Helper()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflowID,
		UpdateName:   name,
		Args:         args,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, out))
}

// scrape returns the text of the worker's /metrics endpoint.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// metricValue returns the value of an unlabelled sample in a scrape.
func metricValue(t *testing.T, text, name string) string {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("metric %s not exported", name)
	return ""
}

func TestRunServesSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig(t, uniqueID("run-sessions"))
	cfg.Compression = jsonl.CompressionNone
	cfg.Identity = "run-sessions-worker"

	// A session that crashed mid-turn: an open turn and a torn last record.
	st, err := jsonl.NewStore(jsonl.Options{Root: cfg.StoreRoot, Compression: cfg.Compression, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	crashedSession := uniqueID("crashed")
	h, err := st.Create(ctx, wire.Header{Version: wire.FormatVersion, ID: crashedSession, CreatedAt: 1}, jsonl.CreateOptions{HandleID: "fixture"})
	require.NoError(t, err)
	require.NoError(t, h.Append(ctx, append(turnEvents(t, 0, 1), event(t, wire.TypeTurnStart, 2, map[string]any{"turn": 2}))))
	require.NoError(t, h.Close(ctx))
	snap, err := st.Stat(ctx, crashedSession)
	require.NoError(t, err)
	f, err := os.OpenFile(snap.Path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"type":"step/start","seq":3,"time":`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r := startRun(t, cfg)
	c := r.started.Client
	assert.Equal(t, srv.Address(), r.started.Address)
	assert.Equal(t, cfg.TaskQueue, r.started.TaskQueue)

	// Create, append a turn, dispose.
	freshSession := uniqueID("fresh")
	freshID := wire.WorkflowID(freshSession)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: freshID, TaskQueue: cfg.TaskQueue},
		wire.CreateSessionName, workflows.CreateSessionRequest{SessionID: freshSession})
	require.NoError(t, err)
	var info wire.SessionInfo
	update(t, ctx, c, freshID, wire.UpdateWaitReady, &info)
	assert.Equal(t, freshSession, info.SessionID)
	assert.Equal(t, wire.SourceStartup, info.Source)
	var ar wire.AppendResult
	update(t, ctx, c, freshID, wire.UpdateAppend, &ar, workflows.AppendRequest{Events: turnEvents(t, info.NextSeq, info.LastTurn+1)})
	assert.Equal(t, info.NextSeq+2, ar.NextSeq)
	var dr wire.DisposeResult
	update(t, ctx, c, freshID, wire.UpdateDispose, &dr)
	require.NoError(t, run.Get(ctx, nil))
	// The task queue lists the worker among its pollers, under its identity.
	tq, err := c.DescribeTaskQueue(ctx, cfg.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	require.NoError(t, err)
	var identities []string
	for _, p := range tq.GetPollers() {
		identities = append(identities, p.GetIdentity())
	}
	assert.Contains(t, identities, cfg.Identity)
	fresh, err := st.Stat(ctx, freshSession)
	require.NoError(t, err)
	require.NotNil(t, fresh, "the created session is in the worker's store")

	// Resume the crashed session: the torn record is cut and the open turn
	// closed by crash closers.
	crashedID := wire.WorkflowID(crashedSession)
	run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: crashedID, TaskQueue: cfg.TaskQueue},
		wire.ResumeSessionName, wire.ResumeSessionRequest{ResumeSessionID: crashedSession})
	require.NoError(t, err)
	update(t, ctx, c, crashedID, wire.UpdateWaitReady, &info)
	assert.Equal(t, wire.SourceResume, info.Source)
	assert.Greater(t, info.NextSeq, int64(3), "closers and the end-seed marker follow the open turn")
	update(t, ctx, c, crashedID, wire.UpdateDispose, &dr)
	require.NoError(t, run.Get(ctx, nil))

	text := scrape(t, r.started.MetricsAddr)
	assert.Equal(t, "1", metricValue(t, text, MetricTornTailsRepaired))
	assert.NotEqual(t, "0", metricValue(t, text, MetricClosersAppended))
	assert.Equal(t, "2", metricValue(t, text, MetricLeasesAcquired))
	assert.Equal(t, "0", metricValue(t, text, MetricLeasesHeld), "every lease was released at disposal")
	assert.NotEqual(t, "0", metricValue(t, text, MetricBytesWritten))
	assert.NotEqual(t, "0", metricValue(t, text, MetricFsyncSeconds+"_count"))
	assert.Contains(t, text, "temporal_request_total{", "SDK metrics are exported")
	assert.Contains(t, text, "go_goroutines ")

	r.shutdown(t)
	_, err = net.DialTimeout("tcp", r.started.MetricsAddr, 5*time.Second)
	assert.Error(t, err, "the metrics endpoint closes with the worker")
}

// stopProbe is a test activity that returns only after its worker was told
// to stop.
func stopProbe(ctx context.Context) (string, error) {
	activity.RecordHeartbeat(ctx)
	probeStarted <- struct{}{}
	<-activity.GetWorkerStopChannel(ctx)
	return "finished after stop", nil
}

var probeStarted = make(chan struct{}, 1)

func stopProbeWorkflow(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var out string
	err := workflow.ExecuteActivity(ctx, "StopProbe").Get(ctx, &out)
	return out, err
}

func TestRunLetsRunningActivitiesFinish(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig(t, uniqueID("run-graceful"))
	cfg.Client = srv.Client()
	cfg.MetricsAddress = ""
	cfg.Register = func(r worker.Registry) {
		r.RegisterActivityWithOptions(stopProbe, activity.RegisterOptions{Name: "StopProbe"})
		r.RegisterWorkflowWithOptions(stopProbeWorkflow, workflow.RegisterOptions{Name: "StopProbeWorkflow"})
	}
	r := startRun(t, cfg)
	assert.Empty(t, r.started.MetricsAddr)
	wid := uniqueID("graceful")
	run, err := srv.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: cfg.TaskQueue}, "StopProbeWorkflow")
	require.NoError(t, err)
	select {
	case <-probeStarted:
	case <-ctx.Done():
		t.Fatal("the probe activity never started")
	}
	r.shutdown(t)

	// Run left the given client open; the activity's completion reached the
	// server after the stop began.
	it := srv.Client().GetWorkflowHistory(ctx, wid, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var completed bool
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
			completed = true
			assert.Contains(t, string(a.GetResult().GetPayloads()[0].GetData()), "finished after stop")
		}
	}
	assert.True(t, completed, "the running activity completed during the graceful stop")
	_, err = srv.Client().WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: srv.Namespace()})
	require.NoError(t, err)
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	err := Run(context.Background(), Config{}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid worker configuration")
}

func TestRunStopsDialingWhenCanceled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cfg := testConfig(t, "unreachable")
	cfg.Connection.Address = addr
	cfg.MetricsAddress = ""
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = Run(ctx, cfg, testLogger(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connecting to Temporal at "+addr)
	assert.True(t, errors.Is(err, context.DeadlineExceeded))
}

func TestRunFailsOnBusyMetricsAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cfg := testConfig(t, "busy-metrics")
	cfg.MetricsAddress = ln.Addr().String()
	err = Run(context.Background(), cfg, testLogger(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listening for metrics")
}

func TestRunFailsOnUnusableStoreRoot(t *testing.T) {
	file := t.TempDir() + "/not-a-dir"
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cfg := testConfig(t, "bad-root")
	cfg.Client = srv.Client()
	cfg.MetricsAddress = ""
	cfg.StoreRoot = file
	err := Run(context.Background(), cfg, testLogger(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "opening the session store")
}

// A taken HTTP address fails the start before the worker polls.
func TestRunFailsOnBusyHTTPAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cfg := testConfig(t, "busy-http")
	cfg.HTTPAddress = ln.Addr().String()
	err = Run(context.Background(), cfg, testLogger(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listen for the HTTP API on "+ln.Addr().String())
}
