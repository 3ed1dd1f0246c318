package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
)

// TestResumeAfterTerminateWithoutUnlock: a session with a non-ASCII id is
// created and appended to through the starter CLI, its workflow is
// terminated with the temporal CLI, and a plain `starter resume` recovers
// it (the dead owner's lease is forfeited, no unlock); --keep-dead-owner
// keeps the refusal. `list` shows the real id. A 300-character id is
// refused at once by the starter and, started by the temporal CLI, by the
// workflow before any activity.
func TestResumeAfterTerminateWithoutUnlock(t *testing.T) {
	cli, err := devserver.Locate(context.Background(), devserver.LocateOptions{})
	require.NoError(t, err)
	e := newEnv(t)
	e.startWorker(true)
	const id = "日本"
	e.mustStarter("", "create", "--id", id, "--cwd", "/work")
	in, events := sample(t)
	e.mustStarter(in, "append", "--id", id)
	e.requireListed(id, "live", "/work")

	term := exec.Command(cli, "workflow", "terminate", "--workflow-id", "session/%E6%97%A5%E6%9C%AC", "--reason", "harness crashed",
		"--address", fmt.Sprintf("127.0.0.1:%d", e.port), "--namespace", e.namespace)
	out, err := term.CombinedOutput()
	require.NoError(t, err, "%s", out)

	_, err = e.starter("", "resume", "--id", id, "--keep-dead-owner")
	require.ErrorContains(t, err, "already owned by an active write handle")

	got := e.mustStarter("", "resume", "--id", id, "--json")
	var s struct {
		SessionID  string `json:"sessionId"`
		WorkflowID string `json:"workflowId"`
		NextSeq    int64  `json:"nextSeq"`
	}
	require.NoError(t, json.Unmarshal([]byte(got), &s), got)
	require.Equal(t, id, s.SessionID)
	require.Equal(t, "session/%E6%97%A5%E6%9C%AC", s.WorkflowID)
	require.Greater(t, s.NextSeq, int64(len(events)), "the resume stored at least its end-seed marker")
	e.mustStarter("", "dispose", "--id", id)
	stored := e.stored(id)
	requireContiguous(t, stored)
	require.Equal(t, "session/end-seed", stored[len(stored)-1].Type)
	require.True(t, strings.HasPrefix(stored[0].Type, "turn/"))

	// An id the store cannot hold fails at once, from the client and from
	// the workflow, and nothing is retried.
	long := strings.Repeat("x", 300)
	_, err = e.starter("", "create", "--id", long)
	require.ErrorContains(t, err, "session id is too long: it encodes to a 300-byte directory name and the store's limit is 255 bytes")
	temporal := func(args ...string) (string, error) {
		cmd := exec.Command(cli, append(args, "--address", fmt.Sprintf("127.0.0.1:%d", e.port), "--namespace", e.namespace)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out2, err := temporal("workflow", "start", "--task-queue", e.taskQueue, "--type", "CreateSession", "--workflow-id", "session/"+long,
		"--input", `{"sessionId":"`+long+`"}`)
	require.NoError(t, err, out2)
	out2, err = temporal("workflow", "result", "--workflow-id", "session/"+long)
	require.Error(t, err, out2)
	require.Contains(t, out2, "the store's limit is 255 bytes")
	hist, err := temporal("workflow", "show", "-o", "json", "--workflow-id", "session/"+long)
	require.NoError(t, err, hist)
	require.Contains(t, hist, "EVENT_TYPE_WORKFLOW_EXECUTION_FAILED")
	require.NotContains(t, hist, "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED", "no activity ran, so none was retried")
}
