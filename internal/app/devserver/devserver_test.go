package devserver

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/internal/app/readiness"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
)

// assertSearchAttributes checks that sessionflow's search attributes are
// registered in the server's namespace.
func assertSearchAttributes(t *testing.T, ctx context.Context, s *Server) {
	t.Helper()
	resp, err := s.Client().OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace()})
	require.NoError(t, err)
	for name, typ := range SearchAttributes() {
		assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, typ)
		assert.Equal(t, typ, resp.GetCustomAttributes()[name], "search attribute %s", name)
	}
}

// assertPartitions checks the number of partitions of a task queue's
// workflow and activity tasks, the effect of the matching.numTaskqueue*
// dynamic config values the server runs with.
func assertPartitions(t *testing.T, ctx context.Context, s *Server, want int) {
	t.Helper()
	resp, err := s.Client().WorkflowService().ListTaskQueuePartitions(ctx, &workflowservice.ListTaskQueuePartitionsRequest{
		Namespace: s.Namespace(),
		TaskQueue: &taskqueuepb.TaskQueue{Name: "partitions", Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
	})
	require.NoError(t, err)
	assert.Len(t, resp.GetWorkflowTaskQueuePartitions(), want, "workflow task queue partitions")
	assert.Len(t, resp.GetActivityTaskQueuePartitions(), want, "activity task queue partitions")
}

// serverDeadline bounds each test that starts a dev server: a cold start
// on a loaded two-core machine can take a minute or two (readiness waits up
// to five), and a test still running after it fails by name.
const serverDeadline = 4 * time.Minute

func TestDynamicConfigOverridesDefaults(t *testing.T) {
	defaults := DefaultDynamicConfig()
	assert.Equal(t, defaults, dynamicConfig(nil))

	got := dynamicConfig([]string{"matching.numTaskqueueReadPartitions=4", "limit.maxIDLength=300"})
	assert.Contains(t, got, "matching.numTaskqueueReadPartitions=4")
	assert.NotContains(t, got, "matching.numTaskqueueReadPartitions=1", "an override replaces its default")
	assert.Contains(t, got, "limit.maxIDLength=300")
	assert.Contains(t, got, "matching.numTaskqueueWritePartitions=1", "other defaults stay")
	assert.Len(t, got, len(defaults)+1)
}

func TestStartEphemeral(t *testing.T) {
	ctx := testdeadline.Context(t, serverDeadline)
	s, err := Start(ctx, Options{CLIPath: cliPath, Ephemeral: true})
	require.NoError(t, err)
	defer s.Stop()

	assert.Equal(t, DefaultNamespace, s.Namespace())
	assert.Empty(t, s.DBPath())
	assert.Empty(t, s.UIURL())
	assert.Equal(t, cliPath, s.CLIPath())
	ns, err := s.Client().WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: DefaultNamespace})
	require.NoError(t, err)
	assert.Equal(t, DefaultNamespace, ns.GetNamespaceInfo().GetName())
	assertSearchAttributes(t, ctx, s)
	// Registering again is harmless.
	require.NoError(t, registerSearchAttributes(ctx, s.Client(), s.Namespace()))
	assertPartitions(t, ctx, s, 1)

	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop(), "Stop is idempotent")
	_, err = net.DialTimeout("tcp", s.Address(), 5*time.Second)
	assert.Error(t, err, "the frontend no longer accepts connections after Stop")
}

func TestStartPersistentSurvivesRestart(t *testing.T) {
	ctx := testdeadline.Context(t, serverDeadline)
	dir := t.TempDir()
	s, err := Start(ctx, Options{CLIPath: cliPath, StateDir: dir, UI: true, Namespace: "sessions"})
	require.NoError(t, err)
	defer s.Stop()
	assert.Equal(t, filepath.Join(dir, DBFileName), s.DBPath())
	assert.FileExists(t, s.DBPath())
	require.NotEmpty(t, s.UIURL())
	assertUIServes(t, ctx, s.UIURL())

	run, err := s.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "persisted", TaskQueue: "nobody-polls"}, "Anything")
	require.NoError(t, err)
	require.NoError(t, s.Stop())

	s2, err := Start(ctx, Options{CLIPath: cliPath, StateDir: dir, Namespace: "sessions"})
	require.NoError(t, err)
	defer s2.Stop()
	desc, err := s2.Client().DescribeWorkflow(ctx, "persisted", "")
	require.NoError(t, err)
	assert.Equal(t, run.GetRunID(), desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.RawResponse.GetWorkflowExecutionInfo().GetStatus())
	assertSearchAttributes(t, ctx, s2)
	require.NoError(t, s2.Stop())
}

func TestStartEphemeralForgetsOnRestart(t *testing.T) {
	ctx := testdeadline.Context(t, serverDeadline)
	s, err := Start(ctx, Options{CLIPath: cliPath, Ephemeral: true})
	require.NoError(t, err)
	defer s.Stop()
	_, err = s.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "transient", TaskQueue: "nobody-polls"}, "Anything")
	require.NoError(t, err)
	require.NoError(t, s.Stop())

	s2, err := Start(ctx, Options{CLIPath: cliPath, Ephemeral: true})
	require.NoError(t, err)
	defer s2.Stop()
	_, err = s2.Client().DescribeWorkflow(ctx, "transient", "")
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf)
}

