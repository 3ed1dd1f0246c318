package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// overTheWire returns err as a client sees it after the failure crossed the
// server: converted to a Failure and back.
func overTheWire(err error) error {
	fc := temporal.GetDefaultFailureConverter()
	return fc.FailureToError(fc.ErrorToFailure(err))
}

func TestStartErrorAlreadyStarted(t *testing.T) {
	cause := serviceerror.NewWorkflowExecutionAlreadyStarted("Workflow execution is already running", "req", "run-1")
	err := startError("s1", fmt.Errorf("start: %w", cause))
	require.EqualError(t, err, `session "s1" already exists`)
	require.ErrorIs(t, err, ErrAlreadyExists)
	require.ErrorIs(t, err, wire.ErrAlreadyExists, "the store's class of the same text matches too")
	require.NotErrorIs(t, err, ErrNotLive)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	require.ErrorAs(t, err, &started, "the service error stays reachable")
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "s1", ce.SessionID)
	require.Equal(t, "SessionAlreadyExists", ce.Type)

	other := startError("s1", errors.New("connection refused"))
	require.NotErrorIs(t, other, ErrAlreadyExists)
	require.Contains(t, other.Error(), "connection refused")
}

func TestCallErrorMapping(t *testing.T) {
	// An application error keeps its reference text and type, without the
	// SDK's "(type: ..., retryable: ...)" suffix.
	seq := overTheWire(temporal.NewNonRetryableApplicationError(`append seq mismatch for "s1": expected 3 at index 0, got 5`, "SeqMismatch", nil))
	require.Contains(t, seq.Error(), "(type: SeqMismatch")
	err := callError("append to session", "s1", seq)
	require.EqualError(t, err, `append seq mismatch for "s1": expected 3 at index 0, got 5`)
	require.ErrorIs(t, err, ErrSeqMismatch)
	require.ErrorIs(t, err, wire.ErrSeqMismatch)
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)

	// A store error reported by an activity matches the store's sentinel.
	nf := callError("session", "s2", overTheWire(temporal.NewNonRetryableApplicationError(`session "s2" not found`, string(jsonl.CodeNotFound), nil)))
	require.ErrorIs(t, nf, wire.ErrNotFound)
	require.NotErrorIs(t, nf, wire.ErrCorrupt)

	// A disposal aggregate carries its parts.
	parts := []wire.ErrorInfo{{Message: "hook failed", Type: "Error"}, {Message: "close failed", Type: "IOError"}}
	agg := callError("dispose session", "s3", overTheWire(temporal.NewNonRetryableApplicationError(
		`agent "s3" disposal failed: hook failed; close failed`, wire.ErrTypeAggregate, nil, parts)))
	require.EqualError(t, agg, `agent "s3" disposal failed: hook failed; close failed`)
	require.ErrorIs(t, agg, ErrAggregate)
	var ce *Error
	require.ErrorAs(t, agg, &ce)
	require.Equal(t, parts, ce.Errors)

	// A missing execution is ErrNotRunning.
	gone := callError("append to session", "s4", serviceerror.NewNotFound("workflow execution already completed"))
	require.ErrorIs(t, gone, ErrNotRunning)
	require.EqualError(t, gone, `append to session "s4": not running: workflow execution already completed`)

	// Anything else is wrapped, not classified.
	plain := callError("describe session", "s5", context.DeadlineExceeded)
	require.ErrorIs(t, plain, context.DeadlineExceeded)
	require.False(t, errors.As(plain, &ce))
	require.NoError(t, callError("x", "y", nil))
}

