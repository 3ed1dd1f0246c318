package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/wire"
)

// historiesDir holds the recorded histories.
const historiesDir = "../histories"

// minHistories is the number of lifecycle paths recorded at the least:
// create, resume with repair, setup failure, abort during setup, owner
// unload, loop deactivation, dispose, continue-as-new.
const minHistories = 8

// replayRegistry lets workerapp.Register register the workflows on a
// replayer exactly as the worker does. Activities are not needed to replay
// and are ignored; the worker registers no Nexus service (the embedded nil
// registry would fail the test if it did).
type replayRegistry struct {
	worker.WorkflowReplayer
	worker.NexusServiceRegistry
}

// RegisterActivity ignores the activity.
func (replayRegistry) RegisterActivity(any) {}

// RegisterActivityWithOptions ignores the activity.
func (replayRegistry) RegisterActivityWithOptions(any, activity.RegisterOptions) {}

// RegisterDynamicActivity ignores the activity.
func (replayRegistry) RegisterDynamicActivity(any, activity.DynamicRegisterOptions) {}

var _ worker.Registry = replayRegistry{}

// workflowType returns the type of the workflow a history file records.
func workflowType(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, hist.Events, "%s holds no events", path)
	attrs := hist.Events[0].GetWorkflowExecutionStartedEventAttributes()
	require.NotNil(t, attrs, "%s does not start with WorkflowExecutionStarted", path)
	return attrs.GetWorkflowType().GetName()
}

func TestReplayHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(historiesDir, "*.json"))
	require.NoError(t, err)
	// Histories recorded before a versioned change stay, so every branch
	// of every GetVersion keeps replaying.
	legacy, err := filepath.Glob(filepath.Join(historiesDir, "legacy", "*.json"))
	require.NoError(t, err)
	files = append(files, legacy...)
	require.GreaterOrEqual(t, len(files), minHistories, "recorded histories in %s", historiesDir)

	// The deadlock detector fails a workflow task whose goroutine runs for
	// more than a second without yielding: on a loaded machine under -race
	// that measures the scheduler, not the workflow. Replay proves the
	// command sequence; the live workers keep their detector.
	replayer, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DisableDeadlockDetection: true})
	require.NoError(t, err)
	workerapp.Register(replayRegistry{WorkflowReplayer: replayer}, nil, nil)

	seen := map[string]int{}
	for _, path := range files {
		seen[workflowType(t, path)]++
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, path))
		})
	}
	for _, name := range []string{wire.CreateSessionName, wire.ResumeSessionName, wire.LiveSessionName, wire.SessionLoopName} {
		require.Positive(t, seen[name], "no recorded history of %s", name)
	}
}
