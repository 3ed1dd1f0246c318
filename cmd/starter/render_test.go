package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

func TestRenderDescription(t *testing.T) {
	d := wire.Description{
		SessionID: "s1", Phase: wire.PhaseClosed, Source: wire.SourceResume,
		Handle:     &jsonl.HandleRef{SessionID: "s1", HandleID: "h-1", Access: jsonl.AccessWrite},
		HandleOpen: false, NextSeq: 12, PendingEvents: 0,
		Lifecycle:          []wire.LifecycleEntry{{Type: wire.EntrySessionCreated}, {Type: wire.EntrySessionStart, Source: wire.SourceResume}},
		CompensationErrors: []wire.CompensationError{{Step: "close-handle", Error: wire.ErrorInfo{Message: "disk full", Type: "IOError"}}},
		Failure:            &wire.ErrorInfo{Message: `agent "s1" creation aborted`, Type: wire.ErrTypeAbort},
	}
	var b bytes.Buffer
	require.NoError(t, renderDescription(&b, d))
	require.Equal(t, `session             s1
phase               closed
source              resume
handle              h-1 (write, closed)
next seq            12
pending events      0
lifecycle           session/created, agent/session-start (resume)
failure             agent "s1" creation aborted (AbortError)
compensation error  close-handle: disk full (IOError)
`, b.String())

	b.Reset()
	require.NoError(t, renderDescription(&b, wire.Description{SessionID: "s2", Phase: wire.PhasePreparing}))
	require.Contains(t, b.String(), "handle          -\n")
	require.Contains(t, b.String(), "lifecycle       -\n")
	require.NotContains(t, b.String(), "failure")

	b.Reset()
	require.NoError(t, writeJSON(&b, d))
	var back map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &back))
	require.Equal(t, "closed", back["phase"])
	require.Equal(t, false, back["handleOpen"])
	require.Equal(t, float64(12), back["nextSeq"])
	require.Equal(t, map[string]any{"sessionId": "s1", "handleId": "h-1", "access": "write"}, back["handle"])
	require.Equal(t, map[string]any{"message": `agent "s1" creation aborted`, "type": "AbortError"}, back["failure"])
	require.Len(t, back["compensationErrors"], 1)
}

func TestRenderList(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	list := []client.ListedSession{
		{SessionID: "a", WorkflowID: "session/a", RunID: "r1", WorkflowType: wire.CreateSessionName, StartTime: t0,
			Phase: wire.PhaseLive, Cwd: "/w", Source: client.SourceSearchAttributes},
		{SessionID: "b", WorkflowID: "session/b", RunID: "r2", WorkflowType: wire.ResumeSessionName, StartTime: t0.Add(time.Second),
			Source: client.SourceDescribe, Error: "describe: context deadline exceeded"},
	}
	var b bytes.Buffer
	require.NoError(t, renderList(&b, list))
	require.Equal(t, `SESSION  PHASE  CWD  WORKFLOW TYPE  STARTED                   FROM
a        live   /w   CreateSession  2026-05-01T12:00:00.000Z  attributes
b        ?      -    ResumeSession  2026-05-01T12:00:01.000Z  describe
b: describe: context deadline exceeded
`, b.String())

	b.Reset()
	require.NoError(t, renderList(&b, nil))
	require.Equal(t, "no running sessions\n", b.String())

	b.Reset()
	require.NoError(t, writeJSON(&b, list))
	var back []map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &back))
	require.Equal(t, map[string]any{"sessionId": "a", "workflowId": "session/a", "runId": "r1", "workflowType": "CreateSession",
		"startTime": "2026-05-01T12:00:00Z", "phase": "live", "cwd": "/w", "source": "searchAttributes"}, back[0])
	require.Equal(t, "describe: context deadline exceeded", back[1]["error"])
	require.NotContains(t, back[1], "phase")
}

func TestRenderSessionAndLoop(t *testing.T) {
	s := &client.Session{SessionInfo: wire.SessionInfo{SessionID: "s1", WorkflowID: "session/s1", RunID: "r1", Source: wire.SourceStartup,
		Handle: jsonl.HandleRef{SessionID: "s1", HandleID: "h-1", Access: jsonl.AccessWrite}, Header: wire.Header{ID: "s1", Cwd: "/w", ParentSession: "p"},
		NextSeq: 11, FirstLiveSeq: 10, LastTurn: 2}}
	var b bytes.Buffer
	require.NoError(t, renderSession(&b, s))
	require.Equal(t, `session "s1" is live
  workflow        session/s1 (run r1)
  source          startup
  handle          h-1
  cwd             /w
  parent          p
  next seq        11
  first live seq  10
  last turn       2
`, b.String())

	b.Reset()
	d := wire.LoopDescription{
		Children: []wire.LoopChild{
			{SessionID: "a", Mode: "create", ConfigID: "cfg", WorkflowID: "session/a", State: wire.ChildSettled, WasLive: true},
			{SessionID: "b", Mode: "resume", WorkflowID: "session/b", State: wire.ChildSettled,
				Error: &wire.ErrorInfo{Message: workflows.LoopInactiveText, Type: wire.ErrTypeLoopInactive}},
		},
		ConfigStartFailures: []wire.ConfigStartFailure{{ConfigID: "cfg2", SessionID: "c", Mode: "resume", Error: wire.ErrorInfo{Message: `session "c" not found`, Type: "SessionNotFound"}}},
	}
	require.NoError(t, renderLoop(&b, "main", d))
	require.Equal(t, `loop "main" stopped: 2 sessions
SESSION  MODE    CONFIG  STATE    WAS LIVE  ERROR
a        create  cfg     settled  true      -
b        resume  -       settled  false     agent loop is not active (LoopInactive)
config start failed: agent "cfg2": resume of "c": session "c" not found (SessionNotFound)
`, b.String())
}
