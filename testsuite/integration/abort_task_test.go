package integration

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// A caller's abort is a signal followed by a cancellation. When both reach
// the session in one workflow task (here: they are sent while no worker
// polls), the signalled reason still decides the failure: an Error reason
// is returned as that error, an owner unload as `owner disposed during
// setup`, not the bare `creation aborted` of a cancellation alone.
func TestAbortSignalAndCancelInOneWorkflowTask(t *testing.T) {
	cases := []struct {
		name     string
		send     func(w *world, wid string) error
		msg, typ string
	}{
		{"error reason", func(w *world, wid string) error {
			return w.c.SignalWorkflow(w.ctx(), wid, "", wire.SignalAbort, wire.AbortRequest{Reason: "caller stopped", IsError: true})
		}, "caller stopped", "Error"},
		{"owner unload", func(w *world, wid string) error {
			return w.c.SignalWorkflow(w.ctx(), wid, "", wire.SignalOwnerUnload, nil)
		}, "setup aborted: owner disposed during setup", "OwnerDisposed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, shared, jsonl.CompressionZstd)
			first := w.startWorker()
			id := w.id("abort-task-" + c.typ)
			wid := wire.WorkflowID(id)
			w.hooks.blockSetup(id)
			run := w.create(wire.CreateSessionRequest{SessionID: id, Hooks: allHooks})
			w.awaitSetup(id)
			require.NoError(t, first.Stop())
			require.NoError(t, c.send(w, wid))
			require.NoError(t, w.c.CancelWorkflow(w.ctx(), wid, ""))
			w.startWorker()
			msg := c.msg
			if c.typ == "OwnerDisposed" {
				msg = `agent "` + id + `" ` + c.msg
			}
			requireAppError(t, run.Get(w.ctx(), nil), msg, c.typ)
			w.requireNothingStored(id)
			require.Nil(t, w.lease(id))
		})
	}
}
