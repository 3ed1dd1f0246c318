package workflows_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// v0Log is a format v0 log as the published harness writes it: a v0
// header, then a turn left open by a crash.
const v0Log = `{"type":"session","version":0,"id":"h1","createdAt":1700000000000,"cwd":"/work/project","delegationDepth":0}` + "\n" +
	`{"type":"turn/start","seq":0,"time":1700000000000,"data":{"turn":1}}` + "\n"

func writeV0(t *testing.T, root string) string {
	t.Helper()
	path := filepath.Join(root, "--work-project--", "h1", "session.jsonl")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(v0Log), 0o600))
	return path
}

// TestResumeSessionMigratesFormatV0: the ResumeSession workflow over a
// session the published harness wrote migrates it to v3 beside the
// untouched v0 file and repairs the v3 log (D23).
func TestResumeSessionMigratesFormatV0(t *testing.T) {
	st := sessiontest.NewStore(t, jsonl.CompressionNone)
	old := writeV0(t, st.Root())
	info, _ := sessiontest.ResumeAndDispose(t, st, "h1")
	require.Equal(t, wire.FormatVersion, info.Header.Version)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(sessiontest.Stored(t, st, "h1")))
	raw, err := os.ReadFile(old)
	require.NoError(t, err)
	require.Equal(t, v0Log, string(raw), "the v0 file changed")
	_, err = os.Stat(filepath.Join(filepath.Dir(old), "session.v3.jsonl"))
	require.NoError(t, err)
}

// TestResumeSessionOnAV0Root: on a root configured for format v0 the same
// resume repairs the v0 log in place and writes no v3 generation (D25).
func TestResumeSessionOnAV0Root(t *testing.T) {
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: jsonl.CompressionNone, Format: jsonl.FormatV0})
	require.NoError(t, err)
	old := writeV0(t, st.Root())
	info, _ := sessiontest.ResumeAndDispose(t, st, "h1")
	require.Equal(t, wire.FormatVersionV0, info.Header.Version)
	require.Equal(t, []string{"turn/start", "turn/end", "session/end-seed"}, sessiontest.Types(sessiontest.Stored(t, st, "h1")))
	raw, err := os.ReadFile(old)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"type":"session/end-seed"`)
	_, err = os.Stat(filepath.Join(filepath.Dir(old), "session.v3.jsonl"))
	require.True(t, os.IsNotExist(err), "a v3 generation on a v0 root: %v", err)
}

// TestCreateSessionOnAV0Root: a session created and appended to through
// the CreateSession workflow on a v0 root is written in format v0, as the
// published harness writes it (D25).
func TestCreateSessionOnAV0Root(t *testing.T) {
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: jsonl.CompressionNone, Format: jsonl.FormatV0})
	require.NoError(t, err)
	h := sessiontest.NewHarnessOn(t, st).WithID("c0")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	app := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: sessiontest.LiveTurn(t, 0, 1, "x")})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "c0", Meta: &wire.SessionMeta{Cwd: "/work/project"}})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	app.OK(t)
	disp.OK(t)
	raw, err := os.ReadFile(filepath.Join(st.Root(), "--work-project--", "c0", "session.jsonl"))
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(raw), "\n")
	require.Regexp(t, `^\{"type":"session","version":0,"id":"c0","createdAt":\d+,"cwd":"/work/project","delegationDepth":0\}$`, first)
	require.Equal(t, sessiontest.Types(sessiontest.LiveTurn(t, 0, 1, "x")), sessiontest.Types(sessiontest.Stored(t, st, "c0")))
}