func TestCreateStartsAndWaitsReady(t *testing.T) {
	info := wire.SessionInfo{SessionID: "s1", WorkflowID: "session/s1", RunID: "run-1", NextSeq: 4, FirstLiveSeq: 3, Source: wire.SourceStartup,
		Handle: jsonl.HandleRef{SessionID: "s1", HandleID: "h-1", Access: jsonl.AccessWrite}}
	var started temporalclient.StartWorkflowOptions
	var startedType any
	var startedArgs []any
	var upd temporalclient.UpdateWorkflowOptions
	f := &fakeTemporal{
		execute: func(opts temporalclient.StartWorkflowOptions, wf any, args []any) (temporalclient.WorkflowRun, error) {
			started, startedType, startedArgs = opts, wf, args
			return &fakeRun{id: opts.ID, runID: "run-1"}, nil
		},
		update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			upd = opts
			return &fakeUpdate{result: info}, nil
		},
	}
	c := New(f, Options{TaskQueue: "tq"})
	req := wire.CreateSessionRequest{SessionID: "s1", Meta: &wire.SessionMeta{Cwd: "/w"}}
	s, err := c.Create(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, info, s.SessionInfo)

	require.Equal(t, "session/s1", started.ID)
	require.Equal(t, "tq", started.TaskQueue)
	require.Equal(t, enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, started.WorkflowIDReusePolicy)
	require.Equal(t, enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL, started.WorkflowIDConflictPolicy)
	require.True(t, started.WorkflowExecutionErrorWhenAlreadyStarted, "without it the SDK returns the running execution instead of an error")
	require.Equal(t, wire.CreateSessionName, startedType)
	require.Equal(t, []any{req}, startedArgs)

	require.Equal(t, "session/s1", upd.WorkflowID)
	require.Empty(t, upd.RunID, "update-with-start targets the run it starts")
	require.Equal(t, wire.UpdateWaitReady, upd.UpdateName)
	require.Equal(t, temporalclient.WorkflowUpdateStageCompleted, upd.WaitForStage)
	require.Equal(t, []string{"update-with-start session/s1 WaitReady"}, f.recorded(), "the start and WaitReady go in one request")
}

func TestWorkflowTaskTimeoutReachesTheStart(t *testing.T) {
	var started []temporalclient.StartWorkflowOptions
	f := &fakeTemporal{
		execute: func(opts temporalclient.StartWorkflowOptions, _ any, _ []any) (temporalclient.WorkflowRun, error) {
			started = append(started, opts)
			return &fakeRun{id: opts.ID, runID: "r"}, nil
		},
		update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			return &fakeUpdate{result: wire.SessionInfo{SessionID: "s1"}}, nil
		},
	}
	ctx := context.Background()
	_, err := New(f, Options{WorkflowTaskTimeout: 2 * time.Second}).Create(ctx, wire.CreateSessionRequest{SessionID: "s1"})
	require.NoError(t, err)
	_, err = New(f, Options{WorkflowTaskTimeout: 3 * time.Second}).Resume(ctx, "s1", wire.ResumeSessionRequest{})
	require.NoError(t, err)
	_, err = New(f, Options{}).Create(ctx, wire.CreateSessionRequest{SessionID: "s2"})
	require.NoError(t, err)
	_, err = New(f, Options{WorkflowTaskTimeout: -time.Second}).Create(ctx, wire.CreateSessionRequest{SessionID: "s3"})
	require.NoError(t, err)
	require.Len(t, started, 4)
	require.Equal(t, 2*time.Second, started[0].WorkflowTaskTimeout)
	require.Equal(t, 3*time.Second, started[1].WorkflowTaskTimeout)
	require.Equal(t, time.Second, started[2].WorkflowTaskTimeout, "zero takes sessionflow's default")
	require.Zero(t, started[3].WorkflowTaskTimeout, "a negative timeout leaves it to the server")
	require.Zero(t, New(f, Options{WorkflowTaskTimeout: -time.Second}).Options().WorkflowTaskTimeout)
}

func TestCreateFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("already running", func(t *testing.T) {
		f := &fakeTemporal{execute: func(temporalclient.StartWorkflowOptions, any, []any) (temporalclient.WorkflowRun, error) {
			return nil, serviceerror.NewWorkflowExecutionAlreadyStarted("already started", "", "run-0")
		}}
		_, err := New(f, Options{}).Create(ctx, wire.CreateSessionRequest{SessionID: "s1"})
		require.EqualError(t, err, `session "s1" already exists`)
		require.ErrorIs(t, err, ErrAlreadyExists)
		require.Equal(t, []string{"update-with-start session/s1 WaitReady"}, f.recorded())
	})
	t.Run("start fails otherwise", func(t *testing.T) {
		f := &fakeTemporal{execute: func(temporalclient.StartWorkflowOptions, any, []any) (temporalclient.WorkflowRun, error) {
			return nil, serviceerror.NewUnavailable("connection refused")
		}}
		_, err := New(f, Options{}).Create(ctx, wire.CreateSessionRequest{SessionID: "s1"})
		require.Error(t, err)
		require.NotErrorIs(t, err, ErrAlreadyExists)
		var unavailable *serviceerror.Unavailable
		require.ErrorAs(t, err, &unavailable, "the cause is kept")
		require.Contains(t, err.Error(), `start the workflow of session "s1"`)
	})
	t.Run("creation failure from WaitReady", func(t *testing.T) {
		f := &fakeTemporal{
			execute: func(opts temporalclient.StartWorkflowOptions, _ any, _ []any) (temporalclient.WorkflowRun, error) {
				return &fakeRun{id: opts.ID, runID: "r"}, nil
			},
			update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
				return &fakeUpdate{err: overTheWire(temporal.NewNonRetryableApplicationError(workflows.MaxTokensText, wire.ErrTypeTypeError, nil))}, nil
			},
		}
		_, err := New(f, Options{}).Create(ctx, wire.CreateSessionRequest{SessionID: "s1"})
		require.EqualError(t, err, "agent maxTokens must be a positive safe integer")
		var ce *Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "TypeError", ce.Type)
	})
	t.Run("run ended before WaitReady reached it", func(t *testing.T) {
		aborted := overTheWire(workflows.CreationAbortedError("s1", "user hit stop"))
		f := &fakeTemporal{
			execute: func(opts temporalclient.StartWorkflowOptions, _ any, _ []any) (temporalclient.WorkflowRun, error) {
				return &fakeRun{id: opts.ID, runID: "r", err: fmt.Errorf("workflow execution error: %w", aborted)}, nil
			},
			update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
				return nil, serviceerror.NewNotFound("workflow execution already completed")
			},
		}
		_, err := New(f, Options{}).Create(ctx, wire.CreateSessionRequest{SessionID: "s1"})
		require.EqualError(t, err, `agent "s1" creation aborted`)
		require.ErrorIs(t, err, ErrAborted)
	})
	t.Run("empty id", func(t *testing.T) {
		_, err := New(&fakeTemporal{}, Options{}).Create(ctx, wire.CreateSessionRequest{})
		require.ErrorIs(t, err, ErrInvalidArgument)
	})
}

func TestResume(t *testing.T) {
	var args []any
	f := &fakeTemporal{
		execute: func(opts temporalclient.StartWorkflowOptions, wf any, a []any) (temporalclient.WorkflowRun, error) {
			require.Equal(t, wire.ResumeSessionName, wf)
			args = a
			return &fakeRun{id: opts.ID, runID: "r"}, nil
		},
		update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			return &fakeUpdate{result: wire.SessionInfo{SessionID: "s1", Source: wire.SourceResume}}, nil
		},
	}
	c := New(f, Options{})
	s, err := c.Resume(context.Background(), "s1", wire.ResumeSessionRequest{})
	require.NoError(t, err)
	require.Equal(t, wire.SourceResume, s.Source)
	require.Equal(t, []any{wire.ResumeSessionRequest{ResumeSessionID: "s1"}}, args, "the id fills the request")

	_, err = c.Resume(context.Background(), "s1", wire.ResumeSessionRequest{ResumeSessionID: "s2"})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestAppendRejectionAndDispose(t *testing.T) {
	ctx := context.Background()
	rejection := `append seq mismatch for "s1": expected 7 at index 0, got 9`
	var got temporalclient.UpdateWorkflowOptions
	f := &fakeTemporal{update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		got = opts
		switch opts.UpdateName {
		case wire.UpdateAppend:
			return &fakeUpdate{err: overTheWire(temporal.NewNonRetryableApplicationError(rejection, "SeqMismatch", nil))}, nil
		default:
			return &fakeUpdate{result: wire.DisposeResult{NextSeq: 7}}, nil
		}
	}}
	c := New(f, Options{})
	events := testEvents(t, 9, 1, 10)
	_, err := c.Append(ctx, "s1", session.WireEvents(events))
	require.EqualError(t, err, rejection)
	require.ErrorIs(t, err, ErrSeqMismatch)
	require.Equal(t, "session/s1", got.WorkflowID)
	require.Empty(t, got.RunID, "updates go to the latest run: continue-as-new changes it")
	require.Equal(t, []any{wire.AppendRequest{Events: session.WireEvents(events)}}, got.Args)
	require.Equal(t, temporalclient.WorkflowUpdateStageCompleted, got.WaitForStage)

	res, err := c.Dispose(ctx, "s1")
	require.NoError(t, err)
	require.Equal(t, int64(7), res.NextSeq)
	require.Equal(t, wire.UpdateDispose, got.UpdateName)
}

