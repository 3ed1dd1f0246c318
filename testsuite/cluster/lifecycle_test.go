package cluster

// The lifecycle paths on the cluster: create, append, dispose, resume,
// abort, and the search attributes listed from SQL visibility.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/cluster"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
)

// TestClusterTopology: the server runs deploy's configuration, several
// history shards on PostgreSQL with SQL visibility, and both workers poll.
func TestClusterTopology(t *testing.T) {
	ctx := ctxT(t)
	info, err := lc.Client().WorkflowService().GetClusterInfo(ctx, &workflowservice.GetClusterInfoRequest{})
	require.NoError(t, err)
	require.Equal(t, int32(4), info.GetHistoryShardCount())
	require.Equal(t, "postgres12", info.GetPersistenceStore())
	require.Contains(t, info.GetVisibilityStore(), "postgres12")

	tq, err := lc.Client().DescribeTaskQueue(ctx, lc.TaskQueue(), enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	require.NoError(t, err)
	polling := map[string]bool{}
	for _, p := range tq.GetPollers() {
		polling[p.GetIdentity()] = true
	}
	for _, w := range lc.Workers() {
		require.True(t, polling[w.Identity], "worker %s polls %s", w.Identity, lc.TaskQueue())
	}
	require.Len(t, lc.Workers(), 2)
}

func TestLifecycleOnCluster(t *testing.T) {
	ctx := ctxT(t)
	cl := newClient()
	id := sessionID("lifecycle")
	seed := []session.Event{sessiontest.TurnStart(t, 0, 1), sessiontest.AssistantText(t, 1, 1, "seeded"), sessiontest.TurnEnd(t, 2, 1)}

	s, err := cl.Create(ctx, wire.CreateSessionRequest{
		SessionID: id, Seed: session.WireEvents(seed), Meta: &wire.SessionMeta{Cwd: "/work/cluster"}, Options: sessionOptions(),
	})
	require.NoError(t, err)
	require.Equal(t, id, s.SessionID)
	require.Equal(t, int64(4), s.NextSeq, "the seed and its end-seed marker")
	require.Equal(t, "/work/cluster", s.Header.Cwd)
	firstRun := s.RunID

	turn := sessiontest.LiveTurn(t, 4, 2, "hello from the cluster")
	res, err := cl.Append(ctx, id, session.WireEvents(turn))
	require.NoError(t, err)
	require.Equal(t, int64(9), res.NextSeq)

	d, err := cl.Describe(ctx, id)
	require.NoError(t, err)
	require.Equal(t, wire.PhaseLive, d.Phase)
	require.True(t, d.HandleOpen)
	require.Equal(t, int64(9), d.NextSeq)

	// The search attributes, read back from PostgreSQL: through List
	// (visibility queries) and in the visibility database itself.
	listed := awaitListed(t, cl, id, func(l client.ListedSession) bool { return l.Phase == wire.PhaseLive })
	require.Equal(t, client.SourceSearchAttributes, listed.Source)
	require.Equal(t, "/work/cluster", listed.Cwd)
	require.Equal(t, wire.CreateSessionName, listed.WorkflowType)
	// SQL visibility keeps custom search attributes in a jsonb column under
	// the namespace's field names (Keyword01, ...): the session's values are
	// among its values.
	row, err := lc.Psql(ctx, "temporal_visibility",
		"SELECT string_agg(value, '|' ORDER BY value) FROM executions_visibility, jsonb_each_text(search_attributes) "+
			"WHERE workflow_id = '"+wire.WorkflowID(id)+"' AND run_id = '"+firstRun+"'")
	require.NoError(t, err)
	values := strings.Split(strings.TrimSpace(row), "|")
	for _, v := range []string{id, "live", "/work/cluster"} {
		require.Contains(t, values, v, "visibility row %q", row)
	}

	disposed, err := cl.Dispose(ctx, id)
	require.NoError(t, err)
	require.Equal(t, int64(9), disposed.NextSeq)
	require.NoError(t, lc.Client().GetWorkflow(ctx, wire.WorkflowID(id), firstRun).Get(ctx, nil))
	evs := requireHolds(t, id, nil)
	require.Len(t, evs, 9)
	require.Equal(t, wire.TypeEndSeed, evs[3].Type)
	for i, e := range seed {
		require.JSONEq(t, canonical(t, e), canonical(t, evs[i]))
	}
	for i, e := range turn {
		require.JSONEq(t, canonical(t, e), canonical(t, evs[4+i]))
	}
	lease, err := store(t).LeaseOf(ctx, id)
	require.NoError(t, err)
	require.Nil(t, lease, "disposal releases the lease")

	// Resume on whichever worker takes it, append, dispose.
	r, err := cl.Resume(ctx, id, wire.ResumeSessionRequest{Options: sessionOptions()})
	require.NoError(t, err)
	require.NotEqual(t, firstRun, r.RunID)
	require.Equal(t, wire.SourceResume, r.Source)
	require.Equal(t, int64(10), r.NextSeq, "the resume stores an end-seed marker")
	require.Equal(t, int64(9), r.FirstLiveSeq)
	again := sessiontest.LiveTurn(t, 10, 3, "after the resume")
	res, err = cl.Append(ctx, id, session.WireEvents(again))
	require.NoError(t, err)
	require.Equal(t, int64(15), res.NextSeq)
	awaitListed(t, cl, id, func(l client.ListedSession) bool {
		return l.RunID == r.RunID && l.Phase == wire.PhaseLive && l.WorkflowType == wire.ResumeSessionName
	})
	_, err = cl.Dispose(ctx, id)
	require.NoError(t, err)
	all := requireHolds(t, id, nil)
	require.Len(t, all, 15)
	require.Equal(t, wire.TypeEndSeed, all[9].Type)
	for i, e := range again {
		require.JSONEq(t, canonical(t, e), canonical(t, all[10+i]))
	}
}

// awaitListed waits until List shows session id in a state ok accepts.
// Visibility is written asynchronously, so a fresh state may take a moment.
func awaitListed(t *testing.T, cl *client.Client, id string, ok func(client.ListedSession) bool) client.ListedSession {
	t.Helper()
	var last []client.ListedSession
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ls, err := cl.List(ctxT(t))
		require.NoError(t, err)
		last = ls
		for _, l := range ls {
			if l.SessionID == id && ok(l) {
				return l
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("session %s not listed as expected within a minute; listed: %+v", id, last)
	return client.ListedSession{}
}

// TestAbortOnCluster: a session cancelled before it is live is aborted and
// rolled back. Its run is started on a task queue no worker polls yet and
// cancelled there, so the abort is decided by the first workflow task of the
// worker started afterwards.
func TestAbortOnCluster(t *testing.T) {
	ctx := ctxT(t)
	id := sessionID("abort")
	queue := "abort-" + runTag
	run, err := lc.Client().ExecuteWorkflow(ctx, temporalclient.StartWorkflowOptions{
		ID: wire.WorkflowID(id), TaskQueue: queue,
	}, wire.CreateSessionName, wire.CreateSessionRequest{SessionID: id, Options: sessionOptions()})
	require.NoError(t, err)
	cl := client.New(lc.Client(), client.Options{TaskQueue: queue, Namespace: lc.Namespace()})
	require.NoError(t, cl.Cancel(ctx, id, ""))

	slot := len(lc.Workers())
	_, err = lc.StartWorker(ctx, slot, cluster.WorkerOptions{TaskQueue: queue})
	require.NoError(t, err)
	t.Cleanup(func() { lc.StopWorker(slot) })

	err = run.Get(ctx, nil)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, "AbortError", app.Type())
	require.Equal(t, `agent "`+id+`" creation aborted`, app.Message())

	st := store(t)
	snap, err := st.Stat(context.Background(), id)
	require.NoError(t, err)
	require.Nil(t, snap, "an aborted session stores nothing")
	lease, err := st.LeaseOf(context.Background(), id)
	require.NoError(t, err)
	require.Nil(t, lease)

	// The id is free: the cluster's workers create it.
	s, err := newClient().Create(ctx, wire.CreateSessionRequest{SessionID: id, Options: sessionOptions()})
	require.NoError(t, err)
	require.NotEqual(t, run.GetRunID(), s.RunID)
	_, err = newClient().Dispose(ctx, id)
	require.NoError(t, err)
}
