package integration

import (
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sessionflow/sessionflow/wire"
)

func init() {
	recordPaths = append(recordPaths,
		recordPath{name: "resume-forfeit-dead-owner", run: recordResumeForfeitDeadOwner},
		recordPath{name: "create-foreign-workflow-id", run: recordCreateForeignWorkflowID},
	)
}

// recordResumeForfeitDeadOwner: a live session's workflow is terminated
// while it holds the lease; the resume's open is refused as owned, the
// ForfeitDeadOwner activity (the resume-forfeit-dead-owner version marker)
// forfeits the closed owner's lease, the open succeeds, crash repair runs,
// one append, Dispose.
func recordResumeForfeitDeadOwner(t *testing.T, w *world) []fixture {
	id := w.id("rec-forfeit")
	wid := wire.WorkflowID(id)
	first := w.create(wire.CreateSessionRequest{SessionID: id})
	w.awaitLive(id)
	w.appendEvents(id, liveTurn(t, 0, 1, "before the crash"))
	require.NoError(t, w.c.TerminateWorkflow(w.ctx(), wid, first.GetRunID(), "the harness crashed"))
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, w.status(wid))
	require.NotNil(t, w.lease(id), "the terminated owner left its lease")
	run := w.resume(wire.ResumeSessionRequest{ResumeSessionID: id})
	w.awaitLive(id)
	require.Equal(t, int64(6), w.waitReady(id).NextSeq, "five events and the end-seed marker")
	w.appendEvents(id, liveTurn(t, 6, 2, "after the crash"))
	w.dispose(id)
	require.NoError(t, run.Get(w.ctx(), nil))
	require.Nil(t, w.lease(id))
	return only("resume-forfeit-dead-owner", wid, run)
}

// recordCreateForeignWorkflowID: CreateSession started under a workflow id
// other than the session's: refused before any activity (the
// session-identity-check version marker), nothing stored.
func recordCreateForeignWorkflowID(t *testing.T, w *world) []fixture {
	id := w.id("rec-foreign")
	wid := "foreign-" + id
	run := w.startWorkflow(wid, wire.CreateSessionName, wire.CreateSessionRequest{SessionID: id})
	requireAppError(t, run.Get(w.ctx(), nil),
		`session "`+id+`" must run under workflow id "session/`+id+`", not "`+wid+`" (docs/API.md: Workflow ids)`, wire.ErrTypeInvalidArgument)
	w.requireNothingStored(id)
	return only("create-foreign-workflow-id", wid, run)
}