func TestCancelSignalsThenCancels(t *testing.T) {
	var payload any
	f := &fakeTemporal{
		signal: func(wid, rid, name string, arg any) error {
			require.Empty(t, rid)
			payload = arg
			return nil
		},
		cancel: func(wid, rid string) error { return nil },
	}
	require.NoError(t, New(f, Options{}).Cancel(context.Background(), "s1", "user hit stop"))
	require.Equal(t, []string{"signal session/s1 Abort", "cancel session/s1"}, f.recorded())
	b, err := json.Marshal(payload)
	require.NoError(t, err)
	require.JSONEq(t, `{"reason":"user hit stop","isError":false}`, string(b))

	gone := &fakeTemporal{signal: func(string, string, string, any) error { return serviceerror.NewNotFound("workflow not found") }}
	err = New(gone, Options{}).Cancel(context.Background(), "s9", "")
	require.ErrorIs(t, err, ErrNotRunning)
	require.Equal(t, []string{"signal session/s9 Abort"}, gone.recorded(), "no cancel after a failed signal")
}

func TestDescribe(t *testing.T) {
	d := wire.Description{SessionID: "s1", Phase: wire.PhaseLive, Source: wire.SourceStartup, HandleOpen: true, NextSeq: 3,
		Lifecycle: []wire.LifecycleEntry{{Type: wire.EntrySessionCreated}}}
	f := &fakeTemporal{query: func(wid, rid, q string) (converter.EncodedValue, error) {
		require.Equal(t, "session/s1", wid)
		require.Equal(t, wire.QueryDescribe, q)
		return fakeValue{d}, nil
	}}
	got, err := New(f, Options{}).Describe(context.Background(), "s1")
	require.NoError(t, err)
	require.Equal(t, d, got)
}

func TestLoopStartStop(t *testing.T) {
	ctx := context.Background()
	final := wire.LoopDescription{Active: false, Children: []wire.LoopChild{{SessionID: "a", Mode: "create", State: wire.ChildSettled}}}
	running := false
	f := &fakeTemporal{
		execute: func(opts temporalclient.StartWorkflowOptions, wf any, _ []any) (temporalclient.WorkflowRun, error) {
			require.Equal(t, wire.SessionLoopName, wf)
			require.Equal(t, enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL, opts.WorkflowIDConflictPolicy)
			if running {
				return nil, serviceerror.NewWorkflowExecutionAlreadyStarted("started", "", "r1")
			}
			running = true
			return &fakeRun{id: opts.ID, runID: "r1"}, nil
		},
		cancel: func(wid, rid string) error { return nil },
		getRun: func(wid, rid string) temporalclient.WorkflowRun { return &fakeRun{id: wid, result: final} },
	}
	c := New(f, Options{})
	l, err := c.LoopStart(ctx, "main", wire.SessionLoopInput{})
	require.NoError(t, err)
	require.Equal(t, Loop{LoopID: "main", WorkflowID: "loop/main", RunID: "r1"}, l)
	_, err = c.LoopStart(ctx, "main", wire.SessionLoopInput{})
	require.EqualError(t, err, `loop "main" is already running`)
	require.ErrorIs(t, err, ErrLoopAlreadyRunning)

	require.NoError(t, c.LoopStop(ctx, "main"))
	d, err := c.LoopResult(ctx, "main")
	require.NoError(t, err)
	require.Equal(t, final, d)
	require.Equal(t, []string{"execute loop/main", "execute loop/main", "cancel loop/main", "get loop/main"}, f.recorded())
}

