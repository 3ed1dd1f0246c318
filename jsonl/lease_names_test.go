package jsonl_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// The lease names its handle under "handleId" and, for readers of the
// earlier key, under "handle"; a lease written before the rename, with
// "handle" alone, still names its handle: the handle keeps writing and
// another open is refused as owned.
func TestLeaseHandleIDUnderBothKeys(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	h := header("lease-keys", "/w")
	owner := jsonl.Owner{WorkflowID: "session/lease-keys", RunID: "run-a"}
	hd, err := e.store.Create(bg, h, jsonl.CreateOptions{HandleID: "h-keys", Owner: owner})
	require.NoError(t, err)
	require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))

	path := filepath.Join(sessionDir(t, e.root, "/w", "lease-keys"), "session.lock")
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	var keys map[string]any
	require.NoError(t, json.Unmarshal(body, &keys))
	require.Equal(t, "h-keys", keys["handleId"])
	require.Equal(t, "h-keys", keys["handle"])

	// Replace the lease by one in the earlier form; every mutation reads
	// the lease at the path.
	old := `{"handle":"h-keys","owner":{"workflowId":"session/lease-keys","runId":"run-a"},"host":"elsewhere","pid":1,"acquiredAt":5}`
	require.NoError(t, os.WriteFile(path, []byte(old), 0o600))

	lease, err := e.newStore(nil).LeaseOf(bg, h.ID)
	require.NoError(t, err)
	require.Equal(t, "h-keys", lease.HandleID)
	require.NoError(t, hd.Append(bg, completedTurn(t, 6, 2)), "the handle the earlier lease names still writes")
	_, err = e.newStore(nil).Open(bg, h.ID, jsonl.AccessWrite, jsonl.OpenOptions{HandleID: newHandleID()})
	requireCode(t, err, wire.ErrAlreadyOwned)
	require.NoError(t, hd.Close(bg))
	lease, err = e.store.LeaseOf(bg, h.ID)
	require.NoError(t, err)
	require.Nil(t, lease, "the close of the handle the earlier lease names removes it")
}