// assertUIServes waits until the Web UI answers with 200 OK.
func assertUIServes(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the Web UI at %s never answered: %v", url, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestStartRequiresStateDir(t *testing.T) {
	_, err := Start(context.Background(), Options{CLIPath: cliPath})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "state directory")
}

// A server that exits during its start fails Start at once (not after the
// readiness timeout), with its exit status and its own complaint.
func TestStartFailureReportsServerOutput(t *testing.T) {
	ctx := testdeadline.Context(t, serverDeadline)
	_, err := Start(ctx, Options{CLIPath: cliPath, Ephemeral: true, ReadyTimeout: time.Hour, ExtraArgs: []string{"--no-such-flag"}})
	require.Error(t, err)
	require.ErrorIs(t, err, readiness.ErrExited)
	require.NoError(t, ctx.Err(), "Start waited past the test's deadline instead of noticing the exit")
	assert.Contains(t, err.Error(), "starting the Temporal dev server")
	assert.Contains(t, err.Error(), "exit status")
	assert.Contains(t, err.Error(), "no-such-flag", "the server's own complaint is in the error")
}

// A server that never answers fails Start after the readiness timeout with
// the timeout's reason, and its process is gone.
func TestStartTimesOutOnASilentServer(t *testing.T) {
	ctx := testdeadline.Context(t, serverDeadline)
	// A "CLI" that prints a line and then sleeps without ever listening.
	fake := filepath.Join(t.TempDir(), "temporal")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\necho starting up\nexec sleep 600\n"), 0o755))
	_, err := Start(ctx, Options{CLIPath: fake, Ephemeral: true, ReadyTimeout: 2 * time.Second})
	require.ErrorIs(t, err, readiness.ErrTimedOut)
	assert.Contains(t, err.Error(), "starting up", "the server's output is in the error")
	assert.Contains(t, err.Error(), "last probe")
}

func TestStartRefusesBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = Start(context.Background(), Options{CLIPath: cliPath, Ephemeral: true, Port: port})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "frontend port")
	_, err = Start(context.Background(), Options{CLIPath: cliPath, Ephemeral: true, UI: true, UIPort: port})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Web UI port")
}

func TestStartOnFixedPorts(t *testing.T) {
	ctx := testdeadline.Context(t, serverDeadline)
	port, err := freePort("127.0.0.1")
	require.NoError(t, err)
	uiPort, err := freePort("127.0.0.1")
	require.NoError(t, err)
	s, err := Start(ctx, Options{CLIPath: cliPath, Ephemeral: true, Port: port, UI: true, UIPort: uiPort,
		DynamicConfig: []string{"limit.historyCount.suggestContinueAsNew=50",
			"matching.numTaskqueueReadPartitions=3", "matching.numTaskqueueWritePartitions=3"}})
	require.NoError(t, err)
	defer s.Stop()
	assertPartitions(t, ctx, s, 3)
	assert.Equal(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), s.Address())
	assert.Equal(t, "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(uiPort)), s.UIURL())
	assertUIServes(t, ctx, s.UIURL())
	require.NoError(t, s.Stop())
}

// A server that exits because a port it binds was taken meanwhile is
// started again on new ports; other failures are not retried.
func TestStartRetriesAPortTakenMeanwhile(t *testing.T) {
	ctx := testdeadline.Context(t, serverDeadline)
	dir := t.TempDir()
	tries := filepath.Join(dir, "tries")
	wrapper := filepath.Join(dir, "temporal")
	script := "#!/bin/sh\necho x >> " + tries + "\n" +
		"if [ $(wc -l < " + tries + ") -lt 2 ]; then echo 'listen tcp 127.0.0.1:1: bind: address already in use' >&2; exit 1; fi\n" +
		"exec " + cliPath + " \"$@\"\n"
	require.NoError(t, os.WriteFile(wrapper, []byte(script), 0o755))
	s, err := Start(ctx, Options{CLIPath: wrapper, Ephemeral: true})
	require.NoError(t, err)
	defer s.Stop()
	runs, err := os.ReadFile(tries)
	require.NoError(t, err)
	require.Equal(t, "x\nx\n", string(runs))
	require.NoError(t, s.Stop())

	// The same with the ports named: a port of the server's own was taken.
	require.NoError(t, os.Remove(tries))
	port, err := freePort("127.0.0.1")
	require.NoError(t, err)
	s, err = Start(ctx, Options{CLIPath: wrapper, Ephemeral: true, Port: port})
	require.NoError(t, err)
	defer s.Stop()
	runs, err = os.ReadFile(tries)
	require.NoError(t, err)
	require.Equal(t, "x\nx\n", string(runs))
	require.Equal(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), s.Address())

	// A named port found taken is refused at once, without a start.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	require.NoError(t, os.Remove(tries))
	_, err = Start(ctx, Options{CLIPath: wrapper, Ephemeral: true, Port: taken.Addr().(*net.TCPAddr).Port})
	require.ErrorIs(t, err, errPortTaken)
	require.NoFileExists(t, tries)

	failing := filepath.Join(dir, "failing")
	require.NoError(t, os.WriteFile(failing, []byte("#!/bin/sh\necho x >> "+tries+"\necho 'no such flag' >&2\nexit 1\n"), 0o755))
	_, err = Start(ctx, Options{CLIPath: failing, Ephemeral: true})
	require.ErrorContains(t, err, "no such flag")
	runs, err = os.ReadFile(tries)
	require.NoError(t, err)
	require.Equal(t, "x\n", string(runs))
}