func TestErrorIsOnlyMatchesSentinels(t *testing.T) {
	a := &Error{Type: wire.ErrTypeNotLive, Message: `session "a" is not live (phase setup)`}
	b := &Error{Type: wire.ErrTypeNotLive, Message: `session "b" is not live (phase setup)`}
	require.ErrorIs(t, a, ErrNotLive)
	require.NotErrorIs(t, a, b, "two concrete errors are not each other's class")
	require.Equal(t, "SessionNotLive", ErrNotLive.Error())
	require.True(t, strings.HasPrefix(a.Error(), "session"))
	require.NotErrorIs(t, &Error{Type: ""}, &wire.StoreError{})
}

func TestOptionsDefaults(t *testing.T) {
	o := New(&fakeTemporal{}, Options{}).Options()
	require.Equal(t, DefaultTaskQueue, o.TaskQueue)
	require.Equal(t, wire.DefaultMaxBatchBytes, o.MaxBatchBytes)
	require.Equal(t, DefaultMaxBatchEvents, o.MaxBatchEvents)
	require.Equal(t, "loop/x", LoopWorkflowID("x"))
}

// When the namespace has sessionflow's search attributes, sessions are
// started with Options.SearchAttributes so the workflow records its phase;
// otherwise (unregistered, or the operator API refused) they are not, and
// the caller's options are never modified.
func TestCreateAsksForSearchAttributesOnlyWhenRegistered(t *testing.T) {
	keyword := enumspb.INDEXED_VALUE_TYPE_KEYWORD
	for name, tc := range map[string]struct {
		attrs map[string]enumspb.IndexedValueType
		want  bool
	}{
		"registered":  {map[string]enumspb.IndexedValueType{"SessionId": keyword, "SessionPhase": keyword, "SessionCwd": keyword}, true},
		"one missing": {map[string]enumspb.IndexedValueType{"SessionId": keyword, "SessionPhase": keyword}, false},
		"wrong type":  {map[string]enumspb.IndexedValueType{"SessionId": keyword, "SessionPhase": enumspb.INDEXED_VALUE_TYPE_TEXT, "SessionCwd": keyword}, false},
		"not allowed": {nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			var startedArgs []any
			f := &fakeTemporal{
				searchAttrs: tc.attrs,
				execute: func(opts temporalclient.StartWorkflowOptions, _ any, args []any) (temporalclient.WorkflowRun, error) {
					startedArgs = args
					return &fakeRun{id: opts.ID, runID: "run-1"}, nil
				},
				update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
					return &fakeUpdate{result: wire.SessionInfo{SessionID: "s1"}}, nil
				},
			}
			callerOpts := &wire.Options{MaxBatchBytes: 1000}
			_, err := New(f, Options{}).Create(context.Background(), wire.CreateSessionRequest{SessionID: "s1", Options: callerOpts})
			require.NoError(t, err)
			sent := startedArgs[0].(wire.CreateSessionRequest)
			require.Equal(t, tc.want, sent.Options.SearchAttributes)
			require.Equal(t, 1000, sent.Options.MaxBatchBytes)
			require.False(t, callerOpts.SearchAttributes, "the caller's options are not modified")
		})
	}
}

// A failure reported by WaitReady is returned only once the run has ended,
// i.e. once the workflow's rollback is done and the id is free again.
func TestCreateFailureWaitsForTheRollback(t *testing.T) {
	failure := temporal.NewNonRetryableApplicationError("setup exploded", "SetupFailed", nil)
	run := &fakeRun{id: "session/s1", runID: "run-1", err: failure}
	f := &fakeTemporal{
		execute: func(temporalclient.StartWorkflowOptions, any, []any) (temporalclient.WorkflowRun, error) {
			return run, nil
		},
		update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
			return &fakeUpdate{get: func() { require.Zero(t, run.gets, "the run is awaited after the update reports") }, err: failure}, nil
		},
	}
	_, err := New(f, Options{}).Create(context.Background(), wire.CreateSessionRequest{SessionID: "s1"})
	require.ErrorContains(t, err, "setup exploded")
	require.Equal(t, 1, run.gets, "Create returned before the run ended")
}
